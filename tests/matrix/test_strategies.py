"""Strategies C and the Gram matrix of their modes, against the explicit matrix (issue 23, item 4).

Independent values: the n x n matrix C built entry by entry here (not by ``Strategy.matrix``), the
modes m_j = C x_j as matrix-vector products with the participation vectors x_j, and G0 = Mᵀ M.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import epscert
from epscert.matrix.pair import MatrixPair
from epscert.matrix.strategies import MAX_BANDS, MAX_DENSE_ITERATIONS, MAX_ITERATIONS, dense_strategy, toeplitz_strategy

REL = 1e-12


def explicit_toeplitz(c_col, n: int) -> np.ndarray:
    """C_{t,u} = c[t - u] for 0 <= t - u < len(c), entry by entry."""
    c = np.asarray(c_col, dtype=np.float64)
    out = np.zeros((n, n))
    for t in range(n):
        for u in range(max(0, t - c.size + 1), t + 1):
            out[t, u] = c[t - u]
    return out


def explicit_gram(matrix: np.ndarray, b: int) -> np.ndarray:
    """G0 = Mᵀ M with column j of M the mode C x_j, x_j = 1{t ≡ j (mod b)}."""
    n = matrix.shape[0]
    x = np.zeros((n, b))
    x[np.arange(n), np.arange(n) % b] = 1.0
    modes = matrix @ x
    return modes.T @ modes


def random_cases(count: int, seed: int):
    """(n, b, c_col) with b not dividing n and p > b among them (the draws are fixed by the seed)."""
    rng = np.random.default_rng(seed)
    cases = [(23, 5, rng.uniform(0.1, 1.0, 8)),  # p > b, 5 does not divide 23
             (17, 17, rng.uniform(0.0, 1.0, 3)),  # one cycle
             (30, 1, rng.uniform(0.0, 1.0, 4)),  # one bin
             (12, 7, rng.uniform(0.0, 1.0, 40))]  # bands past n
    while len(cases) < count:
        n = int(rng.integers(2, 60))
        b = int(rng.integers(1, n + 1))
        p = int(rng.integers(1, 2 * b + 3))
        col = rng.uniform(0.0, 2.0, p) * (rng.random(p) < 0.8)
        col[0] = max(col[0], 0.05)
        cases.append((n, b, col))
    return cases


CASES = random_cases(30, seed=23)


def test_cases_cover_the_edges():
    assert any(n % b for n, b, _ in CASES)
    assert any(len(c) > b for _, b, c in CASES)
    assert any(b == 1 for _, b, _ in CASES) and any(b == n for n, b, _ in CASES)


@pytest.mark.parametrize("n,b,c_col", CASES, ids=[f"n{n}-b{b}-p{len(c)}" for n, b, c in CASES])
def test_toeplitz_gram_is_the_gram_of_the_explicit_modes(n, b, c_col):
    strategy = toeplitz_strategy(c_col, n)
    c = explicit_toeplitz(c_col[:n], n)
    np.testing.assert_array_equal(strategy.matrix(), c)
    want = explicit_gram(c, b)
    gram = strategy.gram(b)
    np.testing.assert_allclose(gram.g0, want, rtol=REL, atol=REL * np.abs(want).max())
    assert gram.counts.tolist() == [len(range(j, n, b)) for j in range(b)]


@pytest.mark.parametrize("n,b,c_col", CASES[:10], ids=[f"n{n}-b{b}-p{len(c)}" for n, b, c in CASES[:10]])
def test_dense_path_matches_the_explicit_modes(tmp_path, n, b, c_col):
    """A dense file of the Toeplitz matrix, and of a non-Toeplitz lower-triangular matrix."""
    rng = np.random.default_rng(n * 1000 + b)
    for name, matrix in (("toeplitz", explicit_toeplitz(c_col[:n], n)),
                         ("general", np.tril(rng.uniform(0.0, 1.0, (n, n))))):
        path = tmp_path / f"{name}.npy"
        np.save(path, matrix)
        strategy = dense_strategy(path)
        assert strategy.iterations == n and strategy.kind == "dense"
        want = explicit_gram(matrix, b)
        np.testing.assert_allclose(strategy.gram(b).g0, want, rtol=REL, atol=REL * np.abs(want).max())
        if name == "toeplitz":
            np.testing.assert_allclose(strategy.gram(b).g0, toeplitz_strategy(c_col, n).gram(b).g0,
                                       rtol=REL, atol=REL * np.abs(want).max())


def dense_factor(pair: MatrixPair, b: int) -> np.ndarray:
    """The matrix F with g = F z (the sampler's factor, through the shared kernel, applied to the unit
    vectors): F Fᵀ must be G."""
    return pair.noise(np.eye(b)).T


@pytest.mark.parametrize("n,b,bands,kind", [(1200, 600, 4, "band"), (1043, 520, 3, "band"), (90, 30, 12, "dense"),
                                            (100, 10, 1, "diag"), (64, 64, 7, "dense"), (105, 10, 1, "diag")])
def test_factor_reproduces_the_gram_matrix(n, b, bands, kind):
    rng = np.random.default_rng(b)
    strategy = toeplitz_strategy(rng.uniform(0.2, 1.0, bands), n)
    sigma = 1.7
    pair = MatrixPair(strategy.gram(b), sigma)
    assert pair.factor.kind == kind
    g = explicit_gram(explicit_toeplitz(strategy.c_col, n), b) / sigma**2
    f = dense_factor(pair, b)
    np.testing.assert_allclose(f @ f.T, g, rtol=0, atol=REL * np.abs(g).max())


@pytest.mark.parametrize("b,bands", [(24, 3), (24, 30)])
def test_factor_samples_have_covariance_g(b, bands):
    """Sample covariance of 200 000 draws g = F z against G, entry by entry.

    Each entry's error is about N(0, (G_ii G_jj + G_ij²)/N) (Gaussian fourth moments); a bound of
    5.5 standard deviations on each of the b(b+1)/2 = 300 entries fails by chance with probability
    <= 300 x 3.8e-8 ≈ 1.1e-5 (union bound, CLT approximation at N = 2e5)."""
    rng = np.random.default_rng(7)
    strategy = toeplitz_strategy(rng.uniform(0.2, 1.0, bands), 200)
    gram = strategy.gram(b)
    g = gram.scaled(1.3)
    samples = 200_000
    draws = MatrixPair(gram, 1.3).noise(rng.standard_normal((samples, b)))
    cov = draws.T @ draws / samples  # mean zero is known
    d = np.diag(g)
    sd = np.sqrt((np.outer(d, d) + g * g) / samples)
    assert np.max(np.abs(cov - g) / sd) < 5.5


# ---------------------------------------------------------------------------------------------
# Bad input is refused before any work, naming the field and the value


def save(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return path


@pytest.mark.parametrize("c_col,words", [
    ([1.0, -0.5], ["c_col", "c_col[1]=-0.5", ">= 0"]),
    ([1.0, float("nan")], ["c_col", "c_col[1]=nan", "finite"]),
    ([float("inf")], ["c_col", "finite"]),
    ([0.0, 0.0], ["c_col", "all zeros"]),
    ([], ["c_col", "non-empty"]),
    ([[1.0, 0.5]], ["c_col", "1-D"]),
    ("1, x", ["c_col", "numbers"]),
    (np.ones(MAX_BANDS + 1), ["c_col", str(MAX_BANDS)]),
])
def test_bad_c_col_is_refused(c_col, words):
    with pytest.raises(ValueError) as err:
        toeplitz_strategy(c_col, 100)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


@pytest.mark.parametrize("iterations,words", [(0, ["iterations", ">= 1", "iterations=0"]),
                                              (2.5, ["iterations", "2.5"]),
                                              (MAX_ITERATIONS + 1, ["iterations", str(MAX_ITERATIONS)])])
def test_bad_iterations_are_refused(iterations, words):
    with pytest.raises(ValueError) as err:
        toeplitz_strategy([1.0, 0.5], iterations)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_bad_dense_files_are_refused(tmp_path):
    good = np.tril(np.ones((4, 4)))
    upper = good.copy()
    upper[0, 2] = 0.5
    negative = good.copy()
    negative[3, 1] = -1.0
    nan = good.copy()
    nan[2, 2] = np.nan
    cases = [
        (save(tmp_path, "upper.npy", upper), ["lower-triangular", "C[0,2]=0.5"]),
        (save(tmp_path, "negative.npy", negative), [">= 0", "C[3,1]=-1.0"]),
        (save(tmp_path, "nan.npy", nan), ["finite", "C[2,2]=nan"]),
        (save(tmp_path, "rect.npy", np.zeros((3, 4))), ["square", "(3, 4)"]),
        (save(tmp_path, "vector.npy", np.ones(4)), ["square", "(4,)"]),
        (save(tmp_path, "zeros.npy", np.zeros((3, 3))), ["positive entry"]),
        (save(tmp_path, "text.npy", np.array([["a", "b"], ["c", "d"]])), ["real numbers", "dtype"]),
        (tmp_path / "missing.npy", ["not readable", "missing.npy"]),
    ]
    txt = tmp_path / "matrix.txt"
    np.savetxt(txt, good)
    cases.append((txt, [".npy", "matrix.txt"]))
    for path, words in cases:
        with pytest.raises(ValueError) as err:
            dense_strategy(path)
        for word in words:
            assert word in str(err.value), (path.name, word, str(err.value))
        assert str(path) in str(err.value) or path.name in str(err.value)


def test_a_too_large_dense_file_is_refused_before_it_is_read(tmp_path):
    """A (MAX+1)² uint8 file, written sparse: only its header is read before the refusal."""
    n = MAX_DENSE_ITERATIONS + 1
    path = tmp_path / "big.npy"
    big = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(n, n))
    del big
    with pytest.raises(ValueError) as err:
        dense_strategy(path)
    assert f"{n} x {n}" in str(err.value) and str(MAX_DENSE_ITERATIONS) in str(err.value)


def test_dense_iterations_must_match_the_file(tmp_path):
    path = save(tmp_path, "c.npy", np.tril(np.ones((5, 5))))
    with pytest.raises(ValueError, match=r"iterations must match .* iterations=6, matrix size=5"):
        dense_strategy(path, iterations=6)


@pytest.mark.parametrize("kwargs,words", [
    (dict(steps=41), ["steps", "<= iterations=40", "steps=41"]),
    (dict(sampler="balls_and_bins"), ["balls_and_bins_persistent", "sampler='balls_and_bins'"]),
    (dict(epochs=3), ["epochs", "ceil(iterations/steps) = 4", "epochs=3"]),
    (dict(method="order_stats"), ["method='order_stats'", "matrix mechanism"]),
    (dict(method="exact"), ["exact", "steps=10"]),
    (dict(method="pld_upper"), ["bracket_upper", "C = c*I"]),
    (dict(strategy=[1.0, 0.5]), ["strategy must be", "toeplitz_strategy"]),
])
def test_certify_refuses_bad_matrix_configurations(kwargs, words):
    args = dict(sampler="balls_and_bins_persistent", sigma=1.0, steps=10, epsilons=[1.0], samples=100,
                strategy=toeplitz_strategy([1.0, 0.5], 40))
    args.update(kwargs)
    with pytest.raises(ValueError) as err:
        epscert.certify(**args)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_a_strategy_never_certifies_a_file_changed_after_it_was_built(tmp_path):
    """Rows carry the strategy's sha256; a file rewritten after the Strategy was built (or different on
    a Beam worker) must be refused (ValueError naming the change), never silently used."""
    path = save(tmp_path, "c.npy", np.tril(np.ones((5, 5))))
    first = dense_strategy(path)
    np.save(path, np.tril(2.0 * np.ones((5, 5))))
    second = dense_strategy(path)
    assert first.sha256 != second.sha256
    assert math.isclose(second.gram(1).g0[0, 0], 220.0, rel_tol=1e-12)  # ||C 1||² = ||2 (1, 2, .., 5)||² = 4 x 55
    try:
        g0 = first.gram(1).g0[0, 0]
    except ValueError as err:
        assert "changed" in str(err)
    else:
        assert math.isclose(g0, 55.0, rel_tol=1e-12), f"first strategy's Gram is {g0}, from the new file"
