"""The side-by-side comparison users ask for, for one (σ, T, E): every accountant in one table.

For each ε: δ_D (exact), δ_P (the PLD bracket's upper and lower sides, RDP), δ_P again as the
Fourier accountant's certified bracket (the homogeneous schedule of T·E Poisson-subsampled
Gaussian steps), the shuffle and Balls-and-Bins lower bounds, the deterministic Balls-and-Bins
PLD bracket (:mod:`epscert.allocation`, where σ, T, E are in its range), and the Balls-and-Bins
Monte Carlo mean and UCB, with a check of where the Monte Carlo mean lies against the bracket: inside,
within k standard errors of it, or outside (more than 4; the two methods share no code, so each checks
the other). For each δ: the same as ε(δ). The hidden-state bound needs loss
assumptions (convexity, smoothness) that (σ, T, E) alone do not give, so it is not included.

The comparison is of fresh Balls-and-Bins (``sampler='balls_and_bins'``) against the others;
:func:`compare_rows` refuses any other sampler rather than relabel it. The persistent variant
``balls_and_bins_persistent`` at (σ, T, E) is exactly fresh Balls-and-Bins at (σ/√E, T, 1), so its
comparison is ``compare`` with ``--sigma`` σ/√E and ``--epochs 1``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from epscert.results.tables import certify_config
from epscert.results.baselines import baseline_tasks
from epscert.inverse.epsilon_at_delta import DEFAULT_COARSE_GRID, epsilon_report
from epscert.fft.choose import choose_grid
from epscert.fft.compose import fft_bounds
from epscert.fft.mechanisms import Schedule, SubsampledGaussian
from epscert.fft.report import to_rows as fft_rows
from epscert.results.rows import analytic_rows
from epscert.config import (
    BRACKET_MAX_EPOCHS, BRACKET_MAX_STEPS, BRACKET_METHODS, BRACKET_MIN_SIGMA, CertifyConfig, Method, Sampler,
)
from epscert.progress import Callback, ProgressMeter
from epscert.schema import to_table

#: Target width and largest grid of the Fourier bracket in a comparison.
FFT_TARGET_ERROR = 1e-6
FFT_MAX_SIZE = 2**20
COARSE_POINTS = frozenset(DEFAULT_COARSE_GRID)


def compare_rows(config: CertifyConfig, deltas: Sequence[float] = (), fft: bool = True,
                 progress: Callback | None = None) -> list[dict]:
    """All rows of the comparison: δ at ``config.epsilons`` and ε at ``deltas``.

    ``progress`` receives :class:`epscert.progress.ProgressUpdate` s of the Monte Carlo passes.
    """
    if config.sampler is not Sampler.BALLS_AND_BINS:
        raise ValueError(f"sampler must be 'balls_and_bins' for a comparison (a persistent run at (σ, T, E) "
                         f"is compared as balls_and_bins at (σ/√E, T, 1)), got sampler={config.sampler.value!r}")
    rows: list[dict] = []
    mc = dataclasses.replace(config, sampler=Sampler.BALLS_AND_BINS,
                             methods=tuple(m for m in config.methods if Method(m).is_monte_carlo) or (Method.AUTO,))
    per_pass = len(mc.direction.parts()) * mc.samples * sum(m.is_monte_carlo for m in mc.resolved)
    rows.extend(certify_config(mc, ProgressMeter(progress, per_pass, "sampling (δ(ε) grid)").add).to_pylist())
    for base, method in baseline_tasks(config) + [(dataclasses.replace(
            config, sampler=Sampler.POISSON, methods=(Method.RDP_UPPER,), orders=None), Method.RDP_UPPER)]:
        rows.extend(analytic_rows(base, method))
    bracket = bracket_config(config)
    if bracket is not None:
        for method in BRACKET_METHODS:
            rows.extend(analytic_rows(bracket, method))
    if fft and not config.truncated:
        schedule = Schedule.of([(SubsampledGaussian(q=1.0 / config.steps, sigma=config.sigma),
                                 config.steps * config.epochs)])
        choice = choose_grid(schedule, config.epsilons, FFT_TARGET_ERROR, config.direction, FFT_MAX_SIZE)
        rows.extend(fft_rows(fft_bounds(schedule, config.epsilons, choice.grid, config.direction)))
    if deltas:
        rows.extend(epsilon_report(mc, deltas, baselines=True, progress=progress))
        if bracket is not None:
            rows.extend(epsilon_report(bracket, deltas, baselines=False))
    return to_table(rows).to_pylist()


def bracket_config(config: CertifyConfig) -> CertifyConfig | None:
    """The Balls-and-Bins PLD bracket's configuration, or None outside its range of σ, T, E."""
    if not (config.sigma >= BRACKET_MIN_SIGMA and config.steps <= BRACKET_MAX_STEPS
            and config.epochs <= BRACKET_MAX_EPOCHS):
        return None
    return dataclasses.replace(config, sampler=Sampler.BALLS_AND_BINS,
                               methods=BRACKET_METHODS, orders=None)


