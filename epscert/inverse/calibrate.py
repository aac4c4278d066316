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

Balls-and-Bins with ``method`` ``auto`` or ``bracket_upper`` (T <= 10^6, E <= 1000; σ searched from 0.3)
searches and certifies on the deterministic PLD bracket instead (:func:`calibrate_on_bracket`,
:mod:`epscert.inverse.sigma_search`): no sampling, no failure probability, σ within 0.1% of the optimum
with both sides checked, and the answer no longer depends on a sample budget.
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
from epscert.config import (
    BRACKET_MAX_EPOCHS, BRACKET_MAX_STEPS, MAX_EPSILON, CertifyConfig, Direction, Method, Sampler, check_float,
)
from epscert.config.samplers import loss_sampler
from epscert.analytic.truncation import config_penalty
from epscert.inverse.sigma_search import round_up, search_sigma
from epscert.progress import Callback, ProgressMeter, WorkPlan

#: Relative tolerance on σ of the search (the reported σ is within this of the search's crossing).
SIGMA_REL_TOL = 0.01
SIGMA_BRACKET = (0.05, 100.0)
#: Tolerance of the deterministic and Poisson calibrations (cheap: no Monte Carlo).
ANALYTIC_REL_TOL = 1e-3


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Result of :func:`calibrate_sigma`.

    ``sigma`` is certified by ``certificate`` (its rows) when ``certified``; ``sigma_accuracy`` a (bracket
    calibration) says the optimum σ* is proven to lie in (sigma/(1 + a), sigma]: a lower side of the
    bracket shows that ``failing_sigma`` = sigma/(1 + a) fails (None where no such check was made).
    """

    sigma: float
    certified: bool
    certificate: pa.Table  # rows of the fresh-seed run at ``sigma``
    delta_upper: float  # its certified δ(ε_t), penalty included
    poisson_sigma: float
    deterministic_sigma: float
    search_sigmas: tuple[float, ...]
    search_seconds: float
    certify_seconds: float
    failing_sigma: float | None = None
    sigma_accuracy: float | None = None
    method: str = ""

    def __repr__(self) -> str:
        accuracy = "" if self.sigma_accuracy is None else f", within {100 * self.sigma_accuracy:.3g}% of the optimum"
        return (f"Calibration(sigma={self.sigma:.6g}{accuracy}, certified={self.certified}, "
                f"delta_upper={self.delta_upper:.4g}, method={self.method!r}, poisson_sigma={self.poisson_sigma:.5g}, "
                f"deterministic_sigma={self.deterministic_sigma:.5g}, evaluations={len(self.search_sigmas)}, "
                f"seconds={self.search_seconds + self.certify_seconds:.3g}, certificate=<{self.certificate.num_rows} rows>)")


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


#: The Poisson σ is searched on a PLD this many times coarser than the configuration's, then checked on it.
POISSON_SEARCH_COARSENING = 10


def poisson_sigma_for(config: CertifyConfig, eps_t: float, delta_t: float, pen: float, guess: float,
                      step: Callable[[str], None] | None = None) -> float:
    """σ of Poisson subsampling for the target, on the outward PLD upper bound (for comparison).

    The smallest σ (rounded up to 5 significant digits) whose dp_accounting PLD upper bound at the
    configuration's discretisation meets the target: a secant search on log δ against log σ on a PLD
    ``POISSON_SEARCH_COARSENING`` times coarser (about 10 times cheaper), then the configuration's PLD at
    the found σ, stepping up by ``ANALYTIC_REL_TOL`` until it meets the target. Falls back to bisection
    (:func:`_analytic_sigma`) where the secant has nothing to interpolate (a δ at the resolution floor).
    ``step(kind)`` is called after each PLD ('coarse' or 'fine').
    """
    def delta_at(sigma: float, h: float) -> float:
        out = float(poisson_pld_bounds(sigma, config.steps, config.epochs, [eps_t], Direction.BOTH, h, True)[0][0])
        if step is not None:
            step("fine" if h == config.pld_discretization else "coarse")
        return out + pen

    coarse_h = min(0.1, config.pld_discretization * POISSON_SEARCH_COARSENING)
    target = math.log(delta_t)
    points = []
    x = math.log(guess)
    root = None
    for _ in range(12):
        d = delta_at(math.exp(x), coarse_h)
        if not 0.0 < d < 1.0:
            break
        points.append((x, math.log(d) - target))
        if len(points) == 1:
            nxt = x + (0.02 if points[-1][1] > 0 else -0.02)
        else:
            (xa, fa), (xb, fb) = points[-2], points[-1]
            if fa == fb:
                break
            nxt = xb - fb * (xb - xa) / (fb - fa)
        if abs(nxt - x) < 1e-5 and points[-1][1] <= 0:
            root = x
            break
        x = nxt
    if root is None:
        return _analytic_sigma(lambda s: delta_at(s, config.pld_discretization), delta_t, ANALYTIC_REL_TOL,
                               guess=guess)
    sigma = round_up(math.exp(root))
    for _ in range(20):
        if delta_at(sigma, config.pld_discretization) <= delta_t:
            return sigma
        sigma = round_up(sigma * (1.0 + ANALYTIC_REL_TOL))
    return _analytic_sigma(lambda s: delta_at(s, config.pld_discretization), delta_t, ANALYTIC_REL_TOL, guess=sigma)


def uses_bracket(config: CertifyConfig) -> bool:
    """Whether calibration runs on the Balls-and-Bins PLD bracket (module docstring)."""
    return (config.sampler is Sampler.BALLS_AND_BINS and config.steps <= BRACKET_MAX_STEPS
            and config.epochs <= BRACKET_MAX_EPOCHS
            and (Method.BRACKET_UPPER in config.methods or config.methods == (Method.AUTO,)))


#: Expected cost of each phase of a bracket calibration, in units of one coarse bracket side (about 0.1–0.2
#: CPU s); measured on T = 1563 and T = 234 x 10 epochs: 8 coarse sides, 2 middle uppers and a middle
#: lower (5 each), the default upper (16), about 6 coarse and 1 fine Poisson PLD (0.5 and 6).
BRACKET_PLAN = {"coarse": 8.0, "middle": 15.0, "default": 16.0, "certificate": 1.0, "poisson": 9.0}
POISSON_COSTS = {"coarse": 0.5, "fine": 6.0}


def calibrate_on_bracket(config: CertifyConfig, eps_t: float, delta_t: float, pen: float,
                         run: Callable[[CertifyConfig], pa.Table], progress: Callback | None) -> Calibration:
    """Calibration on the Balls-and-Bins PLD bracket (:mod:`epscert.inverse.sigma_search`): no sampling.

    The search returns σ certified by the default bracket (δ' = δ_t − pen) and, where it could, the σ
    proven to fail just below it; ``run`` then computes the certificate rows at σ (``bracket_upper``).
    Progress is a :class:`~epscert.progress.WorkPlan` over the phases' measured relative costs.
    """
    plan = WorkPlan(progress, BRACKET_PLAN)

    def report(ev, cost: float) -> None:
        phase = ev.level
        if ev.side == "upper":
            what = "certifies σ" if ev.meets else "does not certify σ"
        else:
            what = "proves σ fails" if not ev.meets else "does not prove σ fails"
        plan.step(phase, cost, f"calibrate on the PLD bracket: the {ev.level} bracket's {ev.side} side {what} "
                  f"(σ={ev.sigma:.6g})")
        if phase == "middle" and ev.side == "lower":
            plan.close("middle")
        if phase == "default" and ev.side == "upper":
            plan.close("default")
        if phase != "coarse":
            plan.close("coarse")

    start = time.perf_counter()
    det_sigma = deterministic_sigma(config, eps_t, delta_t, pen)
    hint = det_sigma * 1.01 if math.isfinite(det_sigma) else SIGMA_BRACKET[1]
    found = search_sigma(config.steps, config.epochs, eps_t, delta_t - pen, config.direction, hint, report)
    for phase in ("coarse", "middle", "default"):
        plan.close(phase)
    search_seconds = time.perf_counter() - start
    start = time.perf_counter()
    cert_config = dataclasses.replace(config, sigma=found.sigma, epsilons=(eps_t,), methods=(Method.BRACKET_UPPER,),
                                      orders=None)
    certificate = run(cert_config)
    plan.step("certificate", BRACKET_PLAN["certificate"], f"calibrate: certificate rows at σ={found.sigma:.6g}")
    plan.close("certificate")
    certify_seconds = time.perf_counter() - start
    rows = [r for r in certificate.to_pylist() if r["direction"] in (config.direction.value, "both")
            and r["delta_upper"] is not None]
    delta_up = max((r["delta_upper"] for r in rows), default=found.delta_upper + pen)
    poisson_sigma = poisson_sigma_for(
        config, eps_t, delta_t, pen, found.sigma,
        step=lambda kind: plan.step("poisson", POISSON_COSTS[kind], f"calibrate: Poisson σ for comparison ({kind} PLD)"))
    plan.finish(f"calibrate: σ={found.sigma:.6g} certified; Poisson σ={poisson_sigma:.5g}")
    return Calibration(sigma=found.sigma, certified=delta_up <= delta_t, certificate=certificate, delta_upper=delta_up,
                       poisson_sigma=poisson_sigma, deterministic_sigma=det_sigma,
                       search_sigmas=tuple(ev.sigma for ev in found.evaluations), search_seconds=search_seconds,
                       certify_seconds=certify_seconds, failing_sigma=found.failing_sigma,
                       sigma_accuracy=found.accuracy, method=Method.BRACKET_UPPER.value)


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
        if not (method.is_monte_carlo or method in (Method.EXACT, Method.PLD_UPPER, Method.BRACKET_UPPER)):
            raise ValueError(f"calibrate needs a method that certifies an upper bound (Monte Carlo, exact, "
                             f"pld_upper or bracket_upper), got method={method.value!r}")
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
    if uses_bracket(config):  # no sampling to distribute: the bracket's rows are computed here
        return calibrate_on_bracket(config, eps_t, delta_t, pen, certify_config, progress)
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
        # law_seed=None: the block-law bounds on each pass's own seed (a shared one would be selected on across σ)
        cfg = dataclasses.replace(config, sigma=sigma, epsilons=(eps_t,), samples=samples, seed=seed,
                                  shards=min(config.shards, samples), law_seed=None)
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
