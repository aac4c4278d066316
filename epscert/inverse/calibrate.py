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
Poisson and deterministic batching are calibrated for comparison on the Poisson PLD bracket's
upper side (:mod:`epscert.analytic.poisson`: tilted FFT, RDP where smaller) and the exact Gaussian
curve, both through their outward certified values (the Gaussian bracket's top).

Balls-and-Bins with ``method`` ``auto`` or ``pld_upper`` (σ >= 0.3, T <= 10^6, E <= 1000)
searches and certifies on the deterministic PLD bracket instead (:func:`calibrate_on_bracket`):
no sampling, no failure probability, and the answer no longer depends on a sample budget.
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
from epscert.allocation import AllocationBracket, bracket_for
from epscert.params import (BRACKET_MAX_EPOCHS, BRACKET_MAX_STEPS, BRACKET_MIN_SIGMA, MAX_EPSILON, CertifyConfig,
                            Direction, Method, Sampler, check_float)
from epscert.montecarlo.samplers import loss_sampler
from epscert.analytic.truncation import config_penalty
from epscert.progress import Callback, ProgressMeter

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


def bisect_steps(lo: float, hi: float, rel_tol: float) -> int:
    """Evaluations :func:`_bisect_log` makes on [lo, hi]: each halves log(hi/lo) until <= log(1 + rel_tol)."""
    if hi / lo <= 1.0 + rel_tol:
        return 0
    return math.ceil(math.log2(math.log(hi / lo) / math.log1p(rel_tol)))


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
    if config.strategy is not None:  # the matrix-mechanism pair is a proven dominating pair (matrix_pair)
        return
    if method.is_monte_carlo and loss_sampler(config, method).guarantee != "mc_upper_confidence":
        raise ValueError(f"sampler={config.sampler.value!r} has no certified Monte Carlo bound (the shuffle pair "
                         "is tight only under a conjecture); use epscert.certify, whose rows say 'conjecture'")


def deterministic_sigma(config: CertifyConfig, eps_t: float, delta_t: float, pen: float) -> float:
    """σ of deterministic batches for the target, on the top of the outward Gaussian bracket."""
    return _analytic_sigma(lambda s: float(deterministic_bracket(s, config.epochs, eps_t)[1]) + pen,
                           delta_t, ANALYTIC_REL_TOL)


def poisson_sigma_for(config: CertifyConfig, eps_t: float, delta_t: float, pen: float, guess: float) -> float:
    """σ of Poisson subsampling for the target, on the outward PLD upper bound (for comparison)."""
    return _analytic_sigma(
        lambda s: float(poisson_pld_bounds(s, config.steps, config.epochs, [eps_t], Direction.BOTH,
                                           config.pld_discretization, True)[0][0]) + pen,
        delta_t, ANALYTIC_REL_TOL, guess=guess)


#: Downward step of the fine search below the coarse bracket's σ.
FINE_STEP = 1.03
#: Cells of the coarse bracket that proposes σ (any cell count gives a valid upper bound).
COARSE_CELLS = 300


def uses_bracket(config: CertifyConfig) -> bool:
    """Whether calibration runs on the Balls-and-Bins PLD bracket (module docstring)."""
    return (config.sampler is Sampler.BALLS_AND_BINS and config.steps <= BRACKET_MAX_STEPS
            and config.epochs <= BRACKET_MAX_EPOCHS
            and (Method.PLD_UPPER in config.methods or config.methods == (Method.AUTO,)))


def calibrate_on_bracket(config: CertifyConfig, eps_t: float, delta_t: float, pen: float, rel_tol: float,
                         meter: ProgressMeter) -> tuple[float, float, list[float]]:
    """(σ, its certified δ(ε_t) upper bound incl. penalty, σ tried) on the Balls-and-Bins bracket.

    Every upper side of the bracket is a valid upper bound on δ(ε_t), whatever its cell count; a
    coarse bracket (``COARSE_CELLS``) is cheap and looser, so the σ it accepts is certified too.
    Step 1 bisects on the coarse bracket to σ_c; step 2 steps down from σ_c by factors
    ``FINE_STEP`` with the default bracket (tighter, so its crossing is at or below σ_c) while the
    target is met, then bisects the last step; the returned σ meets the target on the default bracket, which is the
    certificate. The smallest σ searched is the bracket's range floor 0.3: if it already meets the
    target, 0.3 is returned (valid, possibly conservative).
    """
    tried: list[float] = []

    def meets(sigma: float, cells: int | None) -> tuple[bool, float]:
        tried.append(sigma)
        b = bracket_for(sigma, config.steps, config.epochs) if cells is None else \
            AllocationBracket(sigma, config.steps, config.epochs, cells=cells)
        up = float(b.delta([eps_t], config.direction)[0][0]) + pen
        meter.total = max(meter.total, meter.done + 2)
        meter.stage = f"calibrate on the PLD bracket (σ={sigma:.4g} {'meets' if up <= delta_t else 'misses'} the target)"
        meter.add(1)
        return up <= delta_t, up

    lo, hi = BRACKET_MIN_SIGMA, SIGMA_BRACKET[1]
    det_sigma = deterministic_sigma(config, eps_t, delta_t, pen)
    hi = max(lo, min(hi, det_sigma * 1.01)) if math.isfinite(det_sigma) else hi
    while not meets(hi, COARSE_CELLS)[0]:
        if hi >= SIGMA_BRACKET[1]:
            raise ValueError(f"no σ <= {SIGMA_BRACKET[1]} meets target_epsilon={eps_t}, target_delta={delta_t}")
        hi = min(SIGMA_BRACKET[1], 2.0 * hi)
    if meets(lo, COARSE_CELLS)[0]:
        sigma_c = lo
    else:
        sigma_c = _bisect_log(lambda s: meets(s, COARSE_CELLS)[0], lo, hi, rel_tol)
    fine_hi, fine_lo = sigma_c, max(lo, sigma_c / FINE_STEP)
    while fine_lo > lo and meets(fine_lo, None)[0]:  # step down while the default bracket still meets it
        fine_hi, fine_lo = fine_lo, max(lo, fine_lo / FINE_STEP)
    if fine_lo <= lo and meets(lo, None)[0]:
        sigma = lo
    else:
        sigma = _bisect_log(lambda s: meets(s, None)[0], fine_lo, fine_hi, rel_tol)
    ok, up = meets(sigma, None)
    if not ok:  # cannot happen if the default bracket is at least as tight as the coarse one; say so
        sigma_c_ok, up_c = meets(sigma_c, None)
        sigma, up = (sigma_c, up_c) if sigma_c_ok else (sigma, up)
    return sigma, up, tried


def calibrate_sigma(config: CertifyConfig, target_epsilon: float, target_delta: float,
                    search_samples: int | None = None, certify_seed: int | None = None,
                    rel_tol: float = SIGMA_REL_TOL,
                    run: Callable[[CertifyConfig], pa.Table] = certify_config,
                    progress: Callback | None = None) -> Calibration:
    """Smallest σ (to ``rel_tol``) with certified ε(target_delta) <= target_epsilon.

    ``config`` gives the sampler, steps, epochs, method, sample budget, β, seed and
    direction; its σ and ε grid are ignored. ``certify_seed`` defaults to seed + 1: any
    seed other than the search seed gives an independent sample set. ``run`` computes one
    configuration's table: in process by default, or a Beam job (``pipelines.calibrate``).
    ``progress`` receives one :class:`epscert.progress.ProgressUpdate` per evaluation; the total
    is the evaluations done plus those the bisection still needs, plus the certificate run.
    """
    for method in config.resolved:
        if not (method.is_monte_carlo or method in (Method.EXACT, Method.PLD_UPPER)):
            raise ValueError(f"calibrate needs a method that certifies an upper bound (Monte Carlo, exact or "
                             f"pld_upper), got method={method.value!r}")
        check_certifiable(config, method)
    eps_t = check_float("target_epsilon", target_epsilon, low=0.0, low_open=False, high=MAX_EPSILON,
                        high_open=False)
    delta_t = check_float("target_delta", target_delta, low=0.0, low_open=True, high=1.0)
    pen = config_penalty(config, eps_t)
    if pen >= delta_t:
        raise ValueError(f"the truncation penalty {pen:.3g} at target_epsilon={eps_t} already exceeds "
                         f"target_delta={delta_t}; raise max_batch_size")
    search_seed = config.seed
    fresh_seed = (config.seed + 1) % 2**128 if certify_seed is None else certify_seed
    if fresh_seed == search_seed:
        raise ValueError(f"certify_seed must differ from the search seed, got certify_seed={certify_seed}")
    if uses_bracket(config):
        meter = ProgressMeter(progress, 1, "calibrate", unit="evaluations", interval=0.0)
        start = time.perf_counter()
        sigma, delta_up, tried = calibrate_on_bracket(config, eps_t, delta_t, pen, rel_tol, meter)
        search_seconds = time.perf_counter() - start
        start = time.perf_counter()
        cert_config = dataclasses.replace(config, sigma=sigma, epsilons=(eps_t,), methods=(Method.PLD_UPPER,),
                                          orders=None)
        certificate = run(cert_config)
        certify_seconds = time.perf_counter() - start
        poisson_sigma = poisson_sigma_for(config, eps_t, delta_t, pen, sigma)
        det_sigma = deterministic_sigma(config, eps_t, delta_t, pen)
        return Calibration(sigma=sigma, certified=delta_up <= delta_t, certificate=certificate,
                           delta_upper=delta_up, poisson_sigma=poisson_sigma, deterministic_sigma=det_sigma,
                           search_sigmas=tuple(tried), search_seconds=search_seconds,
                           certify_seconds=certify_seconds)
    budget = search_samples if search_samples is not None else max(1, config.samples // 4)
    direction = config.direction.value
    tried: list[float] = []
    meter = ProgressMeter(progress, 1, "calibrate", unit="evaluations", interval=0.0)
    bracket = list(SIGMA_BRACKET)  # the bisection's (lo, hi) as known so far; lo moves only while bisecting
    bisecting = [False]

    def report(sigma: float, ok: bool, left: int) -> None:
        meter.total = meter.done + 1 + left
        meter.stage = f"calibrate (σ={sigma:.4g} {'meets' if ok else 'misses'} the target)"
        meter.add(1)

    def ucb(sigma: float, samples: int, seed: int) -> tuple[float, pa.Table]:
        cfg = dataclasses.replace(config, sigma=sigma, epsilons=(eps_t,), samples=samples, seed=seed,
                                  shards=min(config.shards, samples))
        table = run(cfg)
        rows = [r for r in table.to_pylist() if r["direction"] == direction and r["delta_upper"] is not None]
        return max(r["delta_upper"] for r in rows), table

    def passes(sigma: float) -> bool:
        tried.append(sigma)
        ok = ucb(sigma, budget, search_seed)[0] <= delta_t
        if ok:
            bracket[1] = min(bracket[1], sigma)
        elif bisecting[0]:
            bracket[0] = max(bracket[0], sigma)
        report(sigma, ok, bisect_steps(bracket[0], bracket[1], rel_tol) + 1)
        return ok

    start = time.perf_counter()
    lo, hi = SIGMA_BRACKET
    det_sigma = deterministic_sigma(config, eps_t, delta_t, pen)
    hi = min(hi, 2.0 * det_sigma) if math.isfinite(det_sigma) else hi
    while not passes(hi):  # Balls-and-Bins is never worse than deterministic; widen if the UCB is loose
        if hi >= SIGMA_BRACKET[1]:
            raise ValueError(f"no σ <= {SIGMA_BRACKET[1]} meets target_epsilon={eps_t}, target_delta={delta_t} "
                             f"with samples={budget}; raise samples")
        hi = min(SIGMA_BRACKET[1], 2.0 * hi)
    bisecting[0] = True
    sigma = _bisect_log(passes, lo, hi, rel_tol)
    search_seconds = time.perf_counter() - start
    start = time.perf_counter()
    delta_up, certificate = ucb(sigma, config.samples, fresh_seed)
    certify_seconds = time.perf_counter() - start
    meter.total = meter.done + 2
    meter.stage = f"calibrate (certificate run at σ={sigma:.4g}; next: Poisson σ for comparison)"
    meter.add(1)
    poisson_sigma = poisson_sigma_for(config, eps_t, delta_t, pen, sigma)
    meter.stage = "calibrate (Poisson σ for comparison)"
    meter.add(1)
    return Calibration(sigma=sigma, certified=delta_up <= delta_t, certificate=certificate,
                       delta_upper=delta_up, poisson_sigma=poisson_sigma, deterministic_sigma=det_sigma,
                       search_sigmas=tuple(tried), search_seconds=search_seconds,
                       certify_seconds=certify_seconds)
