"""σ for a target (ε_t, δ_t) on the deterministic Balls-and-Bins PLD bracket, to 0.1% of the optimum.

The optimum σ* is the smallest σ whose true δ(ε_t) is <= δ' = δ_t − pen (pen: the truncation penalty at
ε_t, which does not depend on σ). The bracket gives, at any σ and any cell count ("level"), an upper
bound U(σ) and a lower bound L(σ) on δ(ε_t) (:mod:`epscert.allocation`). So

- U(σ) <= δ' certifies σ (σ >= σ*);
- L(σ) > δ' proves that σ fails (σ < σ*, and every smaller σ fails too: δ(ε_t) falls as σ grows, since
  more noise is a post-processing of less).

The search returns σ_f with U_default(σ_f) <= δ' (the default bracket, whose rows are the certificate)
and, where it can, L(σ_f/(1 + ACCURACY)) > δ' at some level: then σ* ∈ (σ_f/(1 + ACCURACY), σ_f], i.e. σ_f
is within ACCURACY = 0.1% of the optimum (σ_f <= σ*(1 + ACCURACY)), checked on both sides; σ(1 − ACCURACY)
fails too (it is smaller).

Steps (each evaluation builds one side's chain of one bracket):

1. Bracket the root on a coarse bracket (``COARSE``: both sides, cheap): regula falsi (Illinois) on
   log ε_U(σ) against log σ, where ε_U(σ) is the coarse upper bound's ε at δ' (monotone in σ and nearly a
   power law, so the interpolation converges in a few steps from [0.3, the deterministic σ]).
2. Interpolate on a finer bracket (``MIDDLE``, upper side): secant steps (the first with the coarse slope)
   from near the coarse lower side's crossing, to a passing σ within ``LEVEL_TOL`` of the middle level's
   crossing; σ_f is that σ rounded up to ``SIGMA_DIGITS`` significant digits (so the printed σ is exactly
   the certified one).
3. Check both sides: the middle lower side at σ_f/(1 + ACCURACY) (else the default's), and the default upper
   side at σ_f (the certificate). If a check does not hold, the same steps run on the default bracket.

Never below a failure: every evaluation lies above the largest σ proven to fail (a lower side above
δ') and, at its own level, above the largest σ whose upper side missed; the interpolation is clamped
into that open interval (Illinois keeps a sign change on both ends).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

from epscert.allocation import AllocationBracket, bracket_for
from epscert.config import BRACKET_MIN_SIGMA

#: The optimum is checked to this relative accuracy: the lower side shows σ(1 − ACCURACY) fails.
ACCURACY = 1e-3
#: A finer level's search stops at a passing σ within this (in log σ) of its predicted crossing: with the
#: middle level's gray zone (about 4e-4 in σ at T = 1563) it leaves the lower-side check room below ACCURACY.
LEVEL_TOL = 2e-4
#: σ_f is rounded up to this many significant digits (an upper rounding keeps σ_f certified).
SIGMA_DIGITS = 5
#: The coarse crossing is located to this relative accuracy (the finer level starts from it).
COARSE_TOL = 5e-3
#: The finer level's search starts this share of the way from the coarse lower crossing to the upper one.
LOWER_START = 0.25
#: Largest σ searched.
MAX_SIGMA = 100.0
#: Most evaluations of one level's root search (a guard; the interpolation needs 3–8).
MAX_STEPS = 40


@dataclasses.dataclass(frozen=True)
class Level:
    """Accuracy settings of one bracket ((None, None): the default bracket) and its relative cost per side."""

    name: str
    cells: int | None
    base_cells: int | None
    cost: int  # progress units per side (a coarse side is 1)


COARSE = Level("coarse", 150, 1000, 1)
MIDDLE = Level("middle", 1000, 2000, 5)
DEFAULT = Level("default", None, None, 16)


def round_up(sigma: float, digits: int = SIGMA_DIGITS) -> float:
    """The smallest number with ``digits`` significant digits that is >= σ (upward: keeps a certificate)."""
    exponent = math.floor(math.log10(sigma)) - digits + 1
    scale = 10.0 ** exponent
    out = math.ceil(sigma / scale - 1e-9) * scale
    out = float(f"{out:.{digits}g}")
    return out if out >= sigma else float(f"{out + scale:.{digits}g}")


@dataclasses.dataclass
class Evaluation:
    """One side of one bracket at one σ: δ(ε_t) and the ε at δ' of that side."""

    sigma: float
    level: str
    side: str
    delta: float
    epsilon: float
    meets: bool  # upper: δ <= δ' (certified); lower: δ <= δ' (not proven to fail)


