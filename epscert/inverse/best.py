"""The tightest certified answer for a sampler: which methods certify it, and the best of them.

:func:`certified_methods` lists, per sampler, the methods whose value is a valid upper bound on
that sampler's δ(ε) (or ε(δ)), in the order they are evaluated. :func:`best_certificate`
evaluates them and returns the smallest value with the method that gave it. Every entry point
that answers "what is my ε" (``epscert epsilon``, ``Accountant.get_epsilon/get_delta`` with
``method='auto'``, sweeps with ``method: auto``) goes through these two functions, so a new
certified method is one line in :data:`CANDIDATES`.

Candidates (the one table, :data:`epscert.support.CANDIDATES`):

- poisson: ``pld_upper`` (the certified Poisson PLD bracket's upper side, RDP where that is smaller), ``rdp_upper`` (δ(ε) only: RDP gives
  no ε(δ) curve here, and PLD is the tighter of the two in every case we know of).
- deterministic: ``exact``.
- balls_and_bins: the deterministic PLD bracket's upper side ``bracket_upper`` (:mod:`epscert.allocation`,
  for σ >= 0.05, T <= 10^6, E <= 1000), Monte Carlo (``auto``, resolved by
  :class:`~epscert.config.CertifyConfig`), then ``exact`` through domination (below).
- shuffle, shuffle_persistent: ``exact`` through domination only. Their Monte Carlo pair is tight
  only under a conjecture, so it certifies nothing.
- a matrix mechanism (a configuration with a strategy, :data:`MATRIX_CANDIDATES`): the
  Balls-and-Bins bracket's upper side ``bracket_upper`` when C = c·I and b divides n (the pair is then
  Balls-and-Bins at σ/(c√k), within the bracket's range), the comonotone Gaussian upper bound
  ``comonotone_upper_bound`` (:mod:`epscert.matrix.bracket`), then Monte Carlo (``auto``: the
  configuration's method, ``tilted`` by default). No sample floor is applied: its value
  estimators have ranges B(ε) below 1.

Two-sided answer. Beside the tightest upper bound, :class:`Certificate` carries the largest
certified lower bound found (``lower``): from the Monte Carlo rows' LCBs (at level β; for ε(δ)
see :func:`epscert.inverse.epsilon_at_delta.lower_epsilon`) and, for a matrix mechanism, from its
deterministic lower bounds (:data:`MATRIX_LOWER`: the bracket's lower side for C = c·I, and the
independent-modes bound), which hold always. The maximum of lower bounds is a lower bound. Each side
holds at level β, the pair at 2β. ``estimate`` is the Monte Carlo point estimate when a Monte Carlo
method with an unbiased mean ran (naive, importance, conditional, the matrix value estimators); an
order-statistic method's mean is an upper bound's mean, biased upward, and is never the estimate.

Monte Carlo runs only when no candidate before it answered (the bracket is within about 1% of the
true δ, where a Monte Carlo UCB is far looser and costs a sampling run), and only when its sample
count can reach the target at all (:func:`epscert.inverse.epsilon_at_delta.mc_epsilon_floor`);
otherwise a note says what a finite answer needs. A candidate outside its range (the bracket's σ,
T, E limits, or a δ below its resolution) leaves a note naming the limit.

Domination by deterministic batches. With Balls-and-Bins or shuffling, the batch assignment is
drawn independently of the data, and given the assignment every record sits in exactly one
batch per epoch. Conditioned on the assignment, the run is a deterministic-batch run, whose
privacy curve is at most δ_D(σ, E) (E adaptive Gaussian participations of sensitivity 1). The
hockey-stick divergence is jointly convex, so the mixture over assignments (the same law under
both neighbouring datasets) has δ(ε) <= δ_D(ε) for every ε, in both directions. Hence ``exact``
of the deterministic sampler at the same (σ, E) is a certified upper bound (``guarantee``
``upper_bound``, ``bound`` ``deterministic_domination``). Poisson is not dominated (a record
may join many batches). Truncated batches are left out of this argument (no candidate).

Why Monte Carlo can give no finite answer. The estimators with values in [0, 1] (``naive``,
``order_stats``) have, when the sample mean is 0, the KL–Chernoff UCB 1 - β'^{1/m} (the p with
m·kl(0‖p) = -m·log(1 - p) = log(1/β'), SPEC §3), and the UCB only grows with the mean. So
UCB <= δ needs 1 - β'^{1/m} <= δ, that is at least

    m >= log(1/β') / (-log(1 - δ))  ≈  log(1/β') / δ   samples per direction,

with β' = β/2 for ``direction='both'`` (each direction runs at β/2). Importance sampling with
scale s (values in [0, s]) needs s times that. :func:`samples_needed` returns this floor
(rounded up, so the stated count is never below the true floor); the time estimate scales the
measured seconds of the run that failed.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import time
from typing import Mapping, NamedTuple, Sequence

from epscert import support
from epscert.allocation import bracket_for
from epscert.allocation.bracket import MAX_EPSILON as BRACKET_MAX_EPSILON
from epscert.inverse.epsilon_at_delta import analytic_epsilon_rows, check_deltas, mc_epsilon_floor, mc_epsilon_rows
from epscert.inverse.search import MAX_EPSILON as SEARCH_MAX_EPSILON
from epscert.config.samplers import estimated_seconds
from epscert.config import (
    MAX_EPSILON, MAX_TOTAL_COORDINATES, bracket_limit, parse_sampler, CertifyConfig, Method, Sampler, check_float,
)
from epscert.progress import Callback, ProgressMeter
from epscert.results.baselines import independent_bound_applies
from epscert.analytic.poisson import delta_pair, epsilon_pair
from epscert.analytic.poisson_limits import looseness_note
from epscert.results.cost import format_seconds
from epscert.results.rows import analytic_rows
from epscert.results.tables import certify_config

#: Per sampler, the methods whose values certify an upper bound, in evaluation order (read from
#: :data:`epscert.support.CANDIDATES`). ``Method.AUTO`` stands for the configuration's Monte Carlo
#: method; ``Method.EXACT`` on a sampler other than ``deterministic`` stands for the deterministic
#: curve by domination (module docstring).
CANDIDATES: Mapping[Sampler, tuple[Method, ...]] = {
    s: tuple(Method(m) for m in support.CANDIDATES[(support.DEFAULT_MECHANISM, s.value)]) for s in Sampler
}
#: The candidates of a matrix mechanism (a configuration with a strategy), in evaluation order.
MATRIX_CANDIDATES = tuple(Method(m) for m in support.CANDIDATES[("bandmf", support.MATRIX_SAMPLER)])
#: Deterministic lower bounds of a matrix mechanism, evaluated for the two-sided answer.
MATRIX_LOWER = (Method.BRACKET_LOWER, Method.INDEPENDENT_LOWER_BOUND)
DOMINATION_BOUND = "deterministic_domination"
#: Methods that give an ε(δ) curve (RDP gives δ at a grid of ε only).
EPSILON_METHODS = frozenset({Method.AUTO, Method.EXACT, Method.PLD_UPPER, Method.BRACKET_UPPER,
                             Method.COMONOTONE_UPPER_BOUND})
#: Row guarantees whose lower column is a lower bound for the configuration asked about (a row relabeled
#: by domination says 'upper_bound', and its lower column belongs to the dominating sampler).
LOWER_GUARANTEES = frozenset({"exact", "lower_bound", "mc_upper_confidence"})
#: The other side of a candidate's bracket (a sweep's ``method: auto`` computes both sides).
OTHER_SIDE = {Method.BRACKET_UPPER: Method.BRACKET_LOWER, Method.PLD_UPPER: Method.PLD_LOWER}


def certified_methods(sampler: Sampler | str) -> tuple[Method, ...]:
    """The candidate methods of ``sampler``, in evaluation order (see :data:`CANDIDATES`)."""
    return CANDIDATES[parse_sampler(sampler)]


def candidate_methods(config: CertifyConfig) -> tuple[Method, ...]:
    """The candidates of ``config``: :data:`MATRIX_CANDIDATES` for a matrix mechanism, else its sampler's."""
    return MATRIX_CANDIDATES if config.strategy is not None else certified_methods(config.sampler)


