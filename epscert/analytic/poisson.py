"""Poisson subsampling baselines: a certified PLD bracket by tilted FFT composition, and RDP (SPEC §7).

T·E compositions of the Poisson-subsampled Gaussian with q = 1/T, per direction (REMOVE: the
mixture against N(0, σ²); ADD: the reverse; BOTH: the max):

- **Upper (``pld_pessimistic``).** One step's loss cells (:mod:`epscert.fft.gaussmix`) split by
  connect-the-dots onto the grid offset + kΔ (:func:`epscert.fft.pairs.ctd_upper`: a dominating
  pair, every mass rounded up), the losses above the tail cut Φ̄(z) put at +∞; composed T·E times.
- **Lower (``pld_optimistic``).** The same cells merged onto the grid by a post-processing and
  rounded down (:func:`epscert.fft.pairs.merge_lower`: a dominated pair, every mass rounded down),
  the step's body kept on one grid point (the reservoir), the cut tails dropped.

Both compositions are the tilted FFT of :mod:`epscert.fft.tilt`, whose error bound is relative to
the tilted mass near the ε read (written there as inequalities), so the bracket holds to δ far
below the absolute round-off of an untilted FFT: the floor is the +∞ mass of the upper bound,
1 - (1 - m_∞)^{T·E} with m_∞ <= Φ̄(z) per step (z up to Z_MAX = 37.5: below about T·E·1e-308 the
PLD cannot certify and RDP answers). The tilt λ for ε is the Chernoff saddle point of the
composed moment-generating function (snapped to eighth octaves so that nearby ε share one
composition); a smaller tilt is used when it gives up at most ``tilt.TILT_SLACK`` nats of tilted
mass near ε, for a smaller window. The upper composition behind each answer is checked once per
bracket against a second tilt λ/2^{1/4} (:func:`epscert.fft.tilt.check_agree`): a disagreement
beyond the written budgets raises :class:`~epscert.fft.tilt.TiltCheckError`.

Grid. Δ is the configuration's ``pld_discretization``. Connect-the-dots adds, and merging removes,
about Δ²/6 of variance per step: negligible against a per-step loss spread of many cells, not
against one of two cells (T = 10^4, σ = 0.8: spread 1.9e-4 at Δ = 1e-4, where the composed δ(0.25)
was bracketed only within a factor 3, and dp_accounting's pessimistic value at Δ = 1e-4 is 35% above
its value at 2e-5). So after a first pass, Δ is divided by 2^k (k <= MAX_REFINE in all, k from the
measured Δ^1.7 scaling of the width) while the bracket is wider than REFINE_WIDTH in ε
(REFINE_DELTA_WIDTH in δ for δ(ε)) and the step's two PMFs differ in variance by more than
REFINE_VARIANCE_GAP; the tightest values of all passes are kept (each pass is certified). A body
narrower than one cell (q·e^{1/(2σ²)} << Δ) is the reservoir's case and needs no refinement.

The per-step tail cut z is sized from the δ asked (T·E·Φ̄(z) <= TRUNCATION_SHARE·δ, RDP's δ(ε) for a
δ(ε) query), so the +∞ mass costs at most that share of the value, and the per-step support (and
the tilt that the window must hold) stays no wider than the question needs.

Where the FFT gives nothing (ε beyond the largest tilt, or a window over ``MAX_WINDOW`` points) or
where RDP is smaller, the upper value is RDP's (:mod:`epscert.analytic.poisson_rdp`; ``bound = 'rdp'``).
Dense grids: :func:`pld_grid`; where the bracket is not within 1%: :mod:`epscert.analytic.poisson_limits`.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from epscert.analytic.poisson_rdp import (RDP_RELATIVE, poisson_rdp_delta, poisson_rdp_epsilon,  # noqa: F401 (re-exported)
                                         quiet_rdp, rdp_accountant)
from epscert.analytic.crossing import EPSILON_STEPS, crossing_lower, crossing_upper  # noqa: F401 (re-exported)
from epscert.analytic.resolution import UNDERFLOW_FLOOR
from epscert.fft import tilt
from scipy import special

from epscert.fft.gaussmix import TAIL_Z, SubsampledPair
from epscert.fft.pairs import GridMasses, ctd_upper, merge_lower
from epscert.names import Direction

#: Bound names of the rows.
PLD_UPPER_BOUND, PLD_LOWER_BOUND, RDP_BOUND = "pld_pessimistic", "pld_optimistic", "rdp"
#: Share of the target δ that the per-step tail cut may cost: T·E·Φ̄(z) <= share·δ.
TRUNCATION_SHARE = 1e-4
#: Range of the tail cut z (in noise standard deviations), snapped to ``Z_STEP``.
Z_MIN, Z_MAX, Z_STEP = 5.0, 37.5, 0.5
#: Refine Δ while the bracket is wider than this (relative: in ε for ε(δ), REFINE_DELTA_WIDTH in δ
#: for δ(ε)) and the step's two PMFs differ in variance by more than REFINE_VARIANCE_GAP; Δ is
#: divided by 2^k, k <= MAX_REFINE in all, with k from the width's measured scaling (about Δ^1.7:
#: the variance gap of connect-the-dots against merging).
REFINE_WIDTH = 5e-3
REFINE_DELTA_WIDTH = 2e-2
REFINE_VARIANCE_GAP = 1e-3
REFINE_EXPONENT = 1.7
MAX_REFINE = 3
#: Largest composition window (points); beyond it the FFT is not used.
MAX_WINDOW = 2**23
#: The check tilt is the tilt divided by this (a smaller tilt: lighter tails, the window holds them).
CHECK_FACTOR = 2.0**0.25
#: ε(δ) is read again with the tilt of the answer only if that tilt is this many octaves away.
RETILT_OCTAVES = 0.5
#: ε(δ): when a window reaching down to ε = 0 is wider than MAX_WINDOW, the window starts at this
#: fraction of the guess instead (the search then runs over [bottom, Chernoff ε]: an answer below the
#: bottom is reported as the bottom on the upper side, and the lower side only finds points above it).
WINDOW_FALLBACK = 0.5
#: Compositions a bracket keeps (least recently used dropped first): a dense grid in ascending ε moves
#: through its tilts and rarely returns, so memory stays a few windows whatever the grid's size (issue 35
#: item 5: 138 kept compositions held 190 MB at 14,001 ε). A dropped one is composed again if asked for,
#: with the same factors and tilt (its window then holds the ε asked), so every value is a certified value.
KEPT_COMPOSITIONS = 8


def tail_z_for(delta_estimate: float, compositions: int) -> float:
    """z with T·E·Φ̄(z) <= TRUNCATION_SHARE·δ (snapped up to Z_STEP, within [Z_MIN, Z_MAX])."""
    tau = TRUNCATION_SHARE * max(min(delta_estimate, 1.0), 1e-300) / compositions
    z = float(-special.ndtri(tau)) if tau > 1e-300 else Z_MAX
    return min(Z_MAX, max(Z_MIN, Z_STEP * math.ceil(z / Z_STEP)))


@dataclasses.dataclass(eq=False)
class StepMasses:
    """One step's two grid PMFs for one direction, and their relative variance gap."""

    upper: GridMasses
    lower: GridMasses

    @functools.cached_property
    def variance_gap(self) -> float:
        """(Var upper - Var lower)/Var upper of the normalised finite parts (a sizing figure only)."""
        def var(g: GridMasses) -> float:
            ell, m = g.losses(), g.masses
            total = float(np.sum(m))
            mean = float(np.dot(m, ell)) / total
            return float(np.dot(m, (ell - mean) ** 2)) / total
        v_up = var(self.upper)
        return (v_up - var(self.lower)) / v_up if v_up > 0.0 else 0.0


