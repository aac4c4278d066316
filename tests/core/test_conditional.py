"""Conditional Monte Carlo (issue 13): closed form, quadrature, exact sums, bounds' coverage."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from epscert.analytic.deterministic import deterministic_delta
from epscert.bounds.kl import bernoulli_kl, kl_lcb
from epscert.bounds.truncated_lcb import LEVELS, truncated_lcb, truncation_levels
from epscert.montecarlo import accumulator as acc_mod
from epscert.dpsgd.conditional import ConditionalSampler
from epscert.montecarlo.exactfloat import UNIT_LOG2, float_sum_rows
from epscert.montecarlo.shard import ShardTask, plan_shards, run_shard
from epscert.config import CertifyConfig, Direction, Method
from epscert.results.rows import mc_rows
from tests.reference.quadrature import bnb_delta_quadrature

EPS = np.array([0.5, 1.0, 2.0])


@pytest.mark.parametrize("direction", [Direction.REMOVE, Direction.ADD])
def test_one_step_is_the_gaussian_closed_form(direction):
    s = ConditionalSampler(0.8, 1, 0.5)
    y = s.draw(np.random.default_rng(0), 3, direction, EPS) * math.exp(s.log_scale(direction))
    want = deterministic_delta(0.8, 1, EPS)  # SPEC §7, shares no code with the estimator
    np.testing.assert_allclose(y, np.repeat(want[:, None], 3, axis=1), rtol=1e-12)


@pytest.mark.parametrize("steps", [2, 3])
@pytest.mark.parametrize("direction", [Direction.REMOVE, Direction.ADD])
def test_matches_quadrature(steps, direction):
    # |mean - truth| <= 5 SE: false failure <= 6e-7 per value, 12 values.
    s = ConditionalSampler(0.7, steps, 0.5)
    y = s.draw(np.random.default_rng(steps), 40_000, direction, EPS) * math.exp(s.log_scale(direction))
    se = y.std(axis=1) / math.sqrt(y.shape[1])
    ref = np.array([bnb_delta_quadrature(0.7, steps, e, direction.value)[0] for e in EPS])
    assert np.all(np.abs(y.mean(axis=1) - ref) <= 5 * se + 1e-12), (y.mean(axis=1), ref, se)


@pytest.mark.parametrize("direction", [Direction.REMOVE, Direction.ADD])
def test_order_statistics_variant_is_pessimistic(direction):
    # Ranks {1} only: every value raised (module docstring). One-sided 5 SE check, false failure <= 3e-7.
    s = ConditionalSampler(0.7, 3, 0.5, ranks=(1,))
    y = s.draw(np.random.default_rng(5), 40_000, direction, EPS) * math.exp(s.log_scale(direction))
    se = y.std(axis=1) / math.sqrt(y.shape[1])
    ref = np.array([bnb_delta_quadrature(0.7, 3, e, direction.value)[0] for e in EPS])
    assert np.all(y.mean(axis=1) >= ref - 5 * se)


def test_values_stay_in_the_proven_range():
    s = ConditionalSampler(0.5, 50, 1.0)
    for d in (Direction.REMOVE, Direction.ADD):
        y = s.draw(np.random.default_rng(1), 2000, d, np.array([1.0, 3.0]))
        assert np.all(y >= 0) and np.all(y <= s.value_range(d, [1.0, 3.0])[:, None])


def test_float_sums_are_exact():
    rng = np.random.default_rng(1)
    y = np.exp(rng.uniform(-745, 5, (2, 3000)))
    y[0, :4] = 0.0
    got = float_sum_rows(y)
    want = [sum(Fraction(float(v)) for v in row) for row in y]
    assert [Fraction(g, 2**UNIT_LOG2) for g in got] == want


def test_shards_merge_exactly_and_rows_are_sane():
    config = CertifyConfig(sampler="balls_and_bins", sigma=0.5, steps=200, epsilons=(3.0, 5.0),
                           methods=("conditional",), samples=3000, seed=3)
    one = run_shard(ShardTask(config, Method.CONDITIONAL, 0, 3000))
    assert one[Direction.REMOVE].count == 3000
    three = acc_mod.merge(reversed([run_shard(t) for t in plan_shards(config, Method.CONDITIONAL, 3)]))
    assert acc_mod.merge([three]) == acc_mod.merge(reversed([run_shard(t) for t in
                                                            plan_shards(config, Method.CONDITIONAL, 3)]))
    rows = mc_rows(config, Method.CONDITIONAL, one, 0.0)
    for r in rows:
        assert r["delta_lower"] <= r["delta"] <= r["delta_upper"]
    both = [r for r in rows if r["direction"] == "both"]
    assert both[0]["delta_upper"] >= both[1]["delta_upper"]


def test_conditional_needs_one_epoch():
    with pytest.raises(ValueError, match="epochs"):
        CertifyConfig(sampler="balls_and_bins", sigma=0.5, steps=10, epsilons=(1.0,),
                      methods=("conditional",), epochs=2)


def test_kl_lcb_solves_its_equation():
    lcb = kl_lcb(0.3, 100, 0.05)
    assert lcb < 0.3
    assert 100 * bernoulli_kl(0.3, lcb) == pytest.approx(math.log(20), rel=1e-6)
    assert kl_lcb(0.0, 100, 0.05) == 0.0


def test_kl_lcb_coverage_on_bernoulli():
    # 400 runs at β = 0.1: failures ~ Binomial(400, <= 0.1); > 60 has probability < 5e-4.
    rng = np.random.default_rng(11)
    p = 0.2
    fails = sum(kl_lcb(rng.binomial(50, p) / 50, 50, 0.1) > p for _ in range(400))
    assert fails <= 60


def test_truncated_lcb_coverage_on_a_heavy_range():
    # Values in [0, 1] with mean 1e-3 mostly at 2e-3: B = 1 is 500x the bulk. 300 runs at β = 0.1:
    # failures > 45 have probability < 1e-3 under Binomial(300, 0.1).
    rng = np.random.default_rng(12)
    fails, lcbs = 0, []
    for _ in range(300):
        y = np.where(rng.random(400) < 0.5, 2e-3, 0.0)
        y[rng.random(400) < 1e-4] = 1.0
        taus = truncation_levels(1.0)
        means = np.minimum(y[None, :], taus[:, None]).mean(axis=1)
        lcb = truncated_lcb(means, 1.0, 400, 0.1)
        true_mean = 0.5 * 2e-3 + 1e-4 * (1.0 - 0.5 * 2e-3)  # exact E[Y] of the law above
        fails += lcb > true_mean
        lcbs.append(lcb)
    assert fails <= 45
    assert np.median(lcbs) > 0.5e-3  # the truncation does its job: not ~ B-limited
    assert len(taus) == LEVELS


def test_waves_stop_at_the_target_width_and_spend_beta_validly():
    from epscert.results.waves import relative_width, waves_rows
    lines = []
    cfg = CertifyConfig(sampler="balls_and_bins", sigma=0.8, steps=2, epsilons=(0.5,), methods=("conditional",),
                        samples=200, direction="add", seed=2)
    rows = waves_rows(cfg, Method.CONDITIONAL, 0.5, 200 * 15, progress=lines.append)
    k = len(lines) - 1  # last wave index: β_k = β 2^{-(k+1)}, n = 200 (2^{k+1} - 1)
    assert rows[0]["error_prob"] == pytest.approx(cfg.error_prob * 2.0 ** -(k + 1))
    assert rows[0]["samples"] == 200 * (2 ** (k + 1) - 1)
    assert "width" in lines[-1]
    assert relative_width(rows) <= 1.5 or rows[0]["samples"] == 3000


def test_api_target_rel_width_runs_the_waves():
    """certify(target_rel_width=...): wave 0 alone equals a plain run at β/2; later waves add fresh shards."""
    import dataclasses
    from epscert.api import certify, certify_config
    kw = dict(sigma=0.8, steps=3, epsilons=(0.5, 1.0), method=("conditional", "cube_lower_bound"), samples=64,
              shards=2, seed=5, direction="add")
    one = certify(**kw, target_rel_width=1e-9, max_samples=64).to_pylist()  # budget stops after wave 0
    cfg = CertifyConfig(sampler="balls_and_bins", sigma=0.8, steps=3, epsilons=(0.5, 1.0),
                        methods=("conditional", "cube_lower_bound"), samples=64, shards=2, seed=5, direction="add")
    plain = certify_config(dataclasses.replace(cfg, error_prob=cfg.error_prob / 2)).to_pylist()
    key = lambda r: (r["method"], r["epsilon"])  # noqa: E731
    strip = lambda rows: [dict(r, wall_seconds=0.0, config_id=None) for r in sorted(rows, key=key)]  # noqa: E731
    assert strip(one) == strip(plain)
    more = [r for r in certify(**kw, target_rel_width=1e-9, max_samples=448).to_pylist()
            if r["method"] == "conditional"]
    assert {r["samples"] for r in more} == {448}  # waves 64 + 128 + 256, budget reached
    assert {r["error_prob"] for r in more} == {cfg.error_prob / 8}
    firsts = [r for r in one if r["method"] == "conditional"]
    assert all(m["delta"] != f["delta"] for m, f in zip(sorted(more, key=key), sorted(firsts, key=key)))
    with pytest.raises(ValueError, match="target_rel_width"):
        certify(**kw, target_rel_width=0.0)