def auto_methods(config: CertifyConfig) -> tuple[Method, ...]:
    """What a sweep's ``method: auto`` runs for ``config``: the candidate ``epscert epsilon`` would answer with.

    The first analytic candidate of the sampler that applies to this (σ, T, E), with the other side of
    its bracket (Balls-and-Bins in the bracket's range: ``bracket_upper`` and ``bracket_lower``;
    Poisson: ``pld_upper`` and ``pld_lower``, the upper side already falling back to RDP below its
    resolution; deterministic: ``exact``), so the rows' ``method`` records which candidate it was. Monte
    Carlo ``auto`` only where none applies (Balls-and-Bins outside the bracket's range). Domination needs the deterministic sampler's own configuration (a sweep
    adds it with ``baselines: true``); shuffling keeps Monte Carlo ``auto`` (a conjecture, labelled so).
    """
    if config.strategy is not None:  # a matrix mechanism: its bracket (C = c·I, b | n), else Monte Carlo
        if _matrix_candidate(config, Method.BRACKET_UPPER) is not None:
            return (Method.BRACKET_UPPER, Method.BRACKET_LOWER)
        return (Method.AUTO,)
    for method in CANDIDATES[config.sampler]:
        if method is Method.AUTO or (method is Method.EXACT and config.sampler is not Sampler.DETERMINISTIC):
            continue
        if _candidate_config(config, method) is None:
            continue
        return (method, OTHER_SIDE[method]) if method in OTHER_SIDE else (method,)
    return (Method.AUTO,)