@functools.lru_cache(maxsize=32)
def step_masses(sigma: float, steps: int, delta: float, direction: Direction, tail_z: float = TAIL_Z) -> StepMasses:
    """Connect-the-dots (upper) and merged (lower) PMFs of one step, tails cut at Φ̄(tail_z)."""
    pair = SubsampledPair(1.0 / steps, sigma, 1.0, direction)
    low, high = pair.loss_range(tail_z)
    edge = pair.reservoir_edge(delta)
    offset = edge if edge is not None else 0.0
    i_lo = math.floor((low - offset) / delta)
    i_hi = max(math.ceil((high - offset) / delta), i_lo + 1)
    upper = ctd_upper(pair.cells(delta, offset, i_lo, i_hi - i_lo))
    if edge is None:
        lower = merge_lower(pair.cells(delta, offset, i_lo, i_hi - i_lo))
    elif direction is Direction.REMOVE:  # the reservoir {ω < edge} sits at index -1, cells from 0 up
        lower = merge_lower(pair.cells(delta, offset, 0, max(i_hi, 1)), pair.reservoir(edge, delta))
    else:  # ADD: the reservoir {ω >= edge} sits at index +1, cells end at index 0
        lower = merge_lower(pair.cells(delta, offset, min(i_lo, -1), -min(i_lo, -1)), pair.reservoir(edge, delta))
    return StepMasses(upper, lower)


