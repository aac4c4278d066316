"""The in-process Python API: ``certify(...) -> pyarrow.Table``.

It runs exactly the functions the Beam job distributes (see
:mod:`epscert.results.tables`).
"""

from __future__ import annotations

from typing import Callable, Sequence

import pyarrow as pa

from epscert.params import CertifyConfig
from epscert.results.tables import certify_config

__all__ = ["certify", "certify_config"]


def certify(
    sampler: str = "balls_and_bins",
    sigma: float = 1.0,
    steps: int = 1000,
    epochs: int = 1,
    epsilons: Sequence[float] = (1.0,),
    method: str | Sequence[str] = "auto",
    samples: int = 100_000,
    error_prob: float = 0.01,
    seed: int = 0,
    direction: str = "both",
    orders: str | Sequence[int] | None = None,
    shards: int = 1,
    pld_discretization: float | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
    progress: Callable[[int], None] | None = None,
    backend: str = "numpy",
) -> pa.Table:
    """δ(ε) of a DP-SGD batch sampler, with certified Monte Carlo bounds and analytic baselines.

    ``method`` is one name or a list: Monte Carlo (``naive``, ``importance``,
    ``order_stats``, ``importance_order_stats``, ``auto``) or analytic (``exact``,
    ``pld_upper``, ``pld_lower``, ``rdp_upper``, ``cube_lower_bound``). Invalid
    arguments raise ``ValueError`` naming the field and value before any sampling.
    ``dataset_size`` and ``max_batch_size`` (together) add the truncated-batch penalty.
    ``backend`` is where Monte Carlo kernels run: ``numpy`` (one core), ``jax`` (JAX's
    default device, float64; Balls-and-Bins/deterministic naive and importance), or
    ``auto`` (JAX when it sees a GPU and has the kernel, else numpy).
    Returns one row per (method, direction, ε) in :data:`epscert.schema.RESULTS_SCHEMA`.
    """
    kwargs = {} if pld_discretization is None else {"pld_discretization": pld_discretization}
    config = CertifyConfig(
        sampler=sampler, sigma=sigma, steps=steps, epochs=epochs, epsilons=epsilons,
        methods=method, samples=samples, error_prob=error_prob, seed=seed,
        direction=direction, orders=orders, shards=shards, dataset_size=dataset_size,
        max_batch_size=max_batch_size, backend=backend, **kwargs,
    )
    return certify_config(config, progress=progress)

