"""Adapters for training frameworks: the only room that imports torch, opacus, jax or jax_privacy,
and only lazily (inside functions), so ``import epscert`` loads none of them.

- :mod:`epscert.integrations.torch`: a ``DataLoader`` over an :class:`epscert.BatchSampler` (extra ``[torch]``).
- :mod:`epscert.integrations.opacus`: ``EpscertAccountant`` for Opacus's ``PrivacyEngine`` (extra ``[torch]``).
- :mod:`epscert.integrations.jax_privacy`: accountants for JAX Privacy's batch selection (extra ``[jax]``).
"""