@dataclasses.dataclass(frozen=True)
class Value:
    """One certified value: δ, the bound that gave it, and its absolute allowance (the floor)."""

    delta: float
    bound: str
    resolution: float


class Bracket:
    """Certified lower <= δ(ε) <= upper for one direction of T·E Poisson steps (module docstring)."""

    def __init__(self, sigma: float, steps: int, epochs: int, delta: float, direction: Direction,
                 tail_z: float = TAIL_Z):
        if direction is Direction.BOTH:
            raise ValueError("Bracket needs direction remove or add, got direction='both'")
        self.sigma, self.steps, self.epochs, self.direction = sigma, steps, epochs, direction
        self.delta = delta
        masses = step_masses(sigma, steps, delta, direction, tail_z)
        self.masses = masses
        n = steps * epochs
        self.factors = {True: [tilt.Factor(masses.upper, n)], False: [tilt.Factor(masses.lower, n)]}
        self.mgf = {side: tilt.Mgf(f) for side, f in self.factors.items()}
        self._compositions: dict[tuple[bool, float], tilt.Composition] = {}
        self._checked: set[bool] = set()
        self._last: tuple[float, dict] = (math.nan, {})  # reads at the last ε asked (see :meth:`_memo`)
        self._tilts: dict[float, float] = {}  # saddle points primed for a grid (:meth:`prime_tilts`)
        self._chernoff: dict[float, float] = {}  # Chernoff bounds primed for a grid (:meth:`prime_tilts`)
        self._grid_lam: float | None = None  # the tilt of the last composition built on a grid

    def _memo(self, eps: float, what: str, compute):
        """``compute()`` for (ε, what), kept for the last ε only: on a grid 'both' re-reads what 'remove'
        and 'add' just read at the same ε, so each read is made once; the memo never grows with the grid."""
        if not self._last[0] == eps:
            self._last = (eps, {})
        memo = self._last[1]
        if what not in memo:
            memo[what] = compute()
        return memo[what]

    def prime_tilts(self, epsilons) -> None:
        """The saddle points of many ε in one batch (:meth:`~epscert.fft.tilt.Mgf.saddles`), kept until
        :meth:`forget_tilts`. A tilt is a choice, not a bound: any λ >= 0 gives a certified composition."""
        eps = sorted({float(e) for e in epsilons} - self._tilts.keys())
        if eps:
            self._tilts.update(zip(eps, self.mgf[True].saddles(eps)))
            self._chernoff.update(zip(eps, self.chernoff_bounds(eps)))  # the same values, one pass
        self._grid_lam = None

    def forget_tilts(self) -> None:  # the end of a grid
        self._tilts, self._grid_lam, self._chernoff = {}, None, {}

    def _grid_tilt(self, eps: float, saddle: float) -> float:
        """On a grid read in ascending ε: the tilt of the last composition built, while it is at most
        the saddle point λ* of ε and gives up at most TILT_SLACK nats of tilted mass near ε
        (h(λ) <= h(λ*) + TILT_SLACK, h(λ) = Σ c log M(λ) - λε): the same criterion by which
        :meth:`~epscert.fft.tilt.Mgf.economical` lowers a tilt for a single ε, so the relative
        round-off stays within the same e^{TILT_SLACK}; else the per-ε tilt, which becomes the last."""
        mgf, last = self.mgf[True], self._grid_lam
        if last is not None and last <= saddle:
            h = mgf.values([last, saddle]) - np.asarray([last, saddle]) * eps
            if h[0] <= h[1] + tilt.TILT_SLACK:
                return last
        self._grid_lam = tilt.lam_grid(mgf.economical(eps, saddle))
        return self._grid_lam

    # -- compositions ----------------------------------------------------------------------------
    def tilt_for(self, eps: float) -> float:
        """The saddle-point tilt for ε, lowered while that costs at most TILT_SLACK nats of tilted
        mass near ε (:meth:`~epscert.fft.tilt.Mgf.economical`: a smaller window), snapped."""
        saddle = self._tilts.get(eps)
        if saddle is not None:
            return self._memo(eps, "tilt", lambda: self._grid_tilt(eps, saddle))
        mgf = self.mgf[True]
        return self._memo(eps, "tilt", lambda: tilt.lam_grid(mgf.economical(eps, mgf.saddle(eps))))

    def _window(self, upper: bool, lam: float, eps: float) -> tuple[float, float] | None:
        bottom, top = tilt.window_for(self.mgf[upper], lam, eps)
        if not (math.isfinite(bottom) and math.isfinite(top)) or (top - bottom) / self.delta > MAX_WINDOW:
            return None
        return bottom, top

    def composition(self, upper: bool, lam: float, eps: float) -> tilt.Composition | None:
        """The tilted composition of one side at λ whose window holds ε (cached; None if too wide)."""
        key = (upper, lam)
        comp = self._compositions.get(key)
        if comp is not None and comp.bottom <= eps:
            self._compositions[key] = self._compositions.pop(key)  # the most recently used: kept longest
            return comp
        window = self._window(upper, lam, eps)
        if window is None:
            return None
        comp = tilt.compose(self.factors[upper], lam, eps, self.mgf[upper], window=window)
        self._compositions.pop(key, None)
        self._compositions[key] = comp
        while len(self._compositions) > KEPT_COMPOSITIONS:  # least recently used first (dicts keep order)
            self._compositions.pop(next(iter(self._compositions)))
        return comp

    def check(self, eps: float) -> None:
        """A-posteriori check of the upper composition read at ε against a second tilt λ/2^{1/4}
        (:func:`epscert.fft.tilt.check_agree`; raises TiltCheckError). Once per bracket."""
        if self._checked or not math.isfinite(eps):
            return
        lam = self.tilt_for(eps)
        comp = self.composition(True, lam, eps)
        check_lam = tilt.lam_grid(lam / CHECK_FACTOR)
        window = self._window(True, check_lam, eps)
        if comp is None or window is None:
            return
        self._checked.add(True)
        second = tilt.compose(self.factors[True], check_lam, eps, self.mgf[True], window=window)
        tilt.check_agree(comp, second, eps, True)

    # -- values ----------------------------------------------------------------------------------
    def chernoff_upper(self, eps: float) -> float:
        """See :meth:`chernoff_bound` (kept for the last ε asked, or primed for a grid)."""
        primed = self._chernoff.get(eps)
        if primed is not None:
            return primed
        return self._memo(eps, "chernoff", lambda: self.chernoff_bound(eps))

    def chernoff_bound(self, eps: float) -> float:
        """δ(ε) <= p∞ + min_s e^{Σ log M(s) - sε}·s^s/(s+1)^{s+1} (E(1 - e^{ε-S})_+ <= E e^{s(S-ε)}·
        max_t (1 - e^{-t})e^{-st}), over s on the Chernoff grid: valid without any FFT."""
        return self.chernoff_bounds([eps])[0]

    def chernoff_bounds(self, epsilons) -> list[float]:
        """:meth:`chernoff_bound` at many ε in one array pass (the same arithmetic, element by element)."""
        s = tilt.TAIL_S
        eps = np.asarray(epsilons, dtype=np.float64)[:, None]
        with np.errstate(invalid="ignore"):
            logs = self.mgf[True].at_tail_s() - s * eps + s * np.log(s) - (s + 1.0) * np.log1p(s)
            least = np.nanmin(logs, axis=1)
        inf_part = -math.expm1(self.mgf[True].log_finite) if self.mgf[True].log_finite > -math.inf else 1.0
        return [min(1.0, inf_part + math.exp(min(v, 0.0))) for v in least.tolist()]

    def upper(self, eps: float) -> Value:
        """Upper bound on δ(ε): the tilted FFT where it applies, else the Chernoff bound (kept for the last ε)."""
        return self._memo(eps, "upper", lambda: self._upper(eps))

    def lower(self, eps: float) -> Value:
        """Lower bound on δ(ε) (0 where the FFT gives nothing; kept for the last ε)."""
        return self._memo(eps, "lower", lambda: self._lower(eps))

    def _upper(self, eps: float) -> Value:
        comp = self.composition(True, self.tilt_for(eps), eps)
        chern = self.chernoff_upper(eps)
        if comp is None:
            return Value(chern, PLD_UPPER_BOUND, chern)
        val = comp.upper(eps)
        if chern < val:
            return Value(chern, PLD_UPPER_BOUND, chern)
        return Value(val, PLD_UPPER_BOUND, comp.absolute(eps, True))

    def _lower(self, eps: float) -> Value:
        comp = self.composition(False, self.tilt_for(eps), eps)
        if comp is None:
            return Value(0.0, PLD_LOWER_BOUND, 0.0)
        return Value(comp.lower(eps), PLD_LOWER_BOUND, comp.absolute(eps, False))

    def epsilon(self, target: float, upper: bool, guess: float | None = None) -> float:
        """Upper side: an ε with upper(ε) <= target (the Chernoff ε if the FFT gives none, inf if that
        is infinite); lower side: an ε with lower(ε) > target, so ε(target) > it (0 if none found).
        Bisection on one composition whose tilt is the saddle point at ``guess`` (default: the
        Chernoff ε), then once more at the saddle of the answer. The bisection keeps its invariant
        (upper: read(b) <= target; lower: read(a) > target) and returns that end, so the answer is a
        certified point even where a composition read far from its tilt is loose (not monotone).
        """
        hi = self.chernoff_epsilon(target, upper)
        if not math.isfinite(hi):
            return math.inf if upper else 0.0
        best = hi if upper else 0.0
        guess = hi if guess is None or not math.isfinite(guess) else min(guess, hi)
        for _ in range(2):
            lam = self.tilt_for(guess)
            comp = self.composition(upper, lam, 0.0)
            if comp is None and guess > 0.0:  # a window down to ε = 0 is too wide: start it nearer the guess
                comp = self.composition(upper, lam, WINDOW_FALLBACK * guess)
            if comp is None:
                break
            if upper:
                found = crossing_upper(comp.upper, target, max(comp.bottom, 0.0), hi)
                best = min(best, found)
            else:
                found = crossing_lower(comp.lower, target, max(comp.bottom, 0.0), guess, hi)
                best = max(best, found)
            again = self.tilt_for(found) if 0.0 < found < math.inf else lam
            if again == lam or (lam > 0.0 and again > 0.0 and abs(math.log2(again / lam)) < RETILT_OCTAVES):
                break
            guess = found
        return best

    @functools.lru_cache(maxsize=64)  # noqa: B019 (one Bracket per cached configuration)
    def chernoff_epsilon(self, target: float, upper: bool = True) -> float:
        """The smallest ε with the Chernoff bound of one side's PMF <= target, in closed form per s:
        ε(s) = [Σ log M(s) + s log s - (s+1) log(s+1) - log(target - p∞)]/s, minimised over s.
        For the lower side this is where the search for lower(ε) > target can stop (lower <= it)."""
        mgf = self.mgf[upper]
        inf_part = -math.expm1(mgf.log_finite) if mgf.log_finite > -math.inf else 1.0
        if target <= inf_part:
            return math.inf
        s = tilt.TAIL_S
        with np.errstate(invalid="ignore"):
            eps = (mgf.values(s) + s * np.log(s) - (s + 1.0) * np.log1p(s) - math.log(target - inf_part)) / s
        best = float(np.nanmin(eps))
        return max(0.0, best) if math.isfinite(best) else math.inf