def samples_needed(delta: float, error_prob: float, directions: int = 2, scale: float = 1.0) -> int:
    """Fewest samples per direction for which a [0, s]-valued KL–Chernoff UCB can reach ``delta``.

    m >= log(1/β') / (-log(1 - δ/s)) with β' = error_prob / directions (module docstring); rounded
    up, so the count returned is never below the floor. ``scale`` s is the importance-sampling scale
    (1 without importance sampling); δ >= s needs no samples beyond one.
    """
    delta = check_float("delta", delta, low=0.0, low_open=True, high=1.0)
    beta = check_float("error_prob", error_prob, low=0.0, low_open=True, high=1.0) / directions
    if delta >= scale:
        return 1
    return math.ceil(math.log(1.0 / beta) / -math.log1p(-delta / scale))


def outward_text(value: float, up: bool, digits: int = 4, places: int | None = None) -> str:
    """``value`` with ``digits`` significant digits (or ``places`` decimals), rounded on its exact binary value
    (:class:`decimal.Decimal`) away from the side it bounds: up for an upper bound, down for a lower one, so the
    printed number is still a bound (7.609375 as an upper bound prints 7.61, not 7.609). inf and nan as ``str``."""
    if not math.isfinite(value):
        return str(value)
    if value == 0.0:
        return "0" if places is None else format(0.0, f".{places}f")
    with decimal.localcontext() as ctx:
        ctx.prec = 1200  # every double's exact decimal expansion fits (at most 767 significant digits)
        exact = decimal.Decimal(value)
        exponent = -places if places is not None else exact.adjusted() - digits + 1
        q = exact.quantize(decimal.Decimal(1).scaleb(exponent),
                           rounding=decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR)
        if places is not None or -5 <= q.adjusted() < digits + 2:
            return f"{q:f}"
        return f"{q:e}"


def count_text(count: float) -> str:
    """A sample count a reader can take in: exact below 10^7, else three digits and a power of ten."""
    return f"{int(count)}" if count < 1e7 else f"{count:.3g}"


class Interval(NamedTuple):
    """A two-sided answer: ``lower`` <= the true value <= ``upper`` (each at level β when Monte Carlo
    gave it, both at 2β), and the point ``estimate`` (None when no Monte Carlo ran)."""

    lower: float
    estimate: float | None
    upper: float