#: Column order of the printed comparison: (label, sampler, method, value column).
COMPARE_COLUMNS = (
    ("δ_D exact", "deterministic", "exact", "delta_upper"),  # the bracket's upper side: a table rounds it up
    ("δ_P PLD upper", "poisson", "pld_upper", "delta_upper"),
    ("δ_P PLD lower", "poisson", "pld_lower", "delta_lower"),
    ("δ_P RDP", "poisson", "rdp_upper", "delta_upper"),
    ("δ_P FFT upper", "heterogeneous", "fft_upper", "delta_upper"),
    ("δ_P FFT lower", "heterogeneous", "fft_lower", "delta_lower"),
    ("δ_S lower", "shuffle", "cube_lower_bound", "delta_lower"),
    ("δ_B lower", "balls_and_bins", "cube_lower_bound", "delta_lower"),
    ("δ_B PLD lower", "balls_and_bins", "bracket_lower", "delta_lower"),
    ("δ_B PLD upper", "balls_and_bins", "bracket_upper", "delta_upper"),
    ("δ_B MC mean", "balls_and_bins", "*mc", "delta"),
    ("δ_B UCB", "balls_and_bins", "*mc", "delta_upper"),
)


#: Standard errors of slack allowed between the Monte Carlo mean and the bracket.
BRACKET_CHECK_SE = 4.0


def mean_in_bracket(rows: list[dict], direction: str, epsilon: float) -> str:
    """Where the Monte Carlo mean at ε lies against the PLD bracket [lower, upper]: one of

    - ``inside``: lower <= mean <= upper;
    - ``within k SE``: outside the bracket by k <= 4 standard errors (``below``/``above`` says which side);
    - ``OUTSIDE (k SE below|above)``: more than 4 standard errors away;
    - ``-``: a value is missing;
    - ``upper-bound mean >= lower``: an order-statistic method, whose mean is an upper bound's mean (biased
      upward, ``Method.mean_is_unbiased`` False): only its lower side is checked (below the bracket's
      lower end by more than 4 SE is still ``OUTSIDE``).

    An independent check, not a certificate: with a correct bracket and estimator a mean more than 4 SE
    away has probability about 6e-5 per ε (a 4σ normal deviation), and a mean just outside the bracket
    within a few SE is the ordinary scatter of an estimate. The standard error used is the larger of the
    row's ``std_error`` (the sample one, s·sd/√m, :mod:`epscert.results.rows`) and sqrt(upper·s/m): a mean
    of m values in [0, s] with mean μ <= upper has variance <= μ·s/m, so a run that saw no sample past the
    threshold (mean 0, sample SE 0) is not called a contradiction when the bracket says hits were unlikely.
    The text says which one it used (``SE = the row's std_error`` or ``SE = √(upper·s/m)``, then also the
    gap in the row's std_error), so that it can be checked against ``certify``'s ``std_error`` column.
    """
    pick = lambda method: next((r for r in rows if r["quantity"] == "delta_at_epsilon"  # noqa: E731
                                and r["sampler"] == "balls_and_bins" and r["direction"] == direction
                                and r["epsilon"] == epsilon and method(r["method"])), None)
    mc = pick(lambda m: Method(m).is_monte_carlo)
    lower = pick(lambda m: m == Method.BRACKET_LOWER.value)
    upper = pick(lambda m: m == Method.BRACKET_UPPER.value)
    if mc is None or lower is None or upper is None or mc["delta"] is None:
        return "-"
    lo, up, mean = lower["delta_lower"], upper["delta_upper"], mc["delta"]
    if not Method(mc["method"]).mean_is_unbiased:
        # an order-statistic mean is an upper bound's mean (biased upward): only "not below the lower side"
        # can be checked, and it is not called inside or outside the bracket
        if mean >= lo:
            return "upper-bound mean >= lower"
        up = max(up, lo)
    elif lo <= mean <= up:
        return "inside"
    sample_se = mc["std_error"] or 0.0
    bound_se = math.sqrt(up * mc["scale"] / mc["samples"]) if mc.get("samples") and mc.get("scale") else 0.0
    gap, side = (lo - mean, "below") if mean < lo else (mean - up, "above")
    if bound_se > sample_se:  # the text names the SE used, and gives the gap in the row's std_error too
        k, which = gap / bound_se, f"SE = √(upper·s/m); {_in_se(gap, sample_se)} in the row's std_error"
    else:
        k, which = (gap / sample_se if sample_se > 0 else math.inf), "SE = the row's std_error"
    if k <= BRACKET_CHECK_SE:
        return f"within {_in_se(gap, gap / k if k > 0 else 1.0)} SE {side} ({which})"
    return f"OUTSIDE ({_in_se(gap, gap / k if math.isfinite(k) else 0.0)} SE {side}; {which})"