@functools.lru_cache(maxsize=32)
def bracket(sigma: float, steps: int, epochs: int, delta: float, direction: Direction,
            tail_z: float = TAIL_Z) -> Bracket:
    """The cached :class:`Bracket` of one direction on the grid step ``delta``."""
    return Bracket(float(sigma), int(steps), int(epochs), float(delta), direction, float(tail_z))


def _parts(sigma, steps, epochs, delta, direction: Direction, tail_z) -> list[Bracket]:
    return [bracket(sigma, steps, epochs, delta, d, tail_z) for d in direction.parts()]


@functools.lru_cache(maxsize=256)
def delta_pair(sigma: float, steps: int, epochs: int, discretization: float, direction: Direction,
               eps: float) -> tuple[Value, Value]:
    """(upper, lower) certified δ(ε); BOTH: the max over directions (module docstring).

    The tail cut is sized from RDP's δ(ε) (an upper bound, so the cut's share is at most
    TRUNCATION_SHARE of it); Δ is halved while the bracket is wider than REFINE_WIDTH and the
    grid is the cause (variance gap). A direction whose Chernoff bound is below the other's lower
    value cannot be the max and is not composed. The upper is RDP's where that is smaller.
    """
    return pair_at(sigma, steps, epochs, discretization, direction, eps,
                   float(poisson_rdp_delta(sigma, steps, epochs, [eps])[0]))


