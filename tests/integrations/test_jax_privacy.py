"""JAX Privacy's batch selection strategies mapped to epscert (extra ``[jax]``), with the real package."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

bsel = pytest.importorskip("jax_privacy.batch_selection", reason="needs the [jax] extra: pip install -e '.[jax]'")

import epscert  # noqa: E402
from epscert.integrations.jax_privacy import accountant_for, reduction, sampler_for  # noqa: E402

ALPHA = 1e-4  # false-failure probability of each statistical assertion (chi-square approximation)


def bins(batches, n: int, T: int) -> tuple[int, ...]:
    """The bin of each example, checking that every cycle repeats the first."""
    out = np.full(n, -1)
    for t, batch in enumerate(batches[:T]):
        out[np.asarray(batch, dtype=np.int64)] = t
    for i, batch in enumerate(batches):
        assert sorted(np.asarray(batch).tolist()) == sorted(np.flatnonzero(out == i % T).tolist())
    return tuple(out.tolist())


def test_persistent_batches_have_the_law_of_balls_in_bins_sampling():
    """Two-sample chi-square over all T^n = 81 joint bin assignments (n = 4, T = 3), 4000 runs each."""
    n, T, runs = 4, 3, 4000
    strategy = bsel.BallsInBinsSampling(iterations=7, cycle_length=T)  # 2 whole cycles and a prefix
    theirs = [bins(list(strategy.batch_iterator(n, rng=seed)), n, T) for seed in range(runs)]
    mine = [bins(list(sampler_for(strategy, n, seed=seed)), n, T) for seed in range(runs)]
    assert len(list(sampler_for(strategy, n))) == 9  # 3 whole epochs: the 7 steps are their prefix
    cells = {c: i for i, c in enumerate(sorted(set(theirs) | set(mine)))}
    table = np.zeros((2, len(cells)))
    for row, sample in enumerate((theirs, mine)):
        for c in sample:
            table[row, cells[c]] += 1
    assert len(cells) == T**n
    assert stats.chi2_contingency(table).pvalue > ALPHA
    assert stats.chisquare(table[1]).pvalue > ALPHA  # and both are uniform over the 81 assignments


def test_reductions():
    assert reduction(bsel.BallsInBinsSampling(iterations=2340, cycle_length=234), 60_000) == (
        "balls_and_bins_persistent", 234, 10)
    assert reduction(bsel.CyclicPoissonSampling(sampling_prob=0.01, iterations=250), 1000) == ("poisson", 100, 3)
    assert reduction(bsel.CyclicPoissonSampling(sampling_prob=1.0, iterations=10, cycle_length=5,
                                                partition_type=bsel.PartitionType.INDEPENDENT), 1000) == (
        "balls_and_bins_persistent", 5, 2)
    assert reduction(bsel.FixedBatchSampling(batch_size=50, iterations=7), 50) == ("deterministic", 1, 7)


@pytest.mark.parametrize("strategy,reason", [
    (bsel.CyclicPoissonSampling(sampling_prob=0.3, iterations=10), "sampling_prob"),
    (bsel.CyclicPoissonSampling(sampling_prob=0.5, iterations=10, cycle_length=2), "does not reduce"),
    (bsel.CyclicPoissonSampling(sampling_prob=0.5, iterations=10, truncated_batch_size=3), "truncat"),
    (bsel.FixedBatchSampling(batch_size=10, iterations=10), "does not reduce"),
])
def test_refusals_say_why(strategy, reason):
    with pytest.raises(ValueError, match=reason):
        accountant_for(strategy, 100, noise_multiplier=1.0)


def test_accountant_for_balls_in_bins_is_the_reduced_one_epoch_certificate():
    acc = accountant_for(bsel.BallsInBinsSampling(iterations=40, cycle_length=10), 1000, noise_multiplier=2.0,
                         samples=20_000)
    ref = epscert.Accountant(noise_multiplier=2.0 / math.sqrt(4), steps=10, epochs=1, samples=20_000)
    assert acc.get_epsilon(1e-2) == ref.get_epsilon(1e-2)
    assert math.isfinite(acc.get_epsilon(1e-2))


def test_epsilon_after_certifies_the_iterations_taken_mid_cycle():
    """2.5 cycles of T = 10: the persistent prefix bracket, between 2 and 3 whole cycles."""
    from epscert.integrations.jax_privacy import epsilon_after

    strategy = bsel.BallsInBinsSampling(iterations=25, cycle_length=10)
    sigma, delta = 2.0, 1e-5
    mid = epsilon_after(strategy, 1000, sigma, delta)
    run = epscert.Accountant(noise_multiplier=sigma, steps=10, epochs=3, sampler="balls_and_bins_persistent")
    assert mid == run.get_epsilon(delta, steps_done=25)
    assert run.last_certificate.bound == "allocation_prefix_bracket_upper"
    two, three = (epscert.Accountant(noise_multiplier=sigma / math.sqrt(k), steps=10).get_epsilon(delta)
                  for k in (2, 3))
    assert two < mid < three == accountant_for(strategy, 1000, sigma).get_epsilon(delta)
    assert epsilon_after(strategy, 1000, sigma, delta, steps=20) == two
    with pytest.raises(ValueError, match="steps"):
        epsilon_after(strategy, 1000, sigma, delta, steps=26)


# --- BandMF (issue 23): the accountant of a JAX Privacy BandMF run, against JAX Privacy itself ---------

sample_generation = pytest.importorskip("jax_privacy.experimental.monte_carlo.sample_generation")

from epscert.integrations.jax_privacy import bandmf_accountant  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

#: Two-sided z of each Monte Carlo comparison: false failure <= 1e-6 per assertion (CLT).
Z = 4.9


@pytest.mark.parametrize("n, b, c_col", [(10, 4, [1.0, 0.5, 0.25]), (7, 3, [1.0, 0.8, 0.6, 0.4, 0.2]),
                                         (6, 6, [0.5, 1.0])])
def test_modes_gram_is_jax_privacys(n, b, c_col):
    """JAX Privacy's own positive samples at noise 0 are the modes C x_j of its BallsInBinsSampling (bins
    with fewer participations when b does not divide n, bands wrapping past a cycle): their Gram matrix
    is the one epscert samples from."""
    strategy = bsel.BallsInBinsSampling(iterations=n, cycle_length=b)
    drawn = sample_generation.generate_sample(strategy, 0.0, np.array(c_col), seed=0, positive_sample=True,
                                              num_samples=40 * b)  # every bin drawn: P(miss) <= b (1-1/b)^40b
    modes = np.unique(drawn.T, axis=0)
    modes = modes[np.argsort([np.flatnonzero(m)[0] for m in modes])]  # bin j's mode starts at iteration j
    assert modes.shape == (b, n)
    np.testing.assert_allclose(toeplitz_strategy(c_col, n).gram(b).g0, modes @ modes.T, rtol=1e-12, atol=1e-12)


def jax_delta(strategy, sigma: float, c_col, eps: float, positive: bool, m: int, seed: int) -> tuple[float, float]:
    """δ(ε) and its standard error from JAX Privacy's privacy-loss samples: mean of (1 - e^{ε-ℓ})_+
    (positive_sample=True: our REMOVE loss under P; False: the ADD loss, already negated)."""
    losses, _ = sample_generation.get_privacy_loss_sample(strategy=strategy, noise_multiplier=sigma,
                                                          c_col=np.array(c_col), seed=seed, positive_sample=positive,
                                                          num_samples=m)
    values = -np.expm1(np.minimum(eps - np.asarray(losses), 0.0))
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(m))


AGREEMENT_POINTS = [
    (10, 4, [1.0, 0.5, 0.25], 1.5, 0.5),        # b does not divide n
    (9, 3, [1.0, 0.8, 0.6, 0.4], 2.0, 0.3),     # more bands than the cycle: the modes overlap cyclically
    (8, 2, [1.3], 1.2, 0.5),                    # C = c·I
]
#: (point, method, direction) of the fast suite: every point, estimator and direction at least once; the rest of the
#: 3 x 2 x 2 grid runs with the slow set
FAST_AGREEMENT = {(0, "conditional", "remove"), (1, "tilted", "add"), (2, "conditional", "add"),
                  (0, "tilted", "remove")}


def _agreement_cases():
    for i, point in enumerate(AGREEMENT_POINTS):
        for method in ("conditional", "tilted"):
            for direction in ("remove", "add"):
                marks = () if (i, method, direction) in FAST_AGREEMENT else (pytest.mark.slow,)
                yield pytest.param(*point, direction, method, marks=marks)


@pytest.mark.parametrize("n, b, c_col, sigma, eps, direction, method", list(_agreement_cases()))
def test_bandmf_accountant_agrees_with_jax_privacys_monte_carlo(n, b, c_col, sigma, eps, direction, method):
    strategy = bsel.BallsInBinsSampling(iterations=n, cycle_length=b)
    acc = bandmf_accountant(strategy, noise_multiplier=sigma, c_col=np.array(c_col), samples=3000, seed=4,
                            direction=direction, method=method)
    lower, estimate, upper = acc.delta_interval(eps)
    row = next(r for r in acc.last_table.to_pylist() if r["direction"] == direction)
    theirs, se = jax_delta(strategy, sigma, c_col, eps, direction == "remove", 6000, seed=11)
    mean = row["delta"]  # the Monte Carlo mean (the interval drops an estimate outside its deterministic sides)
    assert estimate is None or lower <= estimate <= upper
    assert abs(mean - theirs) <= Z * math.hypot(se, row["std_error"]), (mean, theirs, se)
    assert lower <= theirs + Z * se and theirs - Z * se <= upper


def test_bandmf_accountant_is_the_strategy_accountant():
    strategy = bsel.BallsInBinsSampling(iterations=20, cycle_length=5)
    acc = bandmf_accountant(strategy, noise_multiplier=2.0, c_col=np.array([1.0, 0.5, 0.25]), samples=500)
    same = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy([1.0, 0.5, 0.25], 20),
                              cycle_length=5, samples=500)
    assert acc.config == same.config and acc.config.epochs == 4  # 4 cycles of 5
    long = bandmf_accountant(strategy, noise_multiplier=2.0, c_col=np.ones(30), samples=500)
    assert long.config.strategy.c_col == (1.0,) * 20  # entries past n are cut, as JAX Privacy cuts them


@pytest.mark.parametrize("kwargs, needle", [
    ({"strategy": bsel.CyclicPoissonSampling(sampling_prob=0.5, iterations=10)}, "must be BallsInBinsSampling"),
    ({"strategy": bsel.BallsInBinsSampling(iterations=4, cycle_length=5)}, "cycle_length must be <= iterations=4"),
    ({"c_col": np.array([1.0, -0.1])}, r"c_col\[1\]=-0.1"),
    ({"c_col": np.array([[1.0]])}, "1-D"),
    ({"noise_multiplier": 0.0}, "sigma"),
    ({"steps": 3}, "comes from the JAX Privacy strategy"),
])
def test_bandmf_accountant_refuses_bad_input(kwargs, needle):
    args = {"strategy": bsel.BallsInBinsSampling(iterations=10, cycle_length=5), "noise_multiplier": 1.0,
            "c_col": np.array([1.0, 0.5])}
    args.update(kwargs)
    with pytest.raises(ValueError, match=needle):
        bandmf_accountant(**args)
