"""The matrix mechanism on the JAX backend (CPU): same arithmetic as numpy, its own stream.

Skipped without JAX. Statistical checks have a fixed seed and state their false-failure probability.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

jax = pytest.importorskip("jax", reason="JAX is not installed: pip install -e '.[jax]' to test the JAX backend")

import epscert  # noqa: E402
from epscert.matrix import kernels as mk  # noqa: E402
from epscert.matrix import values as mv  # noqa: E402
from epscert.matrix import jax_kernels as jax_matrix  # noqa: E402
from epscert.matrix.pair import MatrixPair  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

C_COL = special.comb(2 * np.arange(8), np.arange(8)) / 4.0 ** np.arange(8)


def _pair(sigma=2.0, n=400, b=20):
    return MatrixPair(toeplitz_strategy(C_COL, n).gram(b), sigma)


@pytest.mark.parametrize("sigma,eps,samples", [  # the small-σ case (the colder start) in the fast suite
    pytest.param(2.0, [2.0, 1.0, 1.5, 1.5, 3.0], 64, marks=pytest.mark.slow),
    # small σ (mode variances near 20, neighbours far above B at the cold start) and a wide grid (at ε = 0.02
    # the far constant is near B): the JAX roots start below every neighbour's crossing and scale by B
    (0.35, [0.02, 12.0, 0.5, 30.0, 3.0], 256),
])
def test_the_same_inputs_give_the_same_values_on_both_namespaces(sigma, eps, samples):
    """The kernels are one source: on identical inputs numpy and jax.numpy agree to float64 round-off (JAX's
    Newton differs in its start and its scaling only, so the roots, and the values, agree to rounding)."""
    pair = _pair(sigma)
    rng = np.random.default_rng(0)
    z = rng.standard_normal((samples, pair.bins))
    g = pair.noise(z)
    sampler = mv.MatrixValueSampler(pair, "conditional", min(eps))
    lines = mv.stratified_lines(rng.integers(0, pair.bins, size=samples), pair.bins, sampler.lines_per_sample)
    consts = (sampler.lines.idx, sampler.lines.d, sampler.lines.mask, sampler.lines.self_or_near, sampler.lines.v)
    # unsorted, with a tie: JAX runs the grid sorted, each Newton started at the root of its neighbour
    host = mv.remove_line_log_values(np, mv.NumpySpecial, g, lines, consts, pair.half_diag,
                                     [pair.log_bins + e for e in eps], sampler._top_k)
    with jax.enable_x64(True):
        jnp = jax.numpy
        remove = jax.jit(lambda g_, l_: mv.remove_line_log_values(
            jnp, jax_matrix.JaxSpecial, g_, l_, tuple(jnp.asarray(c) for c in consts), jnp.asarray(pair.half_diag),
            [pair.log_bins + e for e in eps], lambda x: jax.lax.top_k(x, sampler.lines.top)))
        dev = remove(jnp.asarray(g), jnp.asarray(lines))
        add_host = mv.add_line_log_values(np, mv.NumpySpecial, g, sampler.d_mean, pair.half_diag, sampler.var_u,
                                          pair.log_bins, eps)
        add_dev = jax.jit(lambda g_: mv.add_line_log_values(
            jnp, jax_matrix.JaxSpecial, g_, jnp.asarray(sampler.d_mean), jnp.asarray(pair.half_diag), sampler.var_u,
            pair.log_bins, eps))(jnp.asarray(g))
        grouped_dev = jax.jit(lambda g_: mv.add_line_log_values(
            jnp, jax_matrix.JaxSpecial, g_, jnp.asarray(sampler.d_mean), jnp.asarray(pair.half_diag), sampler.var_u,
            pair.log_bins, eps, tuple(jnp.asarray(x) for x in sampler.d_groups)))(jnp.asarray(g))
        loss_dev = mk.naive_losses(jnp, jnp.asarray(g), jnp.asarray(-pair.half_diag), False)
    np.testing.assert_allclose(np.exp(np.asarray(dev)), np.exp(host), rtol=1e-9, atol=0)
    np.testing.assert_allclose(np.exp(np.asarray(add_dev)), np.exp(add_host), rtol=1e-9, atol=0)
    # modes grouped by their slope along the line (fewer columns per ε step): the same values
    grouped = mv.add_line_log_values(np, mv.NumpySpecial, g, sampler.d_mean, pair.half_diag, sampler.var_u,
                                     pair.log_bins, eps, sampler.d_groups)
    assert sampler.d_groups[0].size < pair.bins
    np.testing.assert_allclose(np.exp(grouped), np.exp(add_host), rtol=1e-9, atol=0)
    np.testing.assert_allclose(np.exp(np.asarray(grouped_dev)), np.exp(add_host), rtol=1e-9, atol=0)
    np.testing.assert_allclose(np.asarray(loss_dev), mk.naive_losses(np, g, -pair.half_diag, False), rtol=1e-12)


@pytest.mark.parametrize("method", [pytest.param("importance", marks=pytest.mark.slow),
                                    pytest.param("conditional", marks=pytest.mark.slow), "tilted"])
def test_value_kernels_do_not_depend_on_the_grid_order(method):
    """The kernels run the grid sorted (warm-started roots): a permuted grid gives the permuted rows, bit for bit."""
    from epscert.config import Direction  # noqa: PLC0415
    from epscert.matrix.loss_tilt import choose_order  # noqa: PLC0415

    pair = _pair()
    grid = (1.0, 1.25, 1.5, 2.0, 3.0)
    perm = [3, 0, 4, 2, 1]
    sampler = mv.MatrixValueSampler(pair, method, 1.0, order=choose_order(pair, grid) if method == "tilted" else None)
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.array([5, 6], dtype=np.uint32), impl="threefry2x32")
        for direction in (Direction.REMOVE, Direction.ADD):
            _, kernel = jax_matrix.block_kernel(sampler, direction)
            rows = np.asarray(kernel(base, 0, jax.numpy.asarray(grid)))
            permuted = np.asarray(kernel(base, 0, jax.numpy.asarray([grid[i] for i in perm])))
            np.testing.assert_array_equal(permuted, rows[perm])


@pytest.mark.parametrize("method", ["naive", "tilted", pytest.param("importance", marks=pytest.mark.slow),
                                    pytest.param("conditional", marks=pytest.mark.slow)])
def test_jax_and_numpy_agree_within_clt(method):
    """Different streams, same law: |difference| <= 4.5 combined SE for 8 statistics per method.
    False-failure probability <= 8 * 2 Φ(-4.5) < 6e-5."""
    st = toeplitz_strategy(C_COL, 400)
    kw = dict(sampler="balls_and_bins_persistent", sigma=2.0, steps=20, epsilons=[1.0, 2.0], method=method,
              samples=3000, strategy=st)
    rows = {b: [r for r in epscert.certify(backend=b, **kw).to_pylist() if r["direction"] != "both"]
            for b in ("numpy", "jax")}
    for a, j in zip(rows["numpy"], rows["jax"]):
        assert (a["direction"], a["epsilon"]) == (j["direction"], j["epsilon"])
        assert j["backend"] == "jax" and a["backend"] == "numpy"
        se = np.hypot(a["std_error"], j["std_error"])
        assert abs(a["delta"] - j["delta"]) <= 4.5 * se + 1e-12, (a, j)


def test_jax_rows_are_deterministic_and_refuse_order_stats():
    kw = dict(sampler="balls_and_bins_persistent", sigma=2.0, steps=20, epsilons=[1.0, 2.0], method="naive",
              samples=3000, strategy=toeplitz_strategy(C_COL, 400), backend="jax")
    first = epscert.certify(**kw).column("delta").to_pylist()
    assert epscert.certify(**kw).column("delta").to_pylist() == first
    with pytest.raises(ValueError, match="matrix mechanism"):
        epscert.certify(**{**kw, "method": "order_stats"})


SLOW_JAX_LAYOUT = ("importance", "conditional")


@pytest.mark.parametrize("backend, method", [  # every method on numpy, two on JAX in the fast suite (all with slow)
    pytest.param(backend, method, marks=(pytest.mark.slow,) if backend == "jax" and method in SLOW_JAX_LAYOUT else ())
    for method in ("naive", "importance", "conditional", "tilted") for backend in ("numpy", "jax")])
def test_matrix_rows_do_not_depend_on_the_shard_layout(backend, method):
    """A shard is a range of the stream (SPEC §10): 1, 2 and 5 shards of a matrix run give the same rows
    (blocks split between shards included: 700 samples in one masked block of jax_backend.fixed_block_size)."""
    kw = dict(sampler="balls_and_bins_persistent", sigma=2.0, steps=4, epsilons=[1.0], method=method,
              samples=700, strategy=toeplitz_strategy(C_COL, 10), backend=backend, seed=5)
    one, two, five = (epscert.certify(shards=s, **kw).drop(["wall_seconds"]) for s in (1, 2, 5))
    assert one.equals(two) and one.equals(five)
    assert set(one.column("samples").to_pylist()) == {700}


def test_auto_backend_is_decided_for_matrix_value_estimators():
    """backends.resolved_here builds a matrix mechanism's value samplers (a local sweep with backend: auto
    called the DP-SGD conditional sampler and failed)."""
    from epscert.montecarlo.backends import resolved_here  # noqa: PLC0415
    from epscert.config import CertifyConfig  # noqa: PLC0415

    for method in ("conditional", "importance", "naive", "tilted"):
        config = CertifyConfig("balls_and_bins_persistent", 2.0, 4, (1.0,), methods=(method,), samples=100,
                               strategy=toeplitz_strategy(C_COL, 10), backend="auto")
        assert resolved_here(config) in ("numpy", "jax")


def test_a_jax_value_grid_beyond_one_pass_is_refused():
    grid = [i / 1000 for i in range(1001)]
    with pytest.raises(ValueError, match="at most 1000 values of epsilon"):
        epscert.certify(sampler="balls_and_bins_persistent", sigma=2.0, steps=4, epsilons=grid, method="conditional",
                        samples=100, strategy=toeplitz_strategy(C_COL, 10), backend="jax")


@pytest.mark.parametrize("method", ["naive", pytest.param("tilted", marks=pytest.mark.slow),
                                    pytest.param("importance", marks=pytest.mark.slow),
                                    pytest.param("conditional", marks=pytest.mark.slow)])
def test_a_second_call_with_another_sample_count_compiles_nothing(method):
    """One compile per configuration (issue 34): the block shape does not follow the sample count and the ε grid
    is an argument of the kernels, so after a first call (which compiles: checked, so the test can fail) a
    call with another sample count, and one with another grid of the same length, log no XLA compile."""
    events: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(lambda name, _secs, **_kw: events.append(name))
    kw = dict(sampler="balls_and_bins_persistent", sigma=2.0, steps=20, method=method, backend="jax",
              strategy=toeplitz_strategy(C_COL, 200), direction="both", seed=11)
    compiles = "/jax/core/compile/backend_compile_duration"
    epscert.certify(samples=500, epsilons=[1.0, 2.0], **kw)
    assert compiles in events
    events.clear()
    epscert.certify(samples=1700, epsilons=[1.0, 2.0], **kw)
    epscert.certify(samples=900, epsilons=[1.0, 3.0], **kw)
    assert compiles not in events, events