def _in_se(gap: float, se: float) -> str:
    """gap / se rounded up to one decimal (never shown smaller than it is), 'inf' for se = 0."""
    k = gap / se if se > 0 else math.inf
    return f"{math.ceil(k * 10) / 10:g}" if math.isfinite(k) else "inf"


def mean_resolved(row: dict) -> bool:
    """Whether an ε(δ) row's Monte Carlo *mean* ε sits on the fine grid, not on a coarse-grid point.

    The fine grid (32 steps) exists only around a crossing of the UCB; a mean crossing outside it
    reads off the coarse grid (0.125 ... 64) and is a grid artefact, not a resolved value.
    """
    up = row["epsilon_upper"]
    if up is None or not math.isfinite(up):
        return False
    return row["epsilon"] not in COARSE_POINTS


def pivot(rows: list[dict], direction: str = "both") -> tuple[list[str], list[list]]:
    """(header, table) of δ per ε and, for ε(δ) rows, ε per δ, in COMPARE_COLUMNS order."""
    header = ["quantity"] + [c[0] for c in COMPARE_COLUMNS] + ["MC mean vs PLD bracket"]
    table = []
    keys = sorted({("delta_at_epsilon", r["epsilon"]) for r in rows if r["quantity"] == "delta_at_epsilon"}
                  | {("epsilon_at_delta", r["target_delta"]) for r in rows if r["quantity"] == "epsilon_at_delta"})
    for quantity, x in keys:
        line = [f"ε={x:g}" if quantity == "delta_at_epsilon" else f"δ={x:g}"]
        for _, sampler, method, column in COMPARE_COLUMNS:
            found = None
            for r in rows:
                if r["quantity"] != quantity or r["sampler"] != sampler or r["direction"] != direction:
                    continue
                mc = method == "*mc" and r["method"] in {m.value for m in Method if m.is_monte_carlo}
                if not (mc or r["method"] == method):
                    continue
                if (r["epsilon"] if quantity == "delta_at_epsilon" else r["target_delta"]) != x:
                    continue
                if quantity == "epsilon_at_delta":
                    col = {"delta": "epsilon", "delta_upper": "epsilon_upper", "delta_lower": "epsilon_lower"}[column]
                    found = r[col] if r[col] is not None else r["epsilon"]
                    if method == "*mc" and column == "delta" and not mean_resolved(r):
                        found = None
                else:
                    found = r[column] if r[column] is not None else r["delta"]
                break
            line.append(found)
        line.append(mean_in_bracket(rows, direction, x) if quantity == "delta_at_epsilon" else "-")
        table.append(line)
    return header, table