def pair_at(sigma: float, steps: int, epochs: int, discretization: float, direction: Direction,
            eps: float, rdp: float, tail_z: float | None = None) -> tuple[Value, Value]:
    """:func:`delta_pair` given RDP's δ(ε) (computed for a whole grid at once by :func:`pld_grid`), with
    the tail cut ``tail_z`` if given (else sized from RDP's δ(ε))."""
    n = steps * epochs
    z = tail_z_for(rdp, n) if tail_z is None else tail_z
    delta = start_delta(sigma, steps, epochs, float(discretization), z)
    best_up, best_lo = None, None
    refine = 0
    while True:
        parts = _parts(sigma, steps, epochs, delta, direction, z)
        order = sorted(parts, key=lambda b: -b.chernoff_upper(eps))
        ups, los = [], []
        for b in order:
            if los and b.chernoff_upper(eps) <= max(v.delta for v in los):
                continue  # dominated: its δ <= Chernoff <= another direction's lower value
            ups.append(b.upper(eps))
            los.append(b.lower(eps))
        up = max(ups, key=lambda v: v.delta)
        lo = max(los, key=lambda v: v.delta)
        if best_up is None or up.delta < best_up.delta:
            best_up = up
        if best_lo is None or lo.delta > best_lo.delta:
            best_lo = lo
        width = best_up.delta / best_lo.delta - 1.0 if best_lo.delta > 0.0 else math.inf
        if width <= REFINE_DELTA_WIDTH or refine >= MAX_REFINE or max(b.masses.variance_gap for b in parts) <= REFINE_VARIANCE_GAP:
            break
        k = _refine_steps(width, REFINE_DELTA_WIDTH, MAX_REFINE - refine)
        delta /= 2.0**k
        refine += k
    max(parts, key=lambda b: b.chernoff_upper(eps)).check(eps)
    if rdp < best_up.delta:
        best_up = Value(rdp, RDP_BOUND, float(UNDERFLOW_FLOOR))
    if best_up.delta < UNDERFLOW_FLOOR:  # an upper bound is never 0: a true δ below it underflowed
        best_up = dataclasses.replace(best_up, delta=float(UNDERFLOW_FLOOR),
                                      resolution=max(best_up.resolution, float(UNDERFLOW_FLOOR)))
    return best_up, best_lo


