"""The JAX sampling backend on CPU: exact sums, streams, agreement with numpy, coverage.

Skipped as a whole when JAX is not installed (``pip install -e '.[jax]'``). Every statistical
check has a fixed seed and states its false-failure probability over the choice of seeds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats

jax = pytest.importorskip("jax", reason="JAX is not installed: pip install -e '.[jax]' to test the JAX backend")

from epscert.montecarlo import accumulator as acc_mod  # noqa: E402
from epscert.dpsgd import jax_kernels  # noqa: E402
from epscert.montecarlo.backends import jax_backend, resolve  # noqa: E402
from epscert.montecarlo.exactsum import grid_sum_rows  # noqa: E402
from epscert.config.samplers import loss_sampler  # noqa: E402
from epscert.montecarlo.shard import ShardTask, plan_shards, run_shard  # noqa: E402
from epscert.config import CertifyConfig, Direction, Method  # noqa: E402
from epscert.results.rows import mc_rows  # noqa: E402
from epscert.rng import stream_key_words  # noqa: E402
from tests.reference.quadrature import bnb_delta_quadrature  # noqa: E402
from tests.soundness.criteria import allowed_misses  # noqa: E402

EPS = (0.25, 0.75, 1.5)


def _config(method: str, backend: str, samples: int = 4096, steps: int = 20, **kw) -> CertifyConfig:
    return CertifyConfig(sampler=kw.pop("sampler", "balls_and_bins"), sigma=kw.pop("sigma", 0.7), steps=steps,
                         epsilons=kw.pop("epsilons", EPS), methods=method, samples=samples, backend=backend, **kw)


def test_device_reduction_is_bit_for_bit_the_host_grid_sum():
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.random((3, 5000)), np.zeros((3, 7)), np.ones((3, 7)),
                        np.full((3, 7), 2.0**-60), np.full((3, 7), 1 - 2.0**-53)], axis=1) ** 3
    with jax.enable_x64(True):
        hi, lo = jax_backend.grid_halves(jax.numpy.asarray(y))
        got = [(int(h) << 26) + int(l) for h, l in zip(np.asarray(hi), np.asarray(lo))]
    assert got == grid_sum_rows(y)


#: Units of 2**-52 one Y may move by between the fused device kernel and numpy on the host copy of
#: its losses (a few ulps of logsumexp/expm1, then the ceil): far below one misplaced sample (~1e15).
ULP_UNITS = 16


@pytest.mark.parametrize("method", ["naive", pytest.param("importance", marks=pytest.mark.slow)])
def test_device_sums_match_the_host_sums_of_the_same_losses(method):
    """Count, mask of the padded block (300 of 512) and ΣY, ΣY² against the host on the same losses."""
    config = _config(method, "jax", samples=300)
    m = config.resolved[0]
    sampler = loss_sampler(config, m)
    for d_index, direction in enumerate((Direction.REMOVE, Direction.ADD)):
        words = stream_key_words(7, 11, 0, d_index)
        n_block = jax_backend.block_size(sampler.steps, 300)
        assert n_block == 512
        ell = jax_kernels.losses(sampler, m, direction, words, 0, n_block)[:300]
        sums = jax_kernels.direction_sums(sampler, m, direction, words, 300, config.epsilons)
        y = acc_mod.y_values(ell[None, :], np.asarray(config.epsilons)[:, None])
        assert sums.count == 300
        for got, want in ((sums.sum_y, grid_sum_rows(y)), (sums.sum_y2, grid_sum_rows(y * y))):
            assert all(abs(g - w) <= ULP_UNITS * 300 for g, w in zip(got, want)), (got, want)
        assert sums.sum_y[0] > 2**52  # ΣY > 1: a non-trivial comparison


def test_same_key_same_stream_and_blocks_differ():
    config = _config("naive", "jax", epochs=2)
    sampler = loss_sampler(config, Method.NAIVE)
    words = stream_key_words(1, 2, 3, 0)
    a = jax_kernels.losses(sampler, Method.NAIVE, Direction.REMOVE, words, 0, 64)
    assert np.array_equal(a, jax_kernels.losses(sampler, Method.NAIVE, Direction.REMOVE, words, 0, 64))
    b = jax_kernels.losses(sampler, Method.NAIVE, Direction.REMOVE, words, 1, 64)
    other = jax_kernels.losses(sampler, Method.NAIVE, Direction.REMOVE, stream_key_words(1, 2, 4, 0), 0, 64)
    assert not np.any(a == b) and not np.any(a == other)


@pytest.mark.parametrize("steps,orders", [(12, "1,4,1,4,11,3"), pytest.param(2, None, marks=pytest.mark.slow)])
def test_importance_order_stats_same_key_same_losses(steps, orders):
    """Both directions; T = 2: the max at coordinate 2 leaves d = 0 ranks; T = 12 with partial ranks."""
    config = _config("importance_order_stats", "jax", steps=steps, orders=orders)
    sampler = loss_sampler(config, Method.IMPORTANCE_ORDER_STATS)
    for direction in (Direction.REMOVE, Direction.ADD):
        words = stream_key_words(1, 2, 3, 0)
        a = jax_kernels.losses(sampler, Method.IMPORTANCE_ORDER_STATS, direction, words, 0, 64)
        assert np.all(np.isfinite(a))
        assert np.array_equal(a, jax_kernels.losses(sampler, Method.IMPORTANCE_ORDER_STATS, direction,
                                                    words, 0, 64))
        b = jax_kernels.losses(sampler, Method.IMPORTANCE_ORDER_STATS, direction, words, 1, 64)
        assert not np.any(a == b)


@pytest.mark.parametrize("method,steps,samples", [
    ("naive", 3, 3000),  # one block of 4096 (masked tail): every shard splits it
    ("conditional", 3, 700),  # the conditional kernel's blocks, cut on the host
    pytest.param("naive", 2048, 20_000, marks=pytest.mark.slow),  # blocks of 8192: 3 blocks, whole and split
])
def test_jax_sums_do_not_depend_on_the_shard_layout(method, steps, samples):
    """Block g of the JAX stream is fold_in(key(seed, config, stream, direction), g) at a block size set by
    (T, stream samples): 1, 2, 3 and 7 shards merge to the same exact sums (SPEC §10)."""
    config = _config(method, "jax", samples=samples, steps=steps, seed=4)
    m = config.resolved[0]
    merged = [acc_mod.merge(run_shard(t) for t in plan_shards(config, m, s)) for s in (1, 2, 3, 7)]
    assert all(acc == merged[0] for acc in merged[1:])
    assert merged[0].tags == ("jax:cpu:cpu",) and merged[0][Direction.ADD].count == samples


def test_x64_stays_scoped_to_the_backend():
    jnp = jax.numpy
    before = jnp.zeros(1).dtype
    run_shard(plan_shards(_config("naive", "jax", samples=64), Method.NAIVE)[0])
    assert jnp.zeros(1).dtype == before


def _mean_and_var(sums: acc_mod.DirectionSums, i: int) -> tuple[float, float]:
    mean = sums.mean(i)
    return mean, max(sums.mean_sq(i) - mean * mean, 0.0)


#: 2 directions x 3 ε = 6 two-sided z-tests at α = 1e-5 each per case: a correct backend
#: fails a case with probability <= 6e-5 over the seeds (the CLT is accurate at 2^15 samples
#: for values in [0, 1] with these means ~1e-2..1e-1).
ALPHA_Z = 1e-5


@pytest.mark.parametrize("method,sampler", [
    ("naive", "balls_and_bins"), ("importance", "balls_and_bins"),
    pytest.param("naive", "shuffle", marks=pytest.mark.slow), pytest.param("naive", "poisson", marks=pytest.mark.slow),
    # the order-statistic kernels: importance_order_stats' same-key test against the host stays fast
    pytest.param("order_stats", "balls_and_bins", marks=pytest.mark.slow),
    pytest.param("importance_order_stats", "balls_and_bins", marks=pytest.mark.slow),
])
def test_numpy_and_jax_agree_within_clt_limits(method, sampler):
    n = 2**15
    results = {}
    for backend in ("numpy", "jax"):
        extra = {"orders": "1,5,1,5,15,3", "steps": 40} if "order_stats" in method else {}  # partial ranks: a bound
        config = _config(method, backend, samples=n, seed=3, sampler=sampler,
                         epochs=1 if "importance" in method else 2, **extra)
        results[backend] = run_shard(plan_shards(config, config.resolved[0])[0])
    assert results["jax"].tags == ("jax:cpu:cpu",) and results["numpy"].tags == ("numpy:cpu",)
    z_crit = stats.norm.isf(ALPHA_Z / 2)
    for direction in (Direction.REMOVE, Direction.ADD):
        a, b = results["numpy"][direction], results["jax"][direction]
        assert a.sum_y != b.sum_y  # different streams
        for i in range(len(EPS)):
            (ma, va), (mb, vb) = _mean_and_var(a, i), _mean_and_var(b, i)
            se = math.sqrt(va / n + vb / n)
            assert i > 0 or (ma > 0 and mb > 0)  # the smallest ε is never a trivial 0 == 0 comparison
            assert abs(ma - mb) <= z_crit * se, (method, direction, EPS[i], ma, mb, se)


REPS = 300
BETA = 0.1


@functools.lru_cache(maxsize=None)
def _truth(steps: int, eps: float, direction: str) -> float:
    value, err = bnb_delta_quadrature(0.8, steps, eps, direction)
    return value - err


@pytest.mark.parametrize("method,sampler,steps", [
    ("naive", "balls_and_bins", 3),
    pytest.param("importance", "balls_and_bins", 3, marks=pytest.mark.slow),
    pytest.param("importance", "deterministic", 1, marks=pytest.mark.slow),
    pytest.param("order_stats", "balls_and_bins", 3, marks=pytest.mark.slow),  # default ranks 1..T-1: exact
    pytest.param("importance_order_stats", "balls_and_bins", 3, marks=pytest.mark.slow),  # exact as well
])
def test_certificate_coverage_on_the_jax_backend(method, sampler, steps):
    """REPS independent runs of 1000 samples (streams 0..REPS-1); each run's UCB at β misses the true
    δ with probability <= β, so misses ~ Binomial(REPS, <= β): fails above binom.ppf(1 - 1e-4) (1e-4
    false-failure probability per (direction, ε); 6 checks per case). Truth: deterministic
    quadrature (tests/reference), independent of epscert."""
    eps = (0.5, 1.0)
    config = CertifyConfig(sampler=sampler, sigma=0.8, steps=steps, epsilons=eps, methods=method,
                           samples=1000, error_prob=2 * BETA, backend="jax", seed=5)
    m = config.resolved[0]
    misses = {(d, e): 0 for d in ("remove", "add") for e in eps}
    for task in (ShardTask(config, m, r, 1000, stream=r) for r in range(REPS)):
        for row in mc_rows(config, m, run_shard(task), 0.0):
            if row["direction"] != "both":
                assert row["error_prob"] == pytest.approx(BETA) and row["backend"] == "jax"
                misses[row["direction"], row["epsilon"]] += row["delta_upper"] < _truth(steps, row["epsilon"],
                                                                                        row["direction"])
    limit = allowed_misses(REPS, BETA)
    assert all(v <= limit for v in misses.values()), (misses, limit)


def test_backend_choice_and_refusals():
    config = _config("naive", "auto")
    sampler = loss_sampler(config, Method.NAIVE)
    assert resolve("auto", sampler, Method.NAIVE) == ("jax" if jax_backend.gpu_visible() else "numpy")
    assert resolve("jax", sampler, Method.NAIVE) == "jax"
    with pytest.raises(ValueError, match="backend="):
        _config("naive", "cuda")
    with pytest.raises(ValueError, match="backend='jax' has no kernel for method='naive' with sampler="
                                         "'balls_and_bins_persistent'"):
        _config("naive", "jax", sampler="balls_and_bins_persistent")
    assert _config("importance_order_stats", "jax", steps=200).backend == "jax"
    assert _config("naive", "jax", sampler="poisson").backend == "jax"
    assert _config("naive", "jax").config_id != _config("naive", "numpy").config_id


def _gpu_devices():
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_devices(), reason="no GPU visible to JAX")
@pytest.mark.parametrize("method", ["naive", "importance"])
def test_cpu_and_gpu_give_the_same_losses_for_the_same_key(method):
    """threefry is platform independent: same key, same draws; the float64 losses then agree to
    round-off (transcendental functions differ in the last ulps between XLA CPU and GPU)."""
    config = _config(method, "jax", steps=1000)
    m = config.resolved[0]
    sampler = loss_sampler(config, m)
    words = stream_key_words(9, 9, 0, 0)
    out = {}
    for name, dev in (("cpu", jax.devices("cpu")[0]), ("gpu", _gpu_devices()[0])):
        with jax.default_device(dev):
            out[name] = jax_kernels.losses(sampler, m, Direction.REMOVE, words, 0, 1024)
    np.testing.assert_allclose(out["gpu"], out["cpu"], rtol=1e-12, atol=1e-12)


def test_cli_and_sweep_spec_take_the_backend():
    pytest.importorskip("apache_beam", reason="the CLI needs apache_beam")
    from pipelines import certify as certify_job
    from pipelines.spec import expand

    args = certify_job.build_parser().parse_args(["--sigma", "0.8", "--steps", "10", "--backend", "jax",
                                                  "--method", "naive", "--shards", "1"])
    assert certify_job.config_from_args(args).backend == "jax"
    configs = expand({"sigma": 0.8, "steps": 10, "epsilons": [1], "method": "naive", "backend": ["numpy", "jax"]})
    assert sorted(c.backend for c in configs) == ["jax", "numpy"]
    with pytest.raises(ValueError, match="backend"):
        expand({"sigma": 0.8, "steps": 10, "epsilons": [1], "backend": "cuda"})


def _conditional_pair(method: str, n: int, **kw) -> dict:
    extra = {"orders": "1,5,1,5,15,3", "steps": 40} if method == "conditional_order_stats" else {}
    return {backend: run_shard(plan_shards(_config(method, backend, samples=n, seed=3, **extra, **kw),
                                           Method(method))[0]) for backend in ("numpy", "jax")}


@pytest.mark.parametrize("method", ["conditional", pytest.param("conditional_order_stats", marks=pytest.mark.slow)])
def test_conditional_numpy_and_jax_agree_within_clt_limits(method):
    """6 two-sided z-tests at ALPHA_Z per case (false failure <= 6e-5 over the seeds). The values are
    in [0, T·δ_1(ε)] (REMOVE) and [0, 1] (ADD) with smooth laws: the CLT is accurate at 2^14 samples."""
    n = 2**14
    results = _conditional_pair(method, n)
    assert results["jax"].tags == ("jax:cpu:cpu",) and results["numpy"].tags == ("numpy:cpu",)
    z_crit = stats.norm.isf(ALPHA_Z / 2)
    for direction in (Direction.REMOVE, Direction.ADD):
        a, b = results["numpy"][direction], results["jax"][direction]
        assert a.sum_y != b.sum_y and a.unit_log2 == b.unit_log2 == 1126 and len(a.extra) == len(b.extra) > 0
        for i in range(len(EPS)):
            (ma, va), (mb, vb) = _mean_and_var(a, i), _mean_and_var(b, i)
            assert ma > 0 and mb > 0
            assert abs(ma - mb) <= z_crit * math.sqrt(va / n + vb / n), (method, direction, EPS[i], ma, mb)


def test_conditional_one_step_is_bit_for_bit_the_numpy_sums():
    """T = 1: nothing is drawn (R = M = 0), so both backends fold the same closed-form values and
    their exact sums (ΣY, ΣY², the truncated sums) must be equal integers, the padded block cut."""
    results = _conditional_pair("conditional", 300, steps=1)
    assert results["jax"].parts == results["numpy"].parts


@pytest.mark.slow  # 10 s (the kernel's compilation); its numpy agreement (CLT) and the refusal below stay fast
def test_conditional_same_key_same_log_sums():
    from epscert.dpsgd import jax_conditional
    from epscert.dpsgd.conditional import ConditionalSampler

    sampler = ConditionalSampler(0.7, 12, 0.25, (1, 2, 4, 8))
    words = stream_key_words(1, 2, 3, 1)
    for direction in (Direction.REMOVE, Direction.ADD):
        a = list(jax_conditional.blocks(sampler, direction, words, 70))
        b = list(jax_conditional.blocks(sampler, direction, words, 70))
        assert len(a) == 1 and a[0][0].shape == (70,) and np.all(np.isfinite(a[0][0]))
        assert np.array_equal(a[0][0], b[0][0])
        other = list(jax_conditional.blocks(sampler, direction, stream_key_words(1, 2, 4, 1), 70))
        assert not np.any(a[0][0] == other[0][0])


def test_conditional_refuses_a_log_phi_out_of_range():
    from epscert.dpsgd import jax_conditional
    from epscert.dpsgd.conditional import ConditionalSampler

    with pytest.raises(ValueError, match="log Phi"):  # b_add ~ -45 sigma: log Phi(b) ~ -1000
        jax_conditional.check_supported(ConditionalSampler(0.1, 2, 500.0))
