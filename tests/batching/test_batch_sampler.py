"""The batches of epscert.BatchSampler follow each certified sampler's law (SPEC §1).

Statistical tests use a fixed seed and reject at ALPHA = 1e-4: for a correct sampler each such
assertion fails with probability <= 1e-4 over the seed (the chi-square ones up to the accuracy
of the chi-square approximation, with expected cell counts >= 20 everywhere).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import epscert
from epscert.batching import BatchIndexSampler

ALPHA = 1e-4


def bins_of(bs: BatchIndexSampler, epoch: int) -> np.ndarray:
    """The batch (step) of each record in ``epoch``; -1 where a record sits the epoch out."""
    out = np.full(bs.dataset_size, -1)
    for t, batch in enumerate(bs.global_batches(epoch)):
        assert np.all(out[batch] == -1), "a record appears twice in one epoch"
        out[batch] = t
    return out


def test_len_and_types_follow_the_issue_example():
    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=60_000, batch_size=256, epochs=10, seed=0)
    assert bs.steps_per_epoch == 234 and len(bs) == 2340
    batches = list(bs)
    assert len(batches) == 2340
    assert all(b.dtype == np.int64 and b.ndim == 1 for b in batches)
    assert sum(len(b) for b in batches) == 60_000 * 10  # every record once per epoch


@pytest.mark.parametrize("persistent", [False, True])
def test_balls_and_bins_bins_uniform_and_fresh_or_persistent(persistent):
    name = "balls_and_bins_persistent" if persistent else "balls_and_bins"
    n, T = 4000, 8
    bs = BatchIndexSampler(name, dataset_size=n, batch_size=n // T, epochs=3, seed=11)
    b0, b1, b2 = (bins_of(bs, e) for e in range(3))
    assert b0.min() >= 0  # Balls-and-Bins uses every record every epoch
    counts = np.bincount(b0, minlength=T)  # uniform over T: chi-square with T-1 df
    assert stats.chisquare(counts).pvalue > ALPHA
    if persistent:
        assert np.array_equal(b0, b1) and np.array_equal(b0, b2)
    else:  # independent across epochs: chi-square test of the T x T contingency table
        table = np.zeros((T, T))
        np.add.at(table, (b0, b1), 1)
        assert stats.chi2_contingency(table).pvalue > ALPHA
        assert not np.array_equal(b0, b2)


def test_balls_and_bins_batch_sizes_are_multinomial():
    # Per epoch, sum_t (c_t - n/T)^2 / (n/T) is Pearson's statistic of a Multinomial(n; 1/T) draw,
    # ~ chi2(T-1); over E independent epochs the sum is ~ chi2(E (T-1)). Two-sided at ALPHA.
    n, T, E = 600, 20, 200
    bs = BatchIndexSampler("balls_and_bins", dataset_size=n, batch_size=n // T, epochs=E, seed=3)
    sizes = np.array([len(b) for b in bs]).reshape(E, T)
    assert np.all(sizes.sum(axis=1) == n)
    stat = ((sizes - n / T) ** 2 / (n / T)).sum()
    df = E * (T - 1)
    assert stats.chi2.sf(stat, df) > ALPHA / 2 and stats.chi2.cdf(stat, df) > ALPHA / 2


def test_poisson_batch_sizes_are_binomial_at_rate_one_over_T():
    n, b, E = 1000, 40, 40
    bs = BatchIndexSampler("poisson", dataset_size=n, batch_size=b, epochs=E, seed=5)
    T = bs.steps_per_epoch
    sizes = np.array([len(x) for x in bs])
    q = 1.0 / T
    # the total is Binomial(n T E, q): exact two-sided binomial test
    assert stats.binomtest(int(sizes.sum()), n * T * E, q).pvalue > ALPHA
    # dispersion: sum (c - nq)^2 / (nq(1-q)) ~ approx chi2(T E)
    stat = (((sizes - n * q) ** 2) / (n * q * (1 - q))).sum()
    assert stats.chi2.sf(stat, T * E) > ALPHA / 2 and stats.chi2.cdf(stat, T * E) > ALPHA / 2
    # each record's count of steps is Binomial(T E, q): chi-square of the pooled record counts
    per_record = np.bincount(np.concatenate(list(bs)), minlength=n)
    assert stats.binomtest(int(per_record[0] + per_record[1]), 2 * T * E, q).pvalue > ALPHA


def test_empty_batches_are_yielded_not_skipped():
    for name in ("balls_and_bins", "poisson"):
        bs = BatchIndexSampler(name, dataset_size=40, batch_size=1, epochs=2, seed=0)  # T = 40, mean size 1
        batches = list(bs)
        assert len(batches) == len(bs) == 80
        assert any(len(x) == 0 for x in batches)  # P(no empty batch in 80) < 1e-10 for both laws
        assert all(x.dtype == np.int64 for x in batches)


@pytest.mark.parametrize("persistent", [False, True])
def test_shuffle_is_a_uniform_permutation_cut_into_batches(persistent):
    name = "shuffle_persistent" if persistent else "shuffle"
    n, b = 1003, 100  # T = 10, three records sit each epoch out
    bs = BatchIndexSampler(name, dataset_size=n, batch_size=b, epochs=300, seed=2)
    assert all(len(x) == b for x in bs.global_batches(0))
    e0, e1 = bins_of(bs, 0), bins_of(bs, 1)
    assert (e0 == -1).sum() == 3
    if persistent:
        assert np.array_equal(e0, e1)
        return
    # record 0's batch over 300 epochs: uniform over the T batches and 'out' (weight 3/1003)
    where = np.array([bins_of(bs, e)[0] for e in range(0, 300)])
    inside = where[where >= 0]
    assert stats.chisquare(np.bincount(inside, minlength=10)).pvalue > ALPHA
    # reshuffled: the batches of the records in epochs 0 and 1 are independent (T x T table)
    both = (e0 >= 0) & (e1 >= 0)
    table = np.zeros((10, 10))
    np.add.at(table, (e0[both], e1[both]), 1)
    assert stats.chi2_contingency(table).pvalue > ALPHA


def test_deterministic_is_the_fixed_order():
    bs = BatchIndexSampler("deterministic", dataset_size=10, batch_size=3, epochs=2)
    assert [x.tolist() for x in bs] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]] * 2


@pytest.mark.parametrize("name", ["balls_and_bins", "balls_and_bins_persistent", "shuffle",
                                  "shuffle_persistent", "poisson", "deterministic"])
def test_ranks_are_disjoint_shards_whose_union_is_the_global_batch(name):
    kw = dict(dataset_size=503, batch_size=50, epochs=2, seed=9)
    world = 3
    shards = [list(BatchIndexSampler(name, rank=r, world_size=world, **kw)) for r in range(world)]
    full = list(BatchIndexSampler(name, **kw))
    assert all(len(s) == len(full) for s in shards)
    for step, batch in enumerate(full):
        parts = [s[step] for s in shards]
        joined = np.concatenate(parts)
        assert len(np.unique(joined)) == len(joined)  # disjoint
        assert np.array_equal(np.sort(joined), np.sort(batch))  # union is the global batch


@pytest.mark.parametrize("name", ["balls_and_bins", "balls_and_bins_persistent", "shuffle", "poisson"])
def test_resume_mid_epoch_gives_the_same_batches(name):
    kw = dict(dataset_size=300, batch_size=20, epochs=3, seed=4)
    whole = [x.tolist() for x in BatchIndexSampler(name, **kw)]
    first = BatchIndexSampler(name, **kw)
    it = iter(first)
    head = [next(it).tolist() for _ in range(22)]  # stops in the middle of epoch 1
    state = first.state_dict()
    resumed = BatchIndexSampler(name, **kw)
    resumed.load_state_dict(state)
    assert head + [x.tolist() for x in resumed] == whole
    other = BatchIndexSampler(name, **dict(kw, seed=5))
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)


def test_set_epoch_and_reproducibility():
    kw = dict(dataset_size=300, batch_size=20, epochs=3, seed=4)
    a = BatchIndexSampler("balls_and_bins", **kw)
    a.set_epoch(2)
    tail = [x.tolist() for x in a]
    assert len(tail) == 15
    assert tail == [x.tolist() for x in list(BatchIndexSampler("balls_and_bins", **kw))[30:]]
    assert [x.tolist() for x in a] == [x.tolist() for x in BatchIndexSampler("balls_and_bins", **kw)]


@pytest.mark.parametrize("kwargs,field", [
    (dict(sampler="bins"), "sampler"), (dict(dataset_size=0), "dataset_size"),
    (dict(batch_size=11), "batch_size"), (dict(epochs=0), "epochs"), (dict(seed=-1), "seed"),
    (dict(rank=2, world_size=2), "rank"), (dict(world_size=0), "world_size"),
])
def test_bad_input_names_the_field(kwargs, field):
    kw = dict(sampler="balls_and_bins", dataset_size=10, batch_size=2)
    kw.update(kwargs)
    with pytest.raises(ValueError, match=field):
        epscert.BatchSampler(**kw)


@pytest.mark.parametrize("name", ["balls_and_bins", "balls_and_bins_persistent", "poisson", "deterministic"])
def test_accountant_matches_the_run(name):
    bs = epscert.BatchSampler(sampler=name, dataset_size=1000, batch_size=100, epochs=4)
    acc = bs.accountant(noise_multiplier=2.0, samples=1000)
    assert isinstance(acc, epscert.Accountant)
    assert (acc.config.steps, acc.config.epochs) == (10, 4)
    assert acc.config.sampler.value == name


@pytest.mark.parametrize("name", ["shuffle", "shuffle_persistent"])
def test_shuffle_runs_are_certified_only_by_domination(name):
    # the shuffle Monte Carlo pair is a conjecture: the accountant never returns it as a certificate;
    # its answer is the deterministic ε (one participation per epoch, issue 17 item 2)
    bs = epscert.BatchSampler(sampler=name, dataset_size=1000, batch_size=100, epochs=4)
    with pytest.raises(ValueError, match="conjecture"):
        bs.accountant(noise_multiplier=2.0, samples=1000, method="naive")
    acc = bs.accountant(noise_multiplier=2.0, samples=1000)
    eps = acc.get_epsilon(1e-5)
    assert acc.last_certificate.bound == "deterministic_domination"
    det = epscert.Accountant(noise_multiplier=2.0, steps=10, epochs=4, sampler="deterministic").get_epsilon(1e-5)
    assert eps == pytest.approx(det, rel=1e-9)


def test_epoch_view_serves_one_epoch_per_iteration_then_nothing():
    from epscert.batching.indices import EpochView

    kw = dict(dataset_size=300, batch_size=20, epochs=3, seed=4)
    whole = [x.tolist() for x in BatchIndexSampler("balls_and_bins", **kw)]
    bs = BatchIndexSampler("balls_and_bins", **kw)
    view = EpochView(bs)
    assert len(view) == 15
    epochs = [[x.tolist() for x in view] for _ in range(3)]
    assert [len(e) for e in epochs] == [15, 15, 15] and sum(epochs, []) == whole
    assert list(view) == []  # the run is over: the sampler's epochs are not served again


def test_released_steps_not_the_prefetched_position_are_where_a_run_resumes():
    """A loader with workers runs ahead; with ``released`` counted nothing prefetched is skipped."""
    from epscert.batching.indices import EpochView

    kw = dict(dataset_size=300, batch_size=20, epochs=2, seed=7)
    whole = [x.tolist() for x in BatchIndexSampler("balls_and_bins", **kw)]
    bs = BatchIndexSampler("balls_and_bins", **kw)
    view = EpochView(bs, prefetch=True)
    it = iter(view)
    handed = [next(it).tolist() for _ in range(6)]  # 6 handed out (prefetched), 4 trained, then stop
    assert handed == whole[:6] and bs.position == 6
    with pytest.raises(ValueError, match="prefetch"):
        next(iter(view))  # without a count of the steps taken it refuses to skip
    bs.released = 4
    assert bs.state_dict()["position"] == 4
    rest = []
    for _ in range(2):
        for x in view:  # each batch trained: the step count (an accountant's job) moves on
            rest.append(x.tolist())
            bs.released += 1
    assert whole[:4] + rest == whole  # batches 4 and 5 are served again, none skipped
    resumed = BatchIndexSampler("balls_and_bins", **kw)
    resumed.released = 0
    resumed.load_state_dict(dict(bs.state_dict(), position=9))
    assert resumed.released == 9 and [x.tolist() for x in resumed] == whole[9:]
    with pytest.raises(ValueError, match="sampler"):
        EpochView([1, 2])
