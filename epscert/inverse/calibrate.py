"""Noise calibration: the smallest σ whose certified ε(δ) meets a target (SPEC §8, issue 6).

ε(δ) <= ε_t  ⇔  δ(ε_t) <= δ (δ(·) is non-increasing), so a σ meets the target when the
upper confidence bound on δ at the single point ε_t (plus any truncation penalty) is
<= δ. Importance sampling then conditions on the event of ε_t itself, the best it can do.

1. Search: bisection on log σ with a smaller search budget. Every σ uses the same seed
   and configuration key, and the key leaves σ out (:meth:`CertifyConfig.sampling_key`),
   so all σ share their standard normals and uniforms: common random numbers make the
   decisions consistent along σ.
2. Certificate: one fresh run at the found σ with an independent seed, the full sample
   budget and the full β. Its rows are the output; the search only proposes σ. If that
   run does not meet the target, the result says so (``certified=False``) rather than
   trying again (each retry would spend more failure probability).
Poisson and deterministic batching are calibrated for comparison with dp_accounting's
PLD (upper bound) and the exact Gaussian curve, both through their outward certified values
(issue 12: the PLD upper bound with its resolution and RDP fallback, the Gaussian bracket's top).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import pyarrow as pa

from epscert.analytic.deterministic import deterministic_bracket
from epscert.analytic.poisson import poisson_pld_bounds
from epscert.results.tables import certify_config
from epscert.params import CertifyConfig, Direction, Method, check_float
from epscert.montecarlo.samplers import loss_sampler
from epscert.analytic.truncation import config_penalty

#: Relative tolerance on σ of the search (the reported σ is within this of the search's crossing).
SIGMA_REL_TOL = 0.01
SIGMA_BRACKET = (0.05, 100.0)
#: Tolerance of the deterministic and Poisson calibrations (cheap: no Monte Carlo).
ANALYTIC_REL_TOL = 1e-3


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Result of :func:`calibrate_sigma`."""

    sigma: float
    certified: bool
    certificate: pa.Table  # rows of the fresh-seed run at ``sigma``
    delta_upper: float  # its certified δ(ε_t), penalty included
    poisson_sigma: float
    deterministic_sigma: float
    search_sigmas: tuple[float, ...]
    search_seconds: float
    certify_seconds: float


def _bisect_log(passes, lo: float, hi: float, rel_tol: float) -> float:
    """Smallest σ in [lo, hi] (to rel_tol) with passes(σ) true, assuming passes(hi)."""
    while hi / lo > 1.0 + rel_tol:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _analytic_sigma(delta_at: callable, target_delta: float, rel_tol: float,
                    guess: float | None = None) -> float:
    """Smallest σ with delta_at(σ) <= target (δ falls as σ grows), bracketing around ``guess``."""
    lo, hi = SIGMA_BRACKET
    if guess is not None and math.isfinite(guess):
        lo, hi = max(SIGMA_BRACKET[0], guess / 1.3), min(SIGMA_BRACKET[1], guess * 1.2)
        while hi < SIGMA_BRACKET[1] and delta_at(hi) > target_delta:
            lo, hi = hi, min(SIGMA_BRACKET[1], 2.0 * hi)
        while lo > SIGMA_BRACKET[0] and delta_at(lo) <= target_delta:
            lo, hi = max(SIGMA_BRACKET[0], lo / 2.0), lo
    if delta_at(hi) > target_delta:
        return math.inf
    if delta_at(lo) <= target_delta:
        return lo
    return _bisect_log(lambda s: delta_at(s) <= target_delta, lo, hi, rel_tol)


def check_certifiable(config: CertifyConfig, method: Method) -> None:
    """Refuse a Monte Carlo method whose pair only gives a conjecture (the shuffle pair, SPEC §1).

    Its numbers lower-bound the shuffle sampler's δ under a conjectured tightness; returned as a
    bare "certified" value they could understate ε.
    """
    if method.is_monte_carlo and loss_sampler(config, method).guarantee != "mc_upper_confidence":
        raise ValueError(f"sampler={config.sampler.value!r} has no certified Monte Carlo bound (the shuffle pair "
                         "is tight only under a conjecture); use epscert.certify, whose rows say 'conjecture'")


