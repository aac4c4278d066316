"""Mid-epoch brackets (issue 25, item 1) against independent values.

References, none of which shares code with epscert.allocation:
- r = 1 step of an epoch, any T: S' = 1 − 1/T + W/T, whose δ is the lognormal's partial
  expectations in closed form (below); T = 1: whole epochs, the Gaussian δ_D at σ/√k;
- T = 2, 3: tests/reference/prefix_gh.py (Gauss–Legendre, r = 1, 2 after 0 or 1 whole epochs);
- Monte Carlo means of the likelihood ratio Π S_e · S' (numpy, below), within 4 standard errors;
- the whole-epoch brackets of E' and E' + 1 epochs (the truth lies between them: a prefix of
  a run is a post-processing of it, and E' epochs are a prefix of it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from epscert.allocation import AllocationBracket, bracket_for
from epscert.allocation.prefix import combine_pairs, run_laws
from epscert.allocation.tails import cap_terms, log_cap
from epscert.analytic.deterministic import deterministic_delta
from tests.reference.prefix_gh import prefix_delta

DIRECTIONS = ("remove", "add")


def one_step(sigma: float, steps: int, eps: float, direction: str) -> float:
    """δ of S' = a + W/T, a = 1 − 1/T, from the lognormal's call/put prices (independent code)."""
    k, a, half = math.exp(eps), 1.0 - 1.0 / steps, 0.5 / sigma

    def call(x):  # E[(W − x)_+]
        if x <= 0:
            return 1.0 - x
        return float(ndtr(-(sigma * math.log(x) - half)) - x * ndtr(-(sigma * math.log(x) + half)))

    def put(x):  # E[(x − W)_+]
        if x <= 0:
            return 0.0
        return float(x * ndtr(sigma * math.log(x) + half) - ndtr(sigma * math.log(x) - half))

    if direction == "remove":  # E[(a + W/T − k)_+]
        return call(steps * (k - a)) / steps
    return k / steps * put(steps * (1.0 / k - a))  # E[(1 − k a − k W/T)_+]


@pytest.mark.parametrize("sigma,steps", [(1.0, 2), (0.7, 3), (2.0, 10), (0.5, 100), (1.0, 1000)])
def test_first_step_contains_the_closed_form(sigma, steps):
    b = AllocationBracket(sigma, steps, 1, steps_done=1)
    eps = [0.0, 0.05, 0.3, 1.0, 2.5]
    for d in DIRECTIONS:
        up, lo = b.delta(eps, d)
        for i, e in enumerate(eps):
            truth = one_step(sigma, steps, e, d)
            assert lo[i] <= truth <= up[i], (d, e, lo[i], truth, up[i])
            if truth > 1e-8:
                assert up[i] / lo[i] - 1 < 1e-3, (d, e, lo[i], up[i])


@pytest.mark.parametrize("sigma,epochs", [(0.8, 3), (2.0, 5)])
def test_t1_prefixes_are_whole_epochs_and_contain_the_gaussian(sigma, epochs):
    eps = np.array([0.0, 0.5, 1.5, 3.0])
    for k in range(1, epochs + 1):
        b = AllocationBracket(sigma, 1, epochs, steps_done=k)
        truth = deterministic_delta(sigma, k, eps)
        for d in DIRECTIONS:
            up, lo = b.delta(eps, d)
            assert np.all(lo <= truth) and np.all(truth <= up), (k, d, lo, truth, up)


@pytest.mark.parametrize("sigma,steps,full,r,eps", [
    (1.0, 3, 0, 2, 0.5), (0.7, 3, 0, 2, 1.0), (1.0, 2, 1, 1, 0.5), (0.7, 2, 1, 1, 1.0), (1.0, 3, 1, 1, 1.0),
    pytest.param(1.5, 3, 1, 1, 0.3, marks=pytest.mark.slow)])
def test_t2_t3_prefixes_contain_the_quadrature(sigma, steps, full, r, eps):
    b = AllocationBracket(sigma, steps, full + 1, steps_done=full * steps + r)
    for d in DIRECTIONS:
        ref, err = prefix_delta(sigma, steps, full, r, eps, d)
        up, lo = b.delta([eps], d)
        assert lo[0] <= ref + err and ref - err <= up[0], (d, lo[0], ref, err, up[0])
        assert up[0] / lo[0] - 1 < 1e-2


def _mc_delta(sigma, steps, full, r, eps, direction, n, seed):
    rng = np.random.default_rng(seed)
    w = lambda shape: np.exp(rng.standard_normal(shape) / sigma - 0.5 / sigma**2)  # noqa: E731
    ratio = np.ones(n)
    for _ in range(full):
        ratio *= w((n, steps)).mean(axis=1)
    ratio *= (1.0 - r / steps) + w((n, r)).sum(axis=1) / steps
    k = math.exp(eps)
    y = np.maximum(ratio - k, 0.0) if direction == "remove" else np.maximum(1.0 - k * ratio, 0.0)
    return y.mean(), y.std(ddof=1) / math.sqrt(n)


@pytest.mark.parametrize("sigma,steps,full,r,eps", [(1.0, 10, 1, 4, 0.5), (1.5, 64, 0, 37, 0.2),
                                                    pytest.param(0.8, 20, 2, 13, 1.0, marks=pytest.mark.slow)])
def test_monte_carlo_mean_inside_the_bracket(sigma, steps, full, r, eps):
    """4 standard errors: false-failure probability about 6e-5 per comparison (normal approximation)."""
    b = AllocationBracket(sigma, steps, full + 1, steps_done=full * steps + r)
    for seed, d in enumerate(DIRECTIONS):
        mean, se = _mc_delta(sigma, steps, full, r, eps, d, 200_000, seed)
        up, lo = b.delta([eps], d)
        assert lo[0] - 4 * se <= mean <= up[0] + 4 * se, (d, lo[0], mean, se, up[0])


@pytest.mark.parametrize("sigma,steps,full", [pytest.param(1.0, 50, 0, marks=pytest.mark.slow), (2.0, 16, 3),
                                              pytest.param(0.8, 30, 1, marks=pytest.mark.slow)])
def test_prefix_lies_between_the_whole_epochs(sigma, steps, full):
    """Certified comparisons: the prefix's bracket overlaps no bracket it cannot lie in."""
    eps = np.array([0.0, 0.1, 0.5, 1.0, 2.0])
    before = AllocationBracket(sigma, steps, full) if full else None
    after = AllocationBracket(sigma, steps, full + 1)
    up_after, lo_after = after.delta(eps)
    for r in (1, steps // 2, steps - 1):
        up, lo = AllocationBracket(sigma, steps, full + 1, steps_done=full * steps + r).delta(eps)
        assert np.all(lo <= up_after), r  # δ(prefix) <= δ(E' + 1 epochs)
        if before is not None:
            up_before, lo_before = before.delta(eps)
            assert np.all(lo_before <= up), r  # δ(E' epochs) <= δ(prefix)
        if r == steps // 2:  # half an epoch: strictly between, where the bracket can tell
            big = lo_after > 1e-6
            assert np.all(up[big] < lo_after[big]), (up, lo_after)
            if before is not None:
                assert np.all(lo[big] > before.delta(eps)[0][big]), r
    # and the ε(δ) bounds in order
    e_up, e_lo = AllocationBracket(sigma, steps, full + 1, steps_done=full * steps + steps // 2).epsilon(1e-5)
    assert e_lo <= e_up < after.epsilon(1e-5)[1]
    if before is not None:
        assert before.epsilon(1e-5)[0] < e_lo


def test_whole_run_and_its_prefixes_share_the_laws_and_match_the_plain_bracket():
    sigma, steps, epochs = 1.0, 12, 3
    plain = AllocationBracket(sigma, steps, epochs)
    assert plain.steps_done == 36 and (plain.full_epochs, plain.prefix_steps) == (3, 0)
    same = AllocationBracket(sigma, steps, epochs, steps_done=36)
    eps = np.linspace(0.0, 3.0, 7)
    assert np.array_equal(plain.upper(eps), same.upper(eps))
    assert "steps_done=7" in repr(AllocationBracket(sigma, steps, epochs, steps_done=7))
    # the prefix's answer is a function of the step count alone, whatever was asked before
    a = AllocationBracket(sigma, steps, epochs, steps_done=29).upper(eps)
    run_laws.cache_clear()
    bracket_for.cache_clear()
    for n in (31, 17, 5, 30):
        AllocationBracket(sigma, steps, epochs, steps_done=n).upper(eps)
    assert np.array_equal(a, AllocationBracket(sigma, steps, epochs, steps_done=29).upper(eps))


def test_runs_of_every_length_share_one_set_of_laws():
    """The cap is chosen for the longest run, so E epochs after E − 1 cost one product (squaring
    or multiplying epoch laws), not a new set of laws: counted in pairs formed by the kernel. The
    cap terms stay those of the run asked for."""
    from epscert.allocation import cells as kernel

    sigma, steps = 1.3, 40
    AllocationBracket(sigma, steps, 1).upper([1.0])
    one = combine_pairs(AllocationBracket(sigma, steps, 1).settings["cells"])
    budget = AllocationBracket(sigma, steps, 1).settings["cap_budget"]
    for epochs in (2, 3):
        before = kernel.PAIRS_FORMED[0]
        bracket = AllocationBracket(sigma, steps, epochs)
        bracket.upper([1.0])
        assert kernel.PAIRS_FORMED[0] - before <= 2 * one, epochs
        # the cap's definition (a budget/(2·1000) tail per term, one of the two tight) for E epochs:
        # remove <= E·budget/1000 and add <= E·budget/2000, the larger >= E·budget/2000
        caps, share = bracket.caps, epochs * budget / 2000
        assert caps["remove"] <= 2 * share * (1 + 1e-9) and caps["add"] <= share * (1 + 1e-9), caps
        assert max(caps.values()) >= share * (1 - 1e-9), caps
    assert AllocationBracket(sigma, steps, 1).settings["log_cap"] == AllocationBracket(sigma, steps, 7).settings["log_cap"]


def test_prefetched_digit_blocks_are_the_lazily_built_laws_and_stay_within_the_budget():
    """A training loop's queries build digit blocks ahead (cost only): the laws are the same as
    a fresh cache builds on demand, the blocks of the predicted next prefix are there before it is
    asked, and no query's prefetch spends more than its budget (plus the one combine in flight)."""
    from epscert.allocation import cells as kernel
    from epscert.allocation.prefix import RunLaws

    cells = 64
    shape = AllocationBracket(1.0, 4096).settings["shape"]
    settings = dict(cells=cells, base_cells=200, tau=1e-12, cap_budget=1e-10, shape=shape)
    loop = RunLaws(1.0, 4096, 2, **settings).chain("upper")
    fresh = RunLaws(1.0, 4096, 2, **settings).chain("upper")
    one = combine_pairs(cells)
    for r in (300, 600):  # 0x12C, 0x258
        loop.law(0, r)
    before = kernel.PAIRS_FORMED[0]
    loop.prefetch(6 * one)
    assert 5 * one <= kernel.PAIRS_FORMED[0] - before <= 7 * one  # the budget, give or take the one in flight
    assert {(3, 2), (11, 1), (12, 0), (13, 1)} <= set(loop._digits)  # 900 = 0x384, 1200 = 0x4B0, 1500 = 0x5DC
    for r in (900, 1200, 2500, 4000):
        a, b = loop.law(1, r).law, fresh.law(1, r).law
        assert np.array_equal(a.values, b.values) and np.array_equal(a.masses, b.masses)


def test_cap_terms_of_a_prefix_never_exceed_a_whole_epoch():
    sigma, steps = 0.9, 40
    log_c = log_cap(sigma, steps, 2, 1e-14)
    whole = cap_terms(sigma, steps, 1, log_c)
    assert cap_terms(sigma, steps, 0, log_c, prefix_steps=steps) == pytest.approx(whole, rel=1e-14)
    for r in (1, 17, 39):
        part = cap_terms(sigma, steps, 0, log_c, prefix_steps=r)
        assert part["remove"] < whole["remove"] and part["add"] < whole["add"]
        two = cap_terms(sigma, steps, 1, log_c, prefix_steps=r)
        assert two["remove"] == pytest.approx(whole["remove"] + part["remove"], rel=1e-14)


@pytest.mark.parametrize("bad", [0, 37, -1, 2.5, True])
def test_steps_done_is_checked_before_any_work(bad):
    with pytest.raises(ValueError, match="steps_done"):
        AllocationBracket(1.0, 12, 3, steps_done=bad)


# ---- persistent assignments (one bin per record for all cycles) -------------------------------------


@pytest.mark.parametrize("sigma,cycles,eps", [(1.0, 1, 0.5), (1.5, 2, 1.0), (0.9, 1, 1.5)])
def test_persistent_t2_contains_the_two_noise_quadrature(sigma, cycles, eps):
    from epscert.allocation.persistent import PersistentPrefixBracket
    from tests.reference.prefix_gh import persistent_delta_t2

    b = PersistentPrefixBracket(sigma, 2, cycles, 1)
    for d in DIRECTIONS:
        ref, err = persistent_delta_t2(sigma, cycles, eps, d)
        up, lo = b.delta([eps], d)
        assert lo[0] <= ref + err and ref - err <= up[0], (d, lo[0], ref, err, up[0])
        assert up[0] / lo[0] - 1 < 1e-2


@pytest.mark.parametrize("sigma,steps,cycles,r,eps", [(1.0, 10, 1, 4, 0.5),
                                                           pytest.param(2.0, 32, 3, 20, 0.3, marks=pytest.mark.slow)])
def test_persistent_monte_carlo_mean_inside_and_between_whole_cycles(sigma, steps, cycles, r, eps):
    """4 standard errors: false-failure probability about 6e-5 per comparison (normal approximation)."""
    from epscert.allocation.persistent import PersistentPrefixBracket

    b = PersistentPrefixBracket(sigma, steps, cycles, r)
    rng = np.random.default_rng(11)
    n = 200_000
    sa, sb = sigma / math.sqrt(cycles + 1), sigma / math.sqrt(cycles)
    w = np.concatenate([np.exp(rng.standard_normal((n, r)) / sa - 0.5 / sa**2),
                        np.exp(rng.standard_normal((n, steps - r)) / sb - 0.5 / sb**2)], axis=1)
    ratio = w.mean(axis=1)
    k = math.exp(eps)
    # whole cycles: E' cycles are one epoch at σ/√E', E' + 1 cycles one at σ/√(E' + 1)
    before, after = AllocationBracket(sb, steps, 1), AllocationBracket(sa, steps, 1)
    for d in DIRECTIONS:
        y = np.maximum(ratio - k, 0.0) if d == "remove" else np.maximum(1.0 - k * ratio, 0.0)
        mean, se = y.mean(), y.std(ddof=1) / math.sqrt(n)
        up, lo = b.delta([eps], d)
        assert lo[0] - 4 * se <= mean <= up[0] + 4 * se, (d, lo[0], mean, se, up[0])
        assert before.delta([eps], d)[1][0] <= up[0] and lo[0] <= after.delta([eps], d)[0][0]