def lower_and_estimate(rows: Sequence[dict], quantity: str, direction: str) -> tuple[float, str | None, float | None]:
    """(largest certified lower bound, the method that gave it, the Monte Carlo estimate) in ``rows``.

    Lower: the ``epsilon_lower``/``delta_lower`` column of the rows for ``direction`` (or 'both') whose
    guarantee is in :data:`LOWER_GUARANTEES`; 0 (always a lower bound) when none. Estimate: the
    ``epsilon``/``delta`` column of a Monte Carlo row whose method's mean is unbiased
    (``Method.mean_is_unbiased``), else of an exact row, else None. An order-statistic row's value is the
    mean of raised values, an upper bound's mean, biased upward by construction: it is never taken as
    the estimate (nor has it a lower side: its rows carry no ``delta_lower``).
    """
    lower_col, point = ("epsilon_lower", "epsilon") if quantity == "epsilon" else ("delta_lower", "delta")
    monte_carlo = {m.value for m in Method if m.mean_is_unbiased}
    lower, method, estimate, exact = 0.0, None, None, None
    for row in rows:
        if row["direction"] not in (direction, "both"):
            continue
        value = row.get(lower_col)
        if row["guarantee"] in LOWER_GUARANTEES and value is not None and math.isfinite(value) and value > lower:
            lower, method = float(value), row["method"]
        if row["method"] in monte_carlo and row["guarantee"] == "mc_upper_confidence":
            estimate = row[point] if estimate is None else max(estimate, row[point])
        elif row["guarantee"] == "exact":
            exact = row[point]
    return lower, method, (estimate if estimate is not None else exact)


@dataclasses.dataclass(frozen=True)
class Certificate:
    """The tightest certified upper bound found, which candidate gave it, and why others did not.

    ``value`` is ε(δ) (``quantity='epsilon'``) or δ(ε) (``quantity='delta'``), for the whole run or,
    with ``steps_done``, for its first ``steps_done`` steps; it holds with
    probability >= 1 - ``error_prob`` when a Monte Carlo candidate gave it (``error_prob`` None:
    a deterministic bound). ``notes`` say, for each candidate that gave nothing finite, why, and
    what a finite answer needs. ``rows`` are every candidate's rows.
    """

    quantity: str
    target: float
    sampler: str
    value: float
    method: str | None
    bound: str | None
    guarantee: str | None
    error_prob: float | None
    notes: tuple[str, ...]
    rows: tuple[dict, ...]
    samples_needed: int | None = None
    seconds_needed: float | None = None
    lower: float = 0.0
    lower_method: str | None = None
    estimate: float | None = None
    #: the steps of the run certified (None: all of them; see :mod:`epscert.inverse.prefix`)
    steps_done: int | None = None

    def __post_init__(self) -> None:
        # an estimate printed with an interval lies inside it, or is absent: a Monte Carlo point from a
        # candidate that certified nothing (a coarse-grid point above the winning upper bound) is no
        # estimate of this interval's quantity
        est = self.estimate
        if est is not None and not (math.isfinite(est) and self.lower <= est <= self.value):
            object.__setattr__(self, "estimate", None)

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)

    @property
    def interval(self) -> "Interval":
        """(certified lower bound, estimate, certified upper bound), as prv_accountant returns them."""
        return Interval(self.lower, self.estimate, self.value)

    def summary(self) -> str:
        """One line: the value, its method and guarantee, or why there is none."""
        name = "ε" if self.quantity == "epsilon" else "δ"
        at = f"δ={self.target:g}" if self.quantity == "epsilon" else f"ε={self.target:g}"
        if self.steps_done is not None:
            at += f", after {self.steps_done} steps"
        if not self.finite:
            sentences = [n if n.endswith(".") else n + "." for n in self.notes]  # one sentence per note
            return (f"{name}({at}) for {self.sampler}: no finite certificate. " + " ".join(sentences)).strip()
        beta = f", β={self.error_prob:g}" if self.error_prob is not None else ""
        return (f"{name}({at}) <= {outward_text(self.value, up=True, digits=6)} for {self.sampler} "
                f"(method {self.method}, {self.guarantee}, bound {self.bound}{beta})")


def _matrix_candidate(config: CertifyConfig, method: Method) -> CertifyConfig | None:
    """A matrix mechanism's candidate: the bracket only for C = c·I with b | n, within its range."""
    if method in (Method.BRACKET_UPPER, Method.BRACKET_LOWER):
        strategy, b = config.strategy, config.steps
        if not (strategy.is_identity() and strategy.iterations % b == 0):
            return None
        k = strategy.iterations // b  # G = (c² k / σ²) I: Balls-and-Bins of b steps at σ/(c √k)
        if bracket_limit(Sampler.BALLS_AND_BINS, config.sigma / (strategy.c_col[0] * math.sqrt(k)), b, 1):
            return None
    if method is Method.INDEPENDENT_LOWER_BOUND and not independent_bound_applies(config):
        return None
    if method is Method.AUTO:
        mc = [m for m in config.resolved if m.is_monte_carlo]
        return dataclasses.replace(config, methods=(mc[0],)) if mc else None
    return dataclasses.replace(config, methods=(method,))


