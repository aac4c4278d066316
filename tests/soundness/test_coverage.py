"""Coverage of the Monte Carlo upper confidence bounds against independently known δ(ε).

For each estimator, direction and point, ``REPS`` independent runs of the public API (``epscert.certify``,
seed = repetition index, a small sample count; ``FAST_REPS`` of them, in one direction per case, in the fast
suite) are compared with the truth:

* misses: how often the table's ``delta_upper`` (UCB at the row's error_prob β) is below the
  truth. A valid bound misses with probability <= β, so the count is Binomial(REPS, <= β);
  the test fails only above binom.ppf(1 - α, REPS, β).
* z-scores z = (delta - target) / std_error of the MC mean must look standard: mean within a
  t-interval plus an Edgeworth allowance, sd within a χ² interval (see ``criteria.py``).
Each case makes 3 checks per ε at α = 1e-4 / (3 n_eps) each, so a correct implementation fails
a case with probability <= 1e-4 over the choice of seeds (Bonferroni); the 19 cases of the fast
suite together <= 1.9e-3, the 37 at REPS (slow set) <= 3.7e-3. Cases with a partial set of ranks
(pessimistic bound, target unknown) get the miss test and the one-sided z check only.

Truths: T = 1 is the Gaussian (σ/√E for E epochs); T ∈ {2, 3}, one epoch, from
``tests/reference/quadrature.py``; T = 2, two epochs, from ``truth.py`` (independent quadrature).
"target" is the exact expectation of the estimator: the truth itself (with ranks 1..T-1 the
order-statistic bound is exact in both directions: ADD also draws rank T). Misses are counted
against both truth and target.

With β = 0.1 the KL-Chernoff bound is conservative here (observed miss rates are below 1%),
so the miss test catches gross failures (bounds below the truth), the z-tests catch bias.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import pytest

import epscert
from tests.reference.quadrature import bnb_delta_quadrature

from . import report
from .criteria import FALSE_FAILURE, allowed_misses, z_mean_bounds, z_sd_bounds
from .truth import bnb2_delta, gaussian_delta

BETA = 0.1
REPS = 2000
SAMPLES = 1000


@dataclass(frozen=True)
class Case:
    label: str
    method: str
    steps: int
    epochs: int
    sigma: float
    epsilons: tuple[float, ...]
    direction: str
    sampler: str = "balls_and_bins"
    partial_orders: str | None = None  # ranks other than all of 1..T-1: the bound is pessimistic

    @property
    def orders(self) -> str | None:
        """All ranks 1..T-1 (the order-statistic bound is then exact for REMOVE) unless partial."""
        if "order_stats" not in self.method:
            return None
        return self.partial_orders or f"1,{self.steps},1"

    @property
    def target_kind(self) -> str:
        if self.partial_orders is not None:
            return "upper"
        return "exact"  # ADD draws rank T too: ranks 1..T-1 make the bound exact in both directions

    def point(self, eps: float) -> str:
        return f"{self.sampler} σ={self.sigma:g} T={self.steps} E={self.epochs} ε={eps:g}"

    def with_direction(self, direction: str) -> Case:
        return dataclasses.replace(self, direction=direction)

    def __str__(self) -> str:
        return f"{self.label}-{self.direction}-T{self.steps}-E{self.epochs}-s{self.sigma:g}"


@functools.lru_cache(maxsize=None)
def truth(sampler: str, sigma: float, steps: int, epochs: int, eps: float, direction: str) -> float:
    """The true δ(ε) of one direction, from closed forms or quadrature (never from epscert)."""
    if sampler in ("deterministic", "poisson") and steps == 1:  # Poisson with q = 1 is the Gaussian too
        return gaussian_delta(sigma / math.sqrt(epochs), eps)
    assert sampler == "balls_and_bins"
    if steps == 1:  # one bin: the Gaussian, E epochs compose to σ/√E
        return gaussian_delta(sigma / math.sqrt(epochs), eps)
    if epochs == 1:
        value, err = bnb_delta_quadrature(sigma, steps, eps, direction)
        assert err <= 1e-8
        return value
    value, err = bnb2_delta(sigma, epochs, eps, direction)
    assert err <= 1e-9
    return value


def target(case: Case, eps: float) -> float | None:
    """E[delta column] of the estimator (None when unknown: a partial set of ranks)."""
    if case.target_kind == "exact":
        return truth(case.sampler, case.sigma, case.steps, case.epochs, eps, case.direction)
    return None


def run_reps(case: Case, reps: int, samples: int, beta: float, direction: str | None = None) -> dict:
    """(reps, n_eps) arrays of delta, delta_upper and std_error from ``epscert.certify``."""
    direction = case.direction if direction is None else direction
    n_eps = len(case.epsilons)
    out = {k: np.empty((reps, n_eps)) for k in ("delta", "delta_upper", "std_error")}
    for rep in range(reps):
        table = epscert.certify(
            sampler=case.sampler, sigma=case.sigma, steps=case.steps, epochs=case.epochs,
            epsilons=list(case.epsilons), method=case.method, samples=samples, error_prob=beta,
            seed=rep, direction=direction, orders=case.orders,
        )
        rows = [r for r in table.to_pylist() if r["direction"] == direction]
        assert [r["epsilon"] for r in rows] == list(case.epsilons)
        assert all(r["error_prob"] == beta and r["samples"] == samples for r in rows), rows[0]
        for key, arr in out.items():
            arr[rep] = [r[key] for r in rows]
    return out


def check_case(case: Case, reps: int = REPS, samples: int = SAMPLES, beta: float = BETA) -> None:
    """Misses, mean z and sd z for every ε of the case; the case fails with probability <= 1e-4.

    Bonferroni: 3 checks per ε (misses against the target, which are >= misses against the
    truth; mean z; sd z), each at FALSE_FAILURE / (3 n_eps).
    """
    runs = run_reps(case, reps, samples, beta)
    alpha = FALSE_FAILURE / (3 * len(case.epsilons))
    allowed = allowed_misses(reps, beta, alpha)
    failures = []
    for j, eps in enumerate(case.epsilons):
        true = truth(case.sampler, case.sigma, case.steps, case.epochs, eps, case.direction)
        tgt = target(case, eps)
        ucb, mean, se = runs["delta_upper"][:, j], runs["delta"][:, j], runs["std_error"][:, j]
        misses = int(np.sum(ucb < true))
        misses_tgt = int(np.sum(ucb < tgt)) if tgt is not None else misses
        assert np.all(se > 0), f"{case} ε={eps}: zero standard error (point too extreme for a z-test)"
        z = (mean - (true if tgt is None else tgt)) / se
        lo_m, hi_m = z_mean_bounds(z, samples, alpha)
        lo_s, hi_s = z_sd_bounds(z, alpha)
        zmean, zsd = float(np.mean(z)), float(np.std(z, ddof=1))
        report.add(
            estimator=case.label, direction=case.direction, point=case.point(eps),
            target=f"{'truth' if case.target_kind == 'exact' else case.target_kind} "
                   f"{true if tgt is None else tgt:.5f}",
            **{"misses/N": f"{misses}/{reps}" + ("" if misses_tgt == misses else f" ({misses_tgt} vs target)"),
               "allowed": allowed, "max|z|": f"{np.max(np.abs(z)):.2f}", "mean z": f"{zmean:+.3f}",
               "sd z": f"{zsd:.3f}",
               "mean z bounds": f"[{lo_m:+.3f}, {hi_m:+.3f}]" if tgt is not None else f">= {lo_m:+.3f}",
               "sd z bounds": f"[{lo_s:.3f}, {hi_s:.3f}]" if tgt is not None else "-"},
        )
        if max(misses, misses_tgt) > allowed:
            failures.append(f"ε={eps}: UCB below truth {misses}/{reps} (below target {misses_tgt}), "
                            f"allowed {allowed} at false-failure {alpha:.1e}")
        if tgt is not None:
            if not lo_m <= zmean <= hi_m:
                failures.append(f"ε={eps}: mean z {zmean:+.4f} outside [{lo_m:+.4f}, {hi_m:+.4f}] "
                                f"(truth {true:.6f}, target {tgt:.6f}, mean of means {mean.mean():.6f})")
            if not lo_s <= zsd <= hi_s:
                failures.append(f"ε={eps}: sd z {zsd:.4f} outside [{lo_s:.4f}, {hi_s:.4f}]")
        elif zmean < lo_m:  # a pessimistic estimator may sit above the truth, never below it
            failures.append(f"ε={eps}: pessimistic estimator below truth: mean z {zmean:+.4f} < {lo_m:+.4f}")
    assert not failures, f"{case}: " + "; ".join(failures)


def _cases(reps_label: str = "") -> list[Case]:
    one = {1: (1.0, (0.25, 0.75)), 2: (1.0, (0.0, 0.5)), 3: (0.8, (0.5, 1.0))}
    cases = []
    for direction in ("remove", "add"):
        for method in ("naive", "importance", "order_stats", "importance_order_stats"):
            for steps, (sigma, epss) in one.items():
                if "order_stats" in method and steps == 1:
                    continue  # order statistics need T >= 2
                cases.append(Case(method, method, steps, 1, sigma, epss, direction))
        cases += [
            Case("multi-epoch naive", "naive", 1, 3, 1.5, (0.5, 1.0), direction),
            Case("multi-epoch naive", "naive", 2, 2, 1.0, (0.5, 1.0), direction),
            Case("multi-epoch order_stats", "order_stats", 2, 2, 1.0, (0.5, 1.0), direction),
            Case("deterministic naive", "naive", 1, 2, 1.2, (0.25, 0.75), direction, "deterministic"),
            Case("deterministic importance", "importance", 1, 1, 0.8, (0.5, 1.0), direction, "deterministic"),
            Case("poisson naive (q=1)", "naive", 1, 2, 1.2, (0.25, 0.75), direction, "poisson"),
            Case("order_stats ranks {1}", "order_stats", 3, 1, 0.8, (0.5, 1.0), direction, partial_orders="1,2,1"),
            Case("importance_order_stats ranks {1}", "importance_order_stats", 3, 1, 0.8, (0.5, 1.0), direction,
                 partial_orders="1,2,1"),
        ]
    return cases


CASES = _cases()
#: ADD cases of the fast suite: every estimator once (its T = 2 or 3 point), the multi-epoch and Poisson ones. Each
#: case of the grid runs in the fast suite in one direction: ADD where listed here, REMOVE elsewhere; the other
#: direction runs with the slow set.
FAST_ADD = ("naive-add-T2-E1", "importance-add-T2-E1", "order_stats-add-T3-E1", "importance_order_stats-add-T3-E1",
            "multi-epoch naive-add-T2-E2", "multi-epoch order_stats-add-T2-E2", "poisson naive (q=1)-add-T1-E2",
            "importance_order_stats ranks {1}-add-T3-E1")


#: Repetitions of a case in the fast suite (seeds 0..FAST_REPS-1, the first of the slow set's REPS): the same
#: criteria at their own sample size (the z-tests' bounds widen by about √2)
FAST_REPS = 1000


def _params():
    """Every case at REPS with the slow set; the fast suite's direction of each (FAST_ADD) at FAST_REPS too."""
    for case in CASES:
        add_fast = any(str(case.with_direction("add")).startswith(prefix + "-") for prefix in FAST_ADD)
        if add_fast == (case.direction == "add"):
            yield pytest.param(case, FAST_REPS, id=f"{case}-reps{FAST_REPS}")
        yield pytest.param(case, REPS, id=str(case), marks=pytest.mark.slow)