def calibrate_sigma(config: CertifyConfig, target_epsilon: float, target_delta: float,
                    search_samples: int | None = None, certify_seed: int | None = None,
                    rel_tol: float = SIGMA_REL_TOL,
                    run: Callable[[CertifyConfig], pa.Table] = certify_config) -> Calibration:
    """Smallest σ (to ``rel_tol``) with certified ε(target_delta) <= target_epsilon.

    ``config`` gives the sampler, steps, epochs, method, sample budget, β, seed and
    direction; its σ and ε grid are ignored. ``certify_seed`` defaults to seed + 1: any
    seed other than the search seed gives an independent sample set. ``run`` computes one
    configuration's table: in process by default, or a Beam job (``pipelines.calibrate``).
    """
    for method in config.resolved:
        check_certifiable(config, method)
    eps_t = check_float("target_epsilon", target_epsilon, low=0.0, low_open=False)
    delta_t = check_float("target_delta", target_delta, low=0.0, low_open=True, high=1.0)
    pen = config_penalty(config, eps_t)
    if pen >= delta_t:
        raise ValueError(f"the truncation penalty {pen:.3g} at target_epsilon={eps_t} already exceeds "
                         f"target_delta={delta_t}; raise max_batch_size")
    budget = search_samples if search_samples is not None else max(1, config.samples // 4)
    search_seed = config.seed
    fresh_seed = (config.seed + 1) % 2**128 if certify_seed is None else certify_seed
    if fresh_seed == search_seed:
        raise ValueError(f"certify_seed must differ from the search seed, got certify_seed={certify_seed}")
    direction = config.direction.value
    tried: list[float] = []

    def ucb(sigma: float, samples: int, seed: int) -> tuple[float, pa.Table]:
        cfg = dataclasses.replace(config, sigma=sigma, epsilons=(eps_t,), samples=samples, seed=seed,
                                  shards=min(config.shards, samples))
        table = run(cfg)
        rows = [r for r in table.to_pylist() if r["direction"] == direction and r["delta_upper"] is not None]
        return max(r["delta_upper"] for r in rows), table

    def passes(sigma: float) -> bool:
        tried.append(sigma)
        return ucb(sigma, budget, search_seed)[0] <= delta_t

    start = time.perf_counter()
    lo, hi = SIGMA_BRACKET
    det_sigma = _analytic_sigma(lambda s: float(deterministic_bracket(s, config.epochs, eps_t)[1]) + pen,
                                delta_t, ANALYTIC_REL_TOL)
    hi = min(hi, 2.0 * det_sigma) if math.isfinite(det_sigma) else hi
    while not passes(hi):  # Balls-and-Bins is never worse than deterministic; widen if the UCB is loose
        if hi >= SIGMA_BRACKET[1]:
            raise ValueError(f"no σ <= {SIGMA_BRACKET[1]} meets target_epsilon={eps_t}, target_delta={delta_t} "
                             f"with samples={budget}; raise samples")
        hi = min(SIGMA_BRACKET[1], 2.0 * hi)
    sigma = _bisect_log(passes, lo, hi, rel_tol)
    search_seconds = time.perf_counter() - start
    start = time.perf_counter()
    delta_up, certificate = ucb(sigma, config.samples, fresh_seed)
    certify_seconds = time.perf_counter() - start
    poisson_sigma = _analytic_sigma(
        lambda s: float(poisson_pld_bounds(s, config.steps, config.epochs, [eps_t], Direction.BOTH,
                                           config.pld_discretization, True)[0][0]) + pen,
        delta_t, ANALYTIC_REL_TOL, guess=sigma)
    return Calibration(sigma=sigma, certified=delta_up <= delta_t, certificate=certificate,
                       delta_upper=delta_up, poisson_sigma=poisson_sigma, deterministic_sigma=det_sigma,
                       search_sigmas=tuple(tried), search_seconds=search_seconds,
                       certify_seconds=certify_seconds)