@dataclasses.dataclass(frozen=True)
class SearchResult:
    sigma: float  # certified on the default bracket when ``certified``
    delta_upper: float  # the default upper bound on δ(ε_t) at sigma (penalty not included)
    certified: bool
    failing_sigma: float | None  # largest σ proven to fail (a lower side above δ'), if any
    accuracy: float | None  # sigma / failing_sigma − 1: the optimum is within this of sigma (None: unknown)
    evaluations: tuple[Evaluation, ...]
    at_floor: bool  # the range floor 0.3 already meets the target (σ* may be smaller)


class BracketProbe:
    """Evaluates one side of one level's bracket at σ, keeps the record, and enforces "never below a failure"."""

    def __init__(self, steps: int, epochs: int, epsilon: float, delta: float, direction,
                 report: Callable[[Evaluation, int], None]):
        self.steps, self.epochs, self.epsilon, self.delta, self.direction = steps, epochs, epsilon, delta, direction
        self.report = report
        self.evaluations: list[Evaluation] = []
        self.failing = 0.0  # largest σ proven to fail
        self.missed: dict[str, float] = {}  # per level: largest σ whose upper side missed

    def bracket(self, sigma: float, level: Level) -> AllocationBracket:
        if level.cells is None:
            return bracket_for(sigma, self.steps, self.epochs)
        return AllocationBracket(sigma, self.steps, self.epochs, cells=level.cells, base_cells=level.base_cells)

    def side(self, sigma: float, level: Level, side: str) -> Evaluation:
        floor = self.failing if side == "lower" else max(self.failing, self.missed.get(level.name, 0.0))
        if sigma <= floor:
            raise AssertionError(f"search asked for σ={sigma} at or below a σ that already failed ({floor})")
        b = self.bracket(sigma, level)
        delta = float(b.delta_side([self.epsilon], self.direction, side)[0])
        eps = b.epsilon_side(self.delta, self.direction, side)
        ev = Evaluation(sigma, level.name, side, delta, eps, delta <= self.delta)
        self.evaluations.append(ev)
        if side == "lower" and not ev.meets:
            self.failing = max(self.failing, sigma)
        if side == "upper" and not ev.meets:
            self.missed[level.name] = max(self.missed.get(level.name, 0.0), sigma)
        self.report(ev, level.cost)
        return ev


def _f(ev: Evaluation, probe: BracketProbe) -> float:
    """The interpolated value, decreasing in σ and 0 at the crossing: log ε_side(δ') − log ε_t (a power law in
    σ, nearly), or log δ_side(ε_t) − log δ' when ε_t = 0; ±inf where the side gives no finite logarithm."""
    if probe.epsilon > 0:
        if ev.epsilon <= 0:
            return -math.inf
        return math.log(ev.epsilon) - math.log(probe.epsilon) if math.isfinite(ev.epsilon) else math.inf
    return math.log(ev.delta) - math.log(probe.delta) if ev.delta > 0 else -math.inf


