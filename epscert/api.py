"""The in-process Python API: ``certify(...) -> pyarrow.Table``.

It runs exactly the functions the Beam job distributes (see
:mod:`epscert.results.tables`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import pyarrow as pa

from epscert.montecarlo.backends import check_available
from epscert.config import DEFAULT_ERROR_PROB, DEFAULT_SAMPLES, CertifyConfig, check_float, check_int
from epscert.results.cost import CERTIFY_MAX_CPU_HOURS, check_cpu_hours, check_pld_memory, config_cost
from epscert.results.rows import analytic_rows
from epscert.results.tables import certify_config
from epscert.results.waves import waves_rows
from epscert.schema import to_table

__all__ = ["certify", "certify_config"]


def certify(
    sampler: str = "balls_and_bins",
    sigma: float = 1.0,
    steps: int = 1000,
    epochs: int = 1,
    epsilons: Sequence[float] = (1.0,),
    method: str | Sequence[str] = "auto",
    samples: int = DEFAULT_SAMPLES,
    error_prob: float = DEFAULT_ERROR_PROB,
    seed: int = 0,
    direction: str = "both",
    orders: str | Sequence[int] | None = None,
    shards: int = 1,
    pld_discretization: float | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
    progress: Callable[[int], None] | None = None,
    target_rel_width: float | None = None,
    max_samples: int | None = None,
    backend: str = "numpy",
    strategy=None,
    max_cpu_hours: float | None = CERTIFY_MAX_CPU_HOURS,
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
    ``strategy`` (:func:`epscert.matrix.strategies.toeplitz_strategy` or :func:`~epscert.matrix.strategies.dense_strategy`)
    certifies the matrix mechanism (DP-FTRL / BandMF) instead of DP-SGD: ``sampler`` must be
    ``balls_and_bins_persistent`` and ``steps`` is the cycle length b (``epochs`` is then the number of
    cycles, ceil(n/b)); methods ``naive``, ``importance``, ``conditional``, ``tilted`` (``auto``) and the
    deterministic ``independent_lower_bound`` / ``comonotone_upper_bound``
    (:mod:`epscert.matrix.pair`).
    ``target_rel_width`` (with ``max_samples``, default 64 x ``samples``): Monte Carlo methods run
    waves of doubling samples until UCB / LCB <= 1 + w (:mod:`epscert.results.waves`, β spent as
    β·2^{-(k+1)} in wave k).
    Cost guards, before any work (the same as ``epscert certify``): the run's single-core time is estimated
    from its configuration (:mod:`epscert.results.cost`) and a run above ``max_cpu_hours`` (default 1) is
    refused with the estimate (``max_cpu_hours=None`` lifts the cap); a dp_accounting PLD above 8 GiB is
    refused; ``backend='jax'`` without JAX is refused.
    """
    kwargs = {} if pld_discretization is None else {"pld_discretization": pld_discretization}
    config = CertifyConfig(
        sampler=sampler, sigma=sigma, steps=steps, epochs=epochs, epsilons=epsilons,
        methods=method, samples=samples, error_prob=error_prob, seed=seed,
        direction=direction, orders=orders, shards=shards, dataset_size=dataset_size,
        max_batch_size=max_batch_size, backend=backend, strategy=strategy, **kwargs,
    )
    check_pld_memory(config)  # a PLD grid past the memory cap is refused before any work
    check_available(config)
    if max_cpu_hours is not None:
        max_cpu_hours = check_float("max_cpu_hours", max_cpu_hours, low=0.0, low_open=True)
    budget = 64 * config.samples if max_samples is None else max_samples
    if target_rel_width is not None:
        target_rel_width = check_float("target_rel_width", target_rel_width, low=0.0, low_open=True)
        budget = check_int("max_samples", budget, config.samples)
    planned = config if target_rel_width is None else dataclasses.replace(config, samples=2 * budget)
    check_cpu_hours(config_cost(planned), max_cpu_hours, f"certify({config.sampler.value}, sigma={config.sigma:g}, "
                    f"steps={config.steps}, epochs={config.epochs}, samples={planned.samples})",
                    "lower samples, or pass max_cpu_hours= a larger number (None: no cap)")
    if target_rel_width is None:
        return certify_config(config, progress=progress)
    rows = []
    for method in config.resolved:
        if method.is_monte_carlo:
            rows.extend(waves_rows(config, method, target_rel_width, budget))
        else:
            rows.extend(analytic_rows(config, method))
    return to_table(rows)