#: At most this many halvings of the grid step before the first pass (:func:`start_delta`): 2^-10, and
#: none that would take one step's PMF past START_MAX_POINTS (memory: thin steps have few points).
MAX_START_HALVINGS, START_MAX_POINTS = 10, 2**18
#: One step's loss spread should span at least this many grid cells (measured: σ = 3, T = 10^4, E = 100
#: spreads over 0.5 cell of 1e-4 and the lower side was 0 at every δ from 1e-5 to 1e-15, the merged
#: PMF's rounding compounded over T·E steps; from Δ = 1e-5, 5 cells, the bracket is 0.5% wide).
MIN_SPREAD_CELLS = 8.0


def step_spread(sigma: float, steps: int, epochs: int, discretization: float, tail_z: float) -> float:
    """Standard deviation of one step's privacy loss (the smaller direction's connect-the-dots PMF)."""
    out = math.inf
    for d in (Direction.REMOVE, Direction.ADD):
        g = step_masses(float(sigma), int(steps), float(discretization), d, float(tail_z)).upper
        ell, m = g.losses(), g.masses
        total = float(np.sum(m))
        mean = float(np.dot(m, ell)) / total
        out = min(out, math.sqrt(max(float(np.dot(m, (ell - mean) ** 2)) / total, 0.0)))
    return out