def _candidate_config(config: CertifyConfig, method: Method) -> CertifyConfig | None:
    """The configuration a candidate runs on (None: it does not apply to this configuration)."""
    if config.strategy is not None:
        return _matrix_candidate(config, method)
    if method is Method.BRACKET_UPPER and bracket_limit(config.sampler, config.sigma, config.steps, config.epochs):
        return None  # outside the bracket's range
    if method is Method.AUTO:
        mc = [m for m in config.resolved if m.is_monte_carlo]
        return dataclasses.replace(config, methods=(mc[0],)) if mc else None
    if method is Method.EXACT and config.sampler is not Sampler.DETERMINISTIC:
        if config.truncated:
            return None
        return dataclasses.replace(config, sampler=Sampler.DETERMINISTIC, methods=(Method.EXACT,),
                                   orders=None, dataset_size=None, batch_size=None, max_batch_size=None)
    return dataclasses.replace(config, methods=(method,), orders=None)


def _relabel(rows: list[dict], config: CertifyConfig, dominated: bool) -> list[dict]:
    if not dominated:
        return rows
    return [dict(r, sampler=config.sampler.value, guarantee="upper_bound", bound=DOMINATION_BOUND) for r in rows]


def _mc_note(config: CertifyConfig, method: Method, delta: float, floor: float, ran: bool,
             wall: float | None = None) -> tuple[str, int | None, float | None]:
    """Why Monte Carlo gives no finite ε(δ), and what would: (note, samples needed, seconds needed)."""
    directions = len(config.direction.parts())
    if config.strategy is not None:  # value estimators with ranges B(ε) < 1: no [0, 1] sample floor applies
        return (f"Monte Carlo ({method.value}, {config.samples} samples per direction, β={config.error_prob:g}) "
                f"certified no finite ε at δ={delta:g} on its grid: more samples, or a larger δ, may; "
                f"'epscert certify --target-rel-width' shows how its bounds narrow with samples."), None, None
    need = samples_needed(delta, config.error_prob, directions)
    what = f"Monte Carlo ({method.value}, {config.samples} samples per direction, β={config.error_prob:g})"
    if not ran:
        kind = ("s·(1 - β'^(1/m)), s the importance scale of the coarse ε grid's event" if method.uses_importance
                else "1 - β'^(1/m)")
        head = (f"{what} was not run: its upper confidence bound cannot fall below {floor:.3g} > δ={delta:g} "
                f"(the KL floor {kind})")
    else:
        head = f"{what} certified no ε at δ={delta:g}"
    if need * directions * config.steps * config.epochs > MAX_TOTAL_COORDINATES:
        return (f"{head}; a finite answer needs at least {count_text(need)} samples per direction, beyond any "
                f"feasible run (the limit MAX_TOTAL_COORDINATES is {MAX_TOTAL_COORDINATES:.0e} sampled "
                f"coordinates).", need, None)
    seconds = None
    if wall is not None and wall > 0:
        seconds = wall * need / config.samples
    else:
        seconds = estimated_seconds(dataclasses.replace(config, samples=need), method)
    return (f"{head}; a finite answer needs at least m >= log(1/β')/δ ≈ {count_text(need)} samples per direction"
            f"{' (importance sampling: about s times that)' if method.uses_importance else ''}, about "
            f"{format_seconds(seconds)} of one core.", need, seconds)


