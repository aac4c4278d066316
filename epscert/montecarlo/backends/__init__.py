"""Sampling backends: where a shard's Monte Carlo kernels run.

- ``numpy`` (the default): the sampler object's own ``draw`` on one CPU core, numpy streams from
  :func:`epscert.rng.block_generator`.
- ``jax``: the sampler's JAX kernels (the module the sampler names in ``jax_kernels_module``, of of its mechanism's room that
  imports JAX lazily) on JAX's default device, with the engine's shared part
  :mod:`epscert.montecarlo.backends.jax_backend`; float64; its own stream from
  :func:`epscert.rng.stream_key_words`, identical on CPU and GPU.
- ``auto``: ``jax`` when JAX is installed, sees a GPU and has a kernel for the request; else ``numpy``.

Both backends return the same exact integer sums (:mod:`epscert.montecarlo.accumulator`), so the
certificate code downstream does not know which one ran. Accumulators carry a tag per backend
and device that ran a shard (``'numpy:cpu'``, ``'jax:gpu:NVIDIA H100 80GB HBM3'``), which the rows
record. This module knows no mechanism: what has a JAX kernel is the sampler's to say.
"""

from __future__ import annotations

import importlib
import importlib.util

from epscert.names import BACKENDS, Method

NUMPY_TAG = "numpy:cpu"


def jax_installed() -> bool:
    """Whether this process can import JAX (looked up, not imported)."""
    return importlib.util.find_spec("jax") is not None


def jax_has_kernel(sampler: object, method: Method) -> bool:
    """Whether the JAX backend runs (sampler, method): the kernels' own ``check_supported``, the one
    table of what they cover, including the range checks of the conditioning bounds (so ``auto``
    falls back to numpy wherever ``jax`` would refuse). Those modules import JAX only when drawing."""
    kernels = kernels_of(sampler)
    if kernels is None:
        return False
    try:
        kernels.check_supported(sampler, method)
    except ValueError:
        return False
    return True


def kernels_of(sampler: object):
    """The module named by the sampler's ``jax_kernels_module`` (imported here, lazily), or None."""
    name = getattr(sampler, "jax_kernels_module", None)
    return None if name is None else importlib.import_module(name)


def jax_kernels_of(sampler: object, method: Method):
    """The sampler's JAX kernel module, checked for (sampler, method): ValueError (before any work) when
    it has none or they do not cover the request."""
    kernels = kernels_of(sampler)
    if kernels is None:
        raise ValueError(f"backend='jax' has no kernel for method={method.value!r} with {type(sampler).__name__}")
    kernels.check_supported(sampler, method)
    return kernels


def jax_tag() -> str:
    """The accumulator tag of a shard that ran on JAX's default device ('jax:platform:kind')."""
    from epscert.montecarlo.backends import jax_backend

    return f"jax:{jax_backend.device_name()}"


def resolve(backend: str, sampler: object, method: Method) -> str:
    """'numpy' or 'jax' for a configured backend name (``auto`` decided here, per process)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got backend={backend!r}")
    if backend == "numpy":
        return "numpy"
    if backend == "jax":
        if not jax_installed():
            raise ValueError("backend='jax' needs JAX: pip install 'epscert[jax]' (CPU) or 'epscert[gpu]' (CUDA)")
        return "jax"
    if not jax_installed() or not jax_has_kernel(sampler, method):
        return "numpy"
    from epscert.montecarlo.backends import jax_backend

    return "jax" if jax_backend.gpu_visible() else "numpy"


def check_available(config) -> None:
    """ValueError (one line) when ``config`` asks for ``backend='jax'`` with Monte Carlo work and this
    process cannot import JAX. Call it where the work will run here (the API, local runners), before any work."""
    if config.backend == "jax" and any(m.is_monte_carlo for m in config.resolved) and not jax_installed():
        raise ValueError("backend='jax' needs JAX, which is not installed here: pip install 'epscert[jax]' (CPU) "
                         "or 'epscert[gpu]' (CUDA), or use backend='numpy'")


def resolved_here(config) -> str:
    """The backend ``config`` runs on in this process: ``auto`` decided as :func:`resolve` decides it per
    Monte Carlo method ('jax' only if every one would take it); the configured name when no method samples."""
    mc = [m for m in config.resolved if m.is_monte_carlo]
    if config.backend != "auto" or not mc:
        return config.backend
    picks = {resolve("auto", config.mc_sampler(m), m) for m in mc}
    return "jax" if picks == {"jax"} else "numpy"


def split_tags(tags: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(backend, device) columns for a set of tags: comma-joined sorted names, None when empty."""
    if not tags:
        return None, None
    backends = sorted({t.split(":", 1)[0] for t in tags})
    devices = sorted({t.split(":", 1)[1] for t in tags})
    return ",".join(backends), ",".join(devices)