@functools.lru_cache(maxsize=64)
def start_delta(sigma: float, steps: int, epochs: int, discretization: float, tail_z: float) -> float:
    """The grid step the bracket starts from: ``discretization`` halved until one step's loss spread
    covers at least MIN_SPREAD_CELLS cells (:func:`step_spread`), at most MAX_START_HALVINGS times.

    Where the spread is a sliver of a cell (σ = 3, T = 10^4: 0.5 cell of 1e-4) the merged lower PMF's
    rounding, compounded over T·E steps, left no lower side. Any grid gives a certified bracket (PMFs
    rounded outward at any Δ): a finer start changes the width only, at the window's cost."""
    delta = float(discretization)
    spread = step_spread(sigma, steps, epochs, delta, tail_z)
    points = step_masses(float(sigma), int(steps), delta, Direction.REMOVE, float(tail_z)).upper.masses.size
    halvings = 0
    while spread < MIN_SPREAD_CELLS * delta and halvings < MAX_START_HALVINGS and 2 * points <= START_MAX_POINTS:
        delta /= 2.0
        halvings += 1
        points *= 2
    return delta


def _refine_steps(width: float, target: float, left: int) -> int:
    """Halvings of Δ that should bring ``width`` (∝ Δ^REFINE_EXPONENT) to 0.7·target, in [1, left]."""
    if not math.isfinite(width):
        return left
    need = math.log2(width / (0.7 * target)) / REFINE_EXPONENT
    return int(min(left, max(1, math.ceil(need))))


#: Grids of at least this many ε go through :func:`pld_grid` (smaller ones through the per-ε cache).
GRID_MIN = 8


@functools.lru_cache(maxsize=4)
def pld_grid(sigma: float, steps: int, epochs: int, discretization: float, directions: tuple[Direction, ...],
             epsilons: tuple[float, ...]) -> dict[Direction, tuple[tuple[Value, ...], tuple[Value, ...]]]:
    """(upper values, lower values) per direction over an ε grid: :func:`delta_pair` at each ε, with what
    a grid shares done once (issue 35 item 5: 14,001 ε cost 14,001 separate answers).

    - RDP's δ(ε) is one array pass (:func:`poisson_rdp_delta`);
    - one tail cut z for the whole grid: the largest of the per-ε cuts (the one sized from the
      smallest RDP δ on the grid), so one pair of step PMFs per direction instead of one per z. A
      larger cut is safe at every ε: it puts less mass at +∞ (upper side) and drops less (lower
      side), so T·E·Φ̄(z) <= TRUNCATION_SHARE·δ holds at every ε of the grid;
    - the saddle points of all ε are one batch per bracket (:meth:`Bracket.prime_tilts`), and ε in
      ascending order reuse the last composition's tilt while it is within TILT_SLACK nats of the
      saddle (:meth:`Bracket._grid_tilt`): a composition is read at many ε;
    - the directions asked are answered ε by ε, so 'both' reads what 'remove' and 'add' just read
      (:meth:`Bracket._memo`), and ``pld_upper`` and ``pld_lower`` share this cache.
    Every value is a certified value of the same bracket: the tail cut and the tilt are free
    parameters of the tilted FFT (its bound holds for any), so values differ from the per-ε path's in
    the last digits (tests/core/test_poisson_pld.py compares them), never in validity.
    """
    eps = np.asarray(epsilons, dtype=np.float64)
    order = np.argsort(eps, kind="stable")
    rdp = poisson_rdp_delta(sigma, steps, epochs, eps)
    n = steps * epochs
    z = max(tail_z_for(float(r), n) for r in rdp.tolist())
    out: dict[Direction, tuple[list, list]] = {d: ([None] * eps.size, [None] * eps.size) for d in directions}
    primed = [bracket(sigma, steps, epochs, start_delta(sigma, steps, epochs, float(discretization), z), d, z)
              for d in sorted({d for direction in directions for d in direction.parts()}, key=lambda d: d.value)]
    for b in primed:
        b.prime_tilts(epsilons)
    try:
        for i in order.tolist():
            for d in directions:
                up, lo = pair_at(sigma, steps, epochs, float(discretization), d, float(eps[i]), float(rdp[i]), z)
                out[d][0][i] = up
                out[d][1][i] = lo
    finally:
        for b in primed:
            b.forget_tilts()
    return {d: (tuple(u), tuple(lo)) for d, (u, lo) in out.items()}