def _secant(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Where the line through (x_a, f_a) and (x_b, f_b) crosses 0 (nan if it cannot be used)."""
    (xa, fa), (xb, fb) = a, b
    if not (math.isfinite(fa) and math.isfinite(fb)) or fa == fb:
        return math.nan
    return xa - fa * (xb - xa) / (fb - fa)


def _inside(x: float, lo: float, hi: float, share: float) -> float:
    """``x`` clamped into the open interval (lo, hi), at least ``share`` of its width (and 1e-9) from either
    end; the midpoint when ``x`` is nan."""
    if not math.isfinite(x):
        return 0.5 * (lo + hi)
    pad = max(share * (hi - lo), 1e-9)
    return min(max(x, lo + pad), hi - pad)


def coarse_root(probe: BracketProbe, lo: float, hi: float, f_lo: float, f_hi: float, x_tol: float) -> float:
    """Illinois regula falsi on x = log σ at the coarse level: ``lo`` misses, ``hi`` meets; returns the log σ of a
    coarse pass within ``x_tol`` of the coarse crossing. Every evaluation lies strictly inside (lo, hi)."""
    kept = 0  # +n: hi replaced n times in a row; −n: lo replaced
    for _ in range(MAX_STEPS):
        if hi - lo <= x_tol:
            break
        x = _inside(_secant((lo, f_lo), (hi, f_hi)), lo, hi, 0.02)
        ev = probe.side(math.exp(x), COARSE, "upper")
        f = _f(ev, probe)
        if ev.meets:
            hi, f_hi = x, min(f, 0.0)
            f_lo = f_lo / 2 if kept > 0 else f_lo  # Illinois: the stale end counts half
            kept = kept + 1 if kept > 0 else 1
        else:
            lo, f_lo = x, max(f, 0.0)
            f_hi = f_hi / 2 if kept < 0 else f_hi
            kept = kept - 1 if kept < 0 else -1
    return hi


def level_root(probe: BracketProbe, level: Level, x0: float, slope: float) -> float:
    """Secant steps on ``level``'s upper side from x0 (the first with the coarse ``slope``), inside (the largest
    failure, the smallest pass at this level); returns the log σ of a pass within LEVEL_TOL of the crossing."""
    lo = math.log(max(probe.failing, probe.missed.get(level.name, 0.0), BRACKET_MIN_SIGMA * (1.0 - 1e-12)))
    hi = math.log(MAX_SIGMA)
    best = None
    points: list[tuple[float, float]] = []
    x = max(x0, lo + 1e-9)
    for _ in range(MAX_STEPS):
        ev = probe.side(math.exp(x), level, "upper")
        f = _f(ev, probe)
        if ev.meets:
            hi = best = x
        else:
            lo = x
        points.append((x, f))
        nxt = _secant(points[-2], points[-1]) if len(points) >= 2 else math.nan
        if not math.isfinite(nxt) and math.isfinite(f):
            nxt = x - f / slope
        if best is not None and (hi - lo <= LEVEL_TOL or (ev.meets and math.isfinite(nxt) and x - nxt <= LEVEL_TOL)):
            return best
        if best is None and not math.isfinite(nxt):
            nxt = lo + math.log(2.0)  # no pass yet and nothing to interpolate: step up
        x = _inside(nxt + 0.5 * LEVEL_TOL, lo, hi, 0.0)  # aim just above the crossing: the next step should pass
    return best if best is not None else hi


def search_sigma(steps: int, epochs: int, epsilon: float, delta: float, direction, sigma_hint: float,
                 report: Callable[[Evaluation, int], None] = lambda ev, cost: None) -> SearchResult:
    """The σ of the module docstring for (T, E, ε_t, δ'), starting from ``sigma_hint`` (a σ expected to meet
    the target, e.g. the deterministic σ; doubled while the coarse bracket misses)."""
    probe = BracketProbe(steps, epochs, epsilon, delta, direction, report)
    floor = BRACKET_MIN_SIGMA
    # 1. a coarse σ that meets the target, the range floor, and the coarse crossing between them
    hi = min(MAX_SIGMA, max(floor * 1.01, sigma_hint))
    res = probe.bracket(hi, COARSE).resolution  # no chain is built for this
    if delta <= res * (1 + 1e-9):
        raise ValueError(f"target delta={delta:g} is at or below the Balls-and-Bins PLD bracket's resolution "
                         f"{res:.2g} (the mass past its cap, which it cannot certify below); ask for a larger delta, "
                         "or calibrate with a Monte Carlo method")
    top = probe.side(hi, COARSE, "upper")
    while not top.meets:
        if hi >= MAX_SIGMA:
            raise ValueError(f"no σ <= {MAX_SIGMA:g} meets target_epsilon={epsilon}, delta={delta:g} on the "
                             "Balls-and-Bins PLD bracket (MAX_SIGMA)")
        hi = min(MAX_SIGMA, 2.0 * hi)
        top = probe.side(hi, COARSE, "upper")
    bottom = probe.side(floor, COARSE, "upper")
    if bottom.meets:
        cert = _certificate(probe, floor)
        return SearchResult(floor, cert.delta, cert.meets, None, None, tuple(probe.evaluations), True)
    x_c = coarse_root(probe, math.log(floor), math.log(hi), _f(bottom, probe), _f(top, probe), math.log1p(COARSE_TOL))
    coarse = [(math.log(e.sigma), _f(e, probe)) for e in probe.evaluations if e.level == COARSE.name]
    slope = _slope([p for p in coarse if math.isfinite(p[1])], x_c)
    # the true crossing lies between the coarse lower side's crossing and x_c; a finer upper side's crossing
    # lies near the lower end (its gray zone is narrow): start there, LOWER_START of the way up
    x_root = x_c
    low = probe.side(math.exp(x_c), COARSE, "lower")
    f_low = _f(low, probe)
    if low.meets and math.isfinite(f_low) and f_low < 0:
        x_low = x_c - f_low / slope  # the coarse lower side's crossing, by the coarse slope (below x_c)
        x_root = max(x_low + LOWER_START * (x_c - x_low), math.log(probe.failing) + 1e-9 if probe.failing else -math.inf)
    # 2.–3. interpolate on a finer level, then check both sides; the default level if a check fails
    for level in (MIDDLE, DEFAULT):
        x_root = level_root(probe, level, x_root, slope)
        sigma_f = round_up(math.exp(x_root))  # x_root passes at this level; rounding up keeps it passing
        check = sigma_f / (1.0 + ACCURACY)  # failing there puts σ* above it: σ_f <= σ*(1 + ACCURACY)
        proven = check <= probe.failing or not probe.side(check, level, "lower").meets
        if not proven and level is MIDDLE:
            proven = check <= probe.failing or not probe.side(check, DEFAULT, "lower").meets
        cert = _certificate(probe, sigma_f)
        if cert.meets and (proven or level is DEFAULT):
            return _result(probe, sigma_f, cert)
    return _result(probe, sigma_f, cert)


def _slope(points: list[tuple[float, float]], x: float) -> float:
    """d f / d log σ from the two evaluated points nearest ``x`` (−1 if they do not give a negative one)."""
    near = sorted(points, key=lambda p: abs(p[0] - x))[:2]
    if len(near) < 2 or near[0][0] == near[1][0]:
        return -1.0
    s = (near[0][1] - near[1][1]) / (near[0][0] - near[1][0])
    return s if s < 0 else -1.0


def _certificate(probe: BracketProbe, sigma: float) -> Evaluation:
    """The default bracket's upper side at σ (reused when already evaluated)."""
    for ev in probe.evaluations:
        if ev.sigma == sigma and ev.level == DEFAULT.name and ev.side == "upper":
            return ev
    return probe.side(sigma, DEFAULT, "upper")


def _result(probe: BracketProbe, sigma: float, cert: Evaluation) -> SearchResult:
    failing = probe.failing or None
    accuracy = (sigma / failing - 1.0) if failing else None
    return SearchResult(sigma, cert.delta, cert.meets, failing, accuracy, tuple(probe.evaluations), False)