def _limit_note(config: CertifyConfig, method: Method, target: float, quantity: str) -> str | None:
    """Why an analytic candidate gave nothing (a range limit or a resolution), naming the limit."""
    if config.strategy is not None:  # a matrix mechanism: its bracket applies to C = c·I with b | n only
        if method is not Method.BRACKET_UPPER:
            return None
        strategy, b = config.strategy, config.steps
        if not (strategy.is_identity() and strategy.iterations % b == 0):
            return None  # not the reason to mention: the bracket is not this mechanism's pair
        sigma_eff = config.sigma / (strategy.c_col[0] * math.sqrt(strategy.iterations // b))
        reason = bracket_limit(Sampler.BALLS_AND_BINS, sigma_eff, b, 1)
        return f"the PLD bracket (C = c·I: Balls-and-Bins at σ/(c√(n/b)) = {sigma_eff:.4g}) does not apply: {reason}" \
            if reason else None
    if method is Method.BRACKET_UPPER:
        reason = bracket_limit(config.sampler, config.sigma, config.steps, config.epochs)
        if reason:
            return f"the PLD bracket does not apply: {reason}"
        if quantity == "epsilon":
            reduced = config.reduced()
            res = bracket_for(reduced.sigma, reduced.steps, reduced.epochs).resolution
            if target < res:
                return (f"the PLD bracket certifies no δ below its resolution {res:.3g} (the mass past its cap, "
                        f"DEFAULT_CAP_BUDGET), got δ={target:g}")
            return (f"the PLD bracket certifies no ε <= {BRACKET_MAX_EPSILON:g} at δ={target:g} "
                    f"(its search range, MAX_EPSILON)")
    if method is Method.EXACT and quantity == "epsilon":
        return f"deterministic batches (exact) need ε > {SEARCH_MAX_EPSILON:g} at δ={target:g} (the ε search range)"
    return None


def best_certificates(config: CertifyConfig, deltas: Sequence[float],
                      progress: Callback | None = None) -> list[Certificate]:
    """:func:`best_certificate` at each δ of ``deltas``, with the sampling passes they have in common run once
    (:func:`epscert.inverse.epsilon_at_delta.sampled`): each certificate is the one a call for its δ alone
    gives with the same seed (the same passes, drawn from the same streams), at level β each; the
    coarse Monte Carlo search, the same for every δ, is drawn once."""
    deltas = check_deltas(list(deltas))
    passes: dict = {}
    return [best_certificate(config, delta=d, progress=progress, passes=passes) for d in deltas]


def best_certificate(config: CertifyConfig, *, delta: float | None = None, epsilon: float | None = None,
                     progress: Callback | None = None, passes: dict | None = None) -> Certificate:
    """The smallest certified upper bound on ε(``delta``) or δ(``epsilon``) over the candidates.

    Exactly one of ``delta`` and ``epsilon``. ``config`` gives the sampler, (σ, T, E), the Monte
    Carlo method, samples, β, seed, direction and truncation; its ε grid and methods are ignored
    except for the Monte Carlo method ``auto`` resolves to. Taking the minimum is valid: each
    candidate is an upper bound (Monte Carlo at level β, the others always), so the minimum is
    one too, at level β. Monte Carlo runs only when no candidate before it answered, and only when
    it can reach the target (module docstring). ``progress`` receives the Monte Carlo sampling's updates.
    ``passes``: a memo of Monte Carlo passes shared with other calls for the same run (:func:`best_certificates`).
    """
    if (delta is None) == (epsilon is None):
        raise ValueError(f"give exactly one of delta and epsilon, got delta={delta!r}, epsilon={epsilon!r}")
    if delta is not None:
        target = check_deltas([delta])[0]
    else:
        target = check_float("epsilon", epsilon, low=0.0, low_open=False, high=MAX_EPSILON, high_open=False)
    quantity = "epsilon" if delta is not None else "delta"
    direction = config.direction.value
    best: dict | None = None
    rows: list[dict] = []
    notes: list[str] = []
    need = seconds = None
    for method in candidate_methods(config):
        if quantity == "epsilon" and method not in EPSILON_METHODS:
            continue
        cfg = _candidate_config(config, method)
        if cfg is None:
            note = _limit_note(config, method, target, quantity)
            if note:
                notes.append(note)
            continue
        run_method = cfg.resolved[0]
        if run_method.is_monte_carlo and best is not None and not (
                config.strategy is not None and best["row"]["method"] == Method.COMONOTONE_UPPER_BOUND.value):
            continue  # an analytic candidate answered: no sampling run (a matrix mechanism's comonotone
            # bound is loose, so its Monte Carlo still runs, and the smaller certificate is kept)
        dominated = cfg.sampler is not config.sampler
        if quantity == "epsilon" and run_method.is_monte_carlo and cfg.strategy is None:
            # (a matrix mechanism's value estimators have ranges B(ε) < 1: the [0, 1] floor does not apply)
            floor = mc_epsilon_floor(cfg, run_method)
            if target < floor:
                note, need, seconds = _mc_note(cfg, run_method, target, floor, ran=False)
                notes.append(note)
                continue
        start = time.perf_counter()
        if quantity == "epsilon":
            if run_method.is_monte_carlo:
                new = mc_epsilon_rows(cfg, run_method, [target], progress=progress, passes=passes)
            else:
                new = analytic_epsilon_rows(cfg, run_method, [target])
            column = "epsilon_upper"
        else:
            one = dataclasses.replace(cfg, epsilons=(target,))
            meter = ProgressMeter(progress, len(one.direction.parts()) * one.samples, "sampling")
            new = (certify_config(one, meter.add).to_pylist() if run_method.is_monte_carlo
                   else analytic_rows(one, run_method))
            column = "delta_upper"
        wall = time.perf_counter() - start
        new = _relabel(new, config, dominated)
        rows.extend(new)
        mine = [r for r in new if r["direction"] in (direction, "both") and r[column] is not None]
        value = max((r[column] for r in mine), default=math.inf)
        if not math.isfinite(value):
            if run_method.is_monte_carlo and quantity == "epsilon":
                note, need, seconds = _mc_note(cfg, run_method, target, 0.0, ran=True, wall=wall)
                notes.append(note)
            elif not run_method.is_monte_carlo:
                note = _limit_note(config, method, target, quantity)
                if note:
                    notes.append(note)
        if mine and math.isfinite(value) and (best is None or value < best["value"]):
            row = max(mine, key=lambda r: r[column])
            best = {"value": value, "row": row}
    rows.extend(matrix_lower_rows(config, quantity, target))
    lower, lower_method, estimate = lower_and_estimate(rows, quantity, direction)
    name = certificate_name(config)
    if best is None:
        if not any(_candidate_config(config, m) for m in candidate_methods(config)):
            notes.append(f"no method certifies an upper bound for sampler={config.sampler.value!r} with these "
                         "settings (truncated batches have no deterministic domination)")
        return Certificate(quantity, target, name, math.inf, None, None, None, None,
                           tuple(notes), tuple(rows), need, seconds, lower, lower_method, estimate)
    row = best["row"]
    beta = row["error_prob"] if row["method"] in {m.value for m in Method if m.is_monte_carlo} else None
    if config.sampler is Sampler.POISSON and config.strategy is None and row["method"] == Method.PLD_UPPER.value:
        # the bracket's own lower side (cached with its upper side): the two-sided answer, and a note
        # naming the limit where the bracket is not within LOOSE_WIDTH (issue 35 item 4)
        pld = (float(config.sigma), int(config.steps), int(config.epochs), float(config.pld_discretization),
               config.direction, float(target))
        if quantity == "epsilon":
            up, _, low = epsilon_pair(*pld)
        else:
            up, low = (v.delta for v in delta_pair(*pld))
        if low > lower:
            lower, lower_method = low, Method.PLD_LOWER.value
        loose = looseness_note(config.sigma, config.steps, config.epochs, config.pld_discretization,
                               up, low, quantity, target, up)
        if loose:
            notes.append(loose)
    return Certificate(quantity, target, name, best["value"], row["method"], row["bound"],
                       row["guarantee"], beta, tuple(notes), tuple(rows), need, seconds, lower, lower_method,
                       estimate)


def with_other_side(config: CertifyConfig, cert: Certificate) -> Certificate:
    """``cert`` with the other side of its winning candidate's bracket: ``bracket_lower`` for
    ``bracket_upper``, ``pld_lower`` for ``pld_upper`` (:data:`OTHER_SIDE`), its rows added and its
    ``lower`` raised to that certified lower bound when larger. For the two-sided answers of
    :class:`epscert.Accountant`; ``best_certificate`` leaves it out (one chain fewer per question).
    A matrix mechanism's lower bounds are already there (:data:`MATRIX_LOWER`); a mid-run certificate
    (``steps_done`` short of the run) and a candidate without another side are returned as they are."""
    total = config.steps * config.epochs
    if (config.strategy is not None or cert.method is None or not cert.finite
            or cert.steps_done not in (None, total)):
        return cert
    other = OTHER_SIDE.get(Method(cert.method))
    cfg = None if other is None else _candidate_config(config, other)
    if cfg is None:
        return cert
    if cert.quantity == "epsilon":
        new = analytic_epsilon_rows(cfg, other, [cert.target])
    else:
        new = analytic_rows(dataclasses.replace(cfg, epsilons=(cert.target,)), other)
    rows = cert.rows + tuple(new)
    lower, lower_method, _ = lower_and_estimate(rows, cert.quantity, config.direction.value)
    if lower <= cert.lower:
        return dataclasses.replace(cert, rows=rows)
    return dataclasses.replace(cert, rows=rows, lower=lower, lower_method=lower_method)


#: The unbiased estimator of each order-statistic one: the same sampler without the raised values.
UNBIASED_COUNTERPART = {Method.ORDER_STATS: Method.NAIVE, Method.IMPORTANCE_ORDER_STATS: Method.IMPORTANCE,
                        Method.CONDITIONAL_ORDER_STATS: Method.CONDITIONAL}


def with_unbiased_side(config: CertifyConfig, cert: Certificate, progress: Callback | None = None) -> Certificate:
    """``cert`` with an estimate and a Monte Carlo lower side from an unbiased estimator, when its value came
    from an order-statistic method (DP-SGD, δ(ε) of the whole run only; otherwise returned as it is).

    An order-statistic method's mean is an upper bound's mean and its values have no lower confidence bound
    (:func:`lower_and_estimate`), so the two-sided answer runs the same sampler without the raised values
    (:data:`UNBIASED_COUNTERPART`, same samples and β, seed + 1 so its statement is independent of the
    upper side's): its mean is the estimate and its KL lower confidence bound (at β) the lower side, when
    larger than the one already there. The upper bound is unchanged. For :class:`epscert.Accountant`'s
    intervals; ``get_delta`` alone does not pay for it.
    """
    total = config.steps * config.epochs
    if (config.strategy is not None or cert.quantity != "delta" or cert.method is None or not cert.finite
            or cert.steps_done not in (None, total) or cert.estimate is not None):
        return cert
    other = UNBIASED_COUNTERPART.get(Method(cert.method))
    if other is None:
        return cert
    cfg = dataclasses.replace(config, methods=(other,), orders=None, epsilons=(cert.target,),
                              seed=(config.seed + 1) % 2**128)
    meter = ProgressMeter(progress, len(cfg.direction.parts()) * cfg.samples, f"sampling ({other.value}: estimate)")
    rows = cert.rows + tuple(certify_config(cfg, meter.add).to_pylist())
    lower, lower_method, estimate = lower_and_estimate(rows, cert.quantity, config.direction.value)
    if lower <= cert.lower:
        lower, lower_method = cert.lower, cert.lower_method
    return dataclasses.replace(cert, rows=rows, lower=lower, lower_method=lower_method, estimate=estimate)


def matrix_lower_rows(config: CertifyConfig, quantity: str, target: float) -> list[dict]:
    """Rows of a matrix mechanism's deterministic lower bounds (:data:`MATRIX_LOWER`) at ``target``, for the
    two-sided answer; none for other configurations. They hold surely, so they cost no β."""
    rows: list[dict] = []
    if config.strategy is None:
        return rows
    for method in MATRIX_LOWER:
        cfg = _candidate_config(config, method)
        if cfg is not None:
            rows.extend(analytic_epsilon_rows(cfg, method, [target]) if quantity == "epsilon"
                        else analytic_rows(dataclasses.replace(cfg, epsilons=(target,)), method))
    return rows


def certificate_name(config: CertifyConfig) -> str:
    """What a certificate is about: the sampler, or 'bandmf' with the strategy for a matrix mechanism."""
    if config.strategy is None:
        return config.sampler.value
    return f"bandmf {config.strategy.describe()} (iterations={config.strategy.iterations}, cycle_length={config.steps})"