def poisson_pld_values(sigma: float, steps: int, epochs: int, epsilons, direction: Direction,
                       discretization: float, pessimistic: bool,
                       directions: tuple[Direction, ...] | None = None) -> list[Value]:
    """Certified δ(ε) values (upper if ``pessimistic``), one per ε (see :func:`delta_pair`).

    A grid of GRID_MIN or more ε goes through :func:`pld_grid` for ``directions`` (default: just
    ``direction``; a caller that will ask for several directions of the same grid names them all)."""
    args = (float(sigma), int(steps), int(epochs), float(discretization))
    grid = tuple(float(e) for e in np.atleast_1d(epsilons))
    if len(grid) >= GRID_MIN:
        dirs = (direction,) if directions is None else tuple(directions)
        if direction not in dirs:
            raise ValueError(f"direction={direction.value!r} is not among directions={[d.value for d in dirs]}")
        return list(pld_grid(*args, dirs, grid)[direction][0 if pessimistic else 1])
    return [delta_pair(*args, direction, e)[0 if pessimistic else 1] for e in grid]


def poisson_pld_bounds(sigma: float, steps: int, epochs: int, epsilons, direction: Direction,
                       discretization: float, pessimistic: bool,
                       directions: tuple[Direction, ...] | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(δ values, resolutions, bound names) of :func:`poisson_pld_values` as arrays."""
    vals = poisson_pld_values(sigma, steps, epochs, epsilons, direction, discretization, pessimistic, directions)
    return (np.asarray([v.delta for v in vals], dtype=np.float64),
            np.asarray([v.resolution for v in vals], dtype=np.float64), [v.bound for v in vals])


def poisson_pld_delta(sigma: float, steps: int, epochs: int, epsilons, direction: Direction,
                      discretization: float, pessimistic: bool) -> np.ndarray:
    """The certified δ values alone (see :func:`delta_pair`)."""
    return poisson_pld_bounds(sigma, steps, epochs, epsilons, direction, discretization, pessimistic)[0]


@functools.lru_cache(maxsize=256)
def epsilon_pair(sigma: float, steps: int, epochs: int, discretization: float, direction: Direction,
                 target: float) -> tuple[float, str, float]:
    """(upper ε, its bound name, lower ε) of ε(target); BOTH: the max over directions (δ_both = max).

    Tail cut sized from the target; Δ refined as in :func:`delta_pair` while the ε bracket is wider
    than REFINE_WIDTH (relative). A direction whose Chernoff ε is at most the other's lower ε is not
    composed. The upper is RDP's ε where that is smaller (named ``rdp``).
    """
    n = steps * epochs
    z = tail_z_for(target, n)
    delta = start_delta(sigma, steps, epochs, float(discretization), z)
    best_up, best_lo = math.inf, 0.0
    refine = 0
    while True:
        parts = _parts(sigma, steps, epochs, delta, direction, z)
        order = sorted(parts, key=lambda b: -b.chernoff_epsilon(target))
        up, lo = 0.0, 0.0
        for b in order:
            if lo > 0.0 and b.chernoff_epsilon(target) <= lo:
                continue
            e_up = b.epsilon(target, True)
            up = max(up, e_up)
            lo = max(lo, b.epsilon(target, False, guess=e_up))
        best_up, best_lo = min(best_up, up), max(best_lo, lo)
        width = (best_up - best_lo) / best_up if math.isfinite(best_up) and best_up > 0.0 else 0.0
        if width <= REFINE_WIDTH or refine >= MAX_REFINE or max(b.masses.variance_gap for b in parts) <= REFINE_VARIANCE_GAP:
            break
        k = _refine_steps(width, REFINE_WIDTH, MAX_REFINE - refine)
        delta /= 2.0**k
        refine += k
    max(parts, key=lambda b: b.chernoff_epsilon(target)).check(best_up)
    rdp = poisson_rdp_epsilon(sigma, steps, epochs, target)
    if rdp < best_up:
        return rdp, RDP_BOUND, best_lo
    return best_up, PLD_UPPER_BOUND, best_lo


def poisson_pld_epsilon(sigma: float, steps: int, epochs: int, target: float, direction: Direction,
                        discretization: float, pessimistic: bool) -> tuple[float, str]:
    """(ε, bound name): an upper bound on ε(target) (``pessimistic``) or a lower bound (see :func:`epsilon_pair`)."""
    up, name, lo = epsilon_pair(float(sigma), int(steps), int(epochs), float(discretization), direction,
                                float(target))
    return (up, name) if pessimistic else (lo, PLD_LOWER_BOUND)