@pytest.mark.parametrize("case, reps", list(_params()))
def test_ucb_coverage_and_z_scores(case: Case, reps: int) -> None:
    # Fixed seeds 0..reps-1; false-failure probability <= 1e-4 per case (criteria.py, Bonferroni).
    check_case(case, reps=reps)


def test_both_directions_row_covers_the_max() -> None:
    """direction='both': per-direction rows at β/2, and the 'both' UCB covers max(δ_remove, δ_add).

    Misses of the 'both' row are Binomial(REPS, <= β) by the union bound; false failure <= 1e-4
    (Bonferroni over the two ε).
    """
    case = Case("naive both", "naive", 2, 1, 1.0, (0.0, 0.5), "both")
    allowed = allowed_misses(REPS, BETA, FALSE_FAILURE / len(case.epsilons))
    both = run_reps(case, REPS, SAMPLES, BETA, direction="both")
    true = [max(truth("balls_and_bins", 1.0, 2, 1, e, d) for d in ("remove", "add")) for e in case.epsilons]
    misses = (both["delta_upper"] < np.asarray(true)).sum(axis=0)
    for j, eps in enumerate(case.epsilons):
        report.add(estimator="naive (both row)", direction="both", point=case.point(eps),
                   target=f"max {true[j]:.5f}", **{"misses/N": f"{misses[j]}/{REPS}", "allowed": allowed})
    assert np.all(misses <= allowed), (misses, allowed)
    table = epscert.certify(sigma=1.0, steps=2, epsilons=[0.5], method="naive", samples=10, error_prob=BETA)
    probs = {r["direction"]: r["error_prob"] for r in table.to_pylist()}
    assert probs == {"remove": BETA / 2, "add": BETA / 2, "both": BETA}


def _slow_cases() -> list[Case]:
    cases = []
    for direction in ("remove", "add"):
        for method in ("naive", "importance", "order_stats", "importance_order_stats"):
            for steps, sigma, epss in ((2, 0.6, (0.5, 1.5)), (2, 2.0, (0.0, 0.2)), (3, 1.5, (0.0, 0.3))):
                cases.append(Case(method, method, steps, 1, sigma, epss, direction))
        cases += [
            Case("multi-epoch naive", "naive", 1, 5, 2.0, (0.25, 0.75), direction),
            Case("multi-epoch naive", "naive", 2, 2, 0.7, (1.0, 2.0), direction),
            Case("multi-epoch order_stats", "order_stats", 2, 2, 0.7, (1.0, 2.0), direction),
            Case("multi-epoch order_stats", "order_stats", 2, 2, 2.0, (0.0, 0.3), direction),
        ]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("case", _slow_cases(), ids=str)
def test_ucb_coverage_and_z_scores_more_points(case: Case) -> None:
    # More points and 3x the repetitions; false-failure probability <= 1e-4 per case.
    check_case(case, reps=3 * REPS)
