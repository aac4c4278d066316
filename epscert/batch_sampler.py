"""``epscert.BatchSampler``: the batches a training loop runs and their certificate, from one object.

    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=60_000, batch_size=256, epochs=10)
    len(bs)                              # 234 steps per epoch x 10 epochs
    for idx in bs: ...                   # numpy int64 index arrays, one per step
    bs.accountant(noise_multiplier=1.0)  # the epscert.Accountant for exactly this run

It is a valid ``batch_sampler=`` for ``torch.utils.data.DataLoader`` (see
:mod:`epscert.integrations.torch` for a loader that keeps empty batches).
"""

from __future__ import annotations

from epscert.accountant import Accountant
from epscert.batching.indices import BatchIndexSampler


class BatchSampler(BatchIndexSampler):
    """Batch indices of one certified sampler (:class:`~epscert.batching.indices.BatchIndexSampler`)."""

    def accountant(self, noise_multiplier: float, epochs: int | None = None, **kwargs) -> Accountant:
        """The :class:`epscert.Accountant` of this sampler run for ``epochs`` (default: all) epochs.

        Further keyword arguments (method, samples, error_prob, seed, ...) go to the Accountant.
        """
        args = self.accountant_arguments()
        if epochs is not None:
            args["epochs"] = epochs
        return Accountant(noise_multiplier=noise_multiplier, **args, **kwargs)
