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
