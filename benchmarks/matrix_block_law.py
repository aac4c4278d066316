"""Issue-33 evidence: where the block bound loses at n = b = 10^4, 64 bands, σ = 2, and what a sampled block law
would give. Estimates, not certificates.

    python -m benchmarks.matrix_block_law [--draws 1000000] [--n 10000] [--bands 64] [--sigma 2.0]

The certified upper side there is the mixture block bound (:mod:`epscert.matrix.block_bound`, steps 1'-4'): J
independent blocks (after the singular-vector split G'' ⪰ G), each block mean S_B = (1/m) Σ_k W''_k put below the
mixture of its sites' lognormals by Jensen. δ(ε) is then at most that of the mean of J i.i.d. copies of any Y with
S_B ⪯_cx Y, and Y is fixed by its stop-loss transform π(t) = E(Y - t)_+ (convex, π(0) = 1). This script draws
S_B itself (the interior block of the split, the dense m x m covariance, one Cholesky factor) and prints:

1. π(t) of the sampled S_B beside the mixture's closed form, and the Markov bounds E[S^p] (p-1)^{p-1}/(p^p t^{p-1})
   with the *sampled* moments, at a few t: the mixture's tail is what is loose (at t = 8 about 600 times the
   sampled stop-loss).
2. ε(δ) of the mean of J i.i.d. copies of the law whose stop-loss is the lower convex envelope of: (a) the
   mixture alone (the product's bound, for comparison); (b) the sampled π(t) plus 4 standard errors for t <= 8,
   the mixture beyond; (c) the same for t <= 8, beyond it the smaller of the mixture and the Markov bounds of the
   sampled moments p <= 6; (d) the empirical law of the draws (the limit of this route, a plug-in estimate). The
   convolution is the upper chain of :mod:`epscert.allocation.epoch` at the mixture's settings, the grid ending
   at t = 10^4 (the mass past it at its mean, so rows (a)-(c) are a little low at 10⁻¹⁰). None of (b)-(d) is a
   certificate: (b) leaves out the range term of a bound on π(t) from draws, (c) and (d) use sampled moments or
   the sampled tail.

3. (e) the certificate built on this (:mod:`epscert.matrix.block_law`, REMOVE only; its own blocks, 50 of 200
   at n = b = 10^4): the survival function of the block mean bounded by KL UCBs of the draws (plain draws where the
   tilted values' range κ/s^{4a} is above 1, tilted ones of order 4 and power a with values κ/M_a^4 below it) and,
   in the far tail, by Markov bounds of its exact moments of order <= 4, and convolved by the same upper chain; (f)
   its ADD side from the same plain draws (KL lower confidence bounds: a law below the block mean); (d') row (d)
   at the law's own blocks, the limit of (e) and (f).

The point: a certified law of one block would bring ε(10⁻⁶) from 0.563 to about 0.2, but only with a certified
far tail of S_B (t > 8) nearly as light as the sampled one; with the mixture's tail there, ε stays near 0.54.
Exact moments of order 6 give that tail up to 10⁻⁶ and partly beyond.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy import special  # noqa: E402

from benchmarks.matrix_rivals import binomial_c_col  # noqa: E402
from epscert.allocation.bracket import default_cells, default_shape  # noqa: E402
from epscert.allocation.cells import CellLaw, hockey_add, hockey_remove  # noqa: E402
from epscert.allocation.epoch import ChainLaw, mean_of_steps  # noqa: E402
from epscert.allocation.mixture import mixture_bracket_for  # noqa: E402
from epscert.config.samplers import cached_pair  # noqa: E402
from epscert.matrix.block_bound import block_mixtures, natural_half_width  # noqa: E402
from epscert.matrix import block_law  # noqa: E402
from epscert.matrix.block_law import BlockLawAddBound, BlockLawBound  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

DELTAS = (1e-6, 1e-8, 1e-10)
#: the t grid of the stop-loss: fine where the draws resolve it (t <= 8), then the far tail to 10^4
T_SAMPLED = np.concatenate([np.linspace(0.01, 4.0, 400), np.linspace(4.05, 8.0, 80)])
T_FAR = np.exp(np.linspace(math.log(8.1), math.log(1e4), 600))


def interior_block(gram, sigma: float, blocks: int) -> np.ndarray:
    """The middle block of the singular-vector split G'' (step 1' without the rounding allowances): G's diagonal
    block plus V Σ Vᵀ on its first h sites (the edge on its left) and U Σ Uᵀ on its last h (the edge on its right)."""
    g = gram.g0 / (sigma * sigma)
    b = g.shape[0]
    h, m = natural_half_width(gram.g0), b // blocks
    lo, hi = (blocks // 2) * m, (blocks // 2 + 1) * m
    out = g[lo:hi, lo:hi].copy()
    u_mat, sing, vt = np.linalg.svd(g[lo - h:lo, lo:lo + h])
    out[:h, :h] += (vt.T * sing) @ vt
    u_mat, sing, vt = np.linalg.svd(g[hi - h:hi, hi:hi + h])
    out[-h:, -h:] += (u_mat * sing) @ u_mat.T
    return out


def block_means(cov: np.ndarray, draws: int, seed: int = 1) -> np.ndarray:
    """``draws`` samples of S_B = mean_k exp(x_k - v_k/2), x ~ N(0, cov)."""
    factor = np.linalg.cholesky(cov)
    half = 0.5 * np.diag(cov)
    rng = np.random.default_rng(seed)
    out = np.empty(draws)
    for start in range(0, draws, 100_000):
        stop = min(draws, start + 100_000)
        x = rng.standard_normal((stop - start, cov.shape[0])) @ factor.T
        out[start:stop] = np.mean(np.exp(x - half), axis=1)
    return out


def mixture_stop_loss(t: np.ndarray, sigmas: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """π(t) of the mixture Σ_k w_k LN(mean 1, log-variance 1/σ_k²): Φ(d₁) - t Φ(d₁ - s) per component."""
    s = 1.0 / sigmas[None, :]
    d1 = (-np.log(t)[:, None] + 0.5 * s * s) / s
    return (special.ndtr(d1) - t[:, None] * special.ndtr(d1 - s)) @ weights


def moment_bound(t: np.ndarray, moments: dict[int, float]) -> np.ndarray:
    """min_p E[S^p] (p-1)^{p-1} / (p^p t^{p-1}) (Markov: (s - t)_+ <= s^p (p-1)^{p-1} / (p^p t^{p-1}))."""
    return np.min([mp * (p - 1) ** (p - 1) / (p**p * t ** (p - 1)) for p, mp in moments.items()], axis=0)


def empirical_far_tail(draws: np.ndarray) -> np.ndarray:
    """The draws' own stop-loss on ``T_FAR`` (only their largest 1000 can reach t > 8)."""
    top = np.sort(draws)[-1000:]
    return np.array([np.sum(np.maximum(top - t, 0.0)) / draws.size for t in T_FAR])


def envelope_law(t: np.ndarray, pi: np.ndarray) -> CellLaw:
    """The law whose stop-loss is the lower convex envelope of the points (0, 1), (t_j, π_j) (t ascending, π
    nonincreasing, as any bound on a stop-loss can be made by a running minimum): atoms at the hull's
    vertices, each with the change of slope (slope -1 left of 0); the mass left past the last vertex, q = -(its
    slope), at the tail's mean t_last + π_last/q (mean 1 kept; the tail's spread past 10^4 is not)."""
    x, y = np.concatenate([[0.0], t]), np.concatenate([[1.0], pi])
    hull: list[int] = []
    for k in range(x.size):
        while len(hull) >= 2 and ((y[hull[-1]] - y[hull[-2]]) * (x[k] - x[hull[-2]])
                                  >= (y[k] - y[hull[-2]]) * (x[hull[-1]] - x[hull[-2]])):
            hull.pop()
        hull.append(k)
    xs, ys = x[hull], y[hull]
    slopes = np.concatenate([[-1.0], np.diff(ys) / np.diff(xs)])
    masses = np.maximum(np.diff(slopes), 0.0)  # at the vertices but the last
    rest = -slopes[-1]
    last = xs[-1] + (ys[-1] / rest if rest > 0.0 else 0.0)
    return CellLaw(np.append(xs[:-1], last), np.append(masses, rest))


def epsilons_of(law: CellLaw, blocks: int, sigma_min: float) -> list[float]:
    """ε(δ) for each δ of ``DELTAS``: the smallest ε on a 0.001 grid where the upper chain's δ (both directions)
    of the mean of J copies of ``law`` is <= δ."""
    out = mean_of_steps(ChainLaw(law, 0.0, 0.0), blocks, "upper", cells=default_cells(sigma_min), tau=1e-18,
                        shape=default_shape(sigma_min))
    grid = np.linspace(0.0, 3.0, 3001)
    delta = np.maximum(hockey_remove(out.law, grid, "upper", out.value_rel_error),
                       hockey_add(out.law, grid, "upper", out.value_rel_error))
    return [float(grid[np.flatnonzero(delta <= d)[0]]) if np.any(delta <= d) else math.inf for d in DELTAS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1_000_000)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--bands", type=int, default=64)
    parser.add_argument("--sigma", type=float, default=2.0)
    args = parser.parse_args()
    print(f"# matrix_block_law: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; n = b = {args.n}, "
          f"{args.bands} bands, σ = {args.sigma}, {args.draws:,} block draws; one core, CPU s of time.process_time\n")
    pair = cached_pair(toeplitz_strategy(np.array(binomial_c_col(args.bands)), args.n), args.n, args.sigma)
    blocks, mixtures = block_mixtures(pair.gram, args.sigma)
    _, sig, wts = next(mix for mix in mixtures if mix[0] == "svd")
    sigmas, weights = np.array(sig), np.array(wts)
    product = [mixture_bracket_for(sig, wts, blocks).epsilon_side(d, "both", "upper") for d in DELTAS]
    start = time.process_time()
    draws = block_means(interior_block(pair.gram, args.sigma, blocks), args.draws)
    cpu = time.process_time() - start
    print(f"J = {blocks} blocks of {args.n // blocks}; sampled S_B: mean {draws.mean():.5f}, variance "
          f"{draws.var():.4f}, largest {draws.max():.2f} ({cpu:.1f} CPU s)\n")
    moments = {p: float(np.mean(draws**p)) for p in range(2, 7)}
    stop_loss = np.array([np.mean(np.maximum(draws - t, 0.0)) for t in T_SAMPLED])
    error = np.array([np.std(np.maximum(draws - t, 0.0)) for t in T_SAMPLED]) / math.sqrt(draws.size)
    mix = mixture_stop_loss(T_SAMPLED, sigmas, weights)
    print("| t | sampled π(t) | mixture π(t) (step 3') | Markov, sampled moments p <= 6 |")
    print("|---|---|---|---|")
    for t in (1.0, 2.0, 4.0, 8.0, 12.0):
        one = np.array([t])
        print(f"| {t:g} | {np.mean(np.maximum(draws - t, 0.0)):.3g} | "
              f"{mixture_stop_loss(one, sigmas, weights)[0]:.3g} | {moment_bound(one, moments)[0]:.3g} |")
    far_mix = mixture_stop_loss(T_FAR, sigmas, weights)
    far_moment = np.minimum(far_mix, moment_bound(T_FAR, moments))
    ucb = np.minimum(stop_loss + 4.0 * error, mix)
    tail = empirical_far_tail(draws)
    rows = (
        ("(a) the mixture alone", mix, far_mix),
        ("(b) sampled π + 4 s.e. to t = 8, the mixture beyond", ucb, far_mix),
        ("(c) (b), sampled moments p <= 6 beyond", ucb, far_moment),
        ("(d) the empirical law of S_B (the route's limit)", stop_loss, tail),
    )
    print("\n| J i.i.d. copies of the envelope of | " + " | ".join(f"ε({d:.0e})" for d in DELTAS) + " |")
    print("|---|" + "---|" * len(DELTAS))
    print("| the product's certified mixture bracket | " + " | ".join(f"{e:.3f}" for e in product) + " |")
    for name, near, far in rows:
        law = envelope_law(np.concatenate([T_SAMPLED, T_FAR]), np.concatenate([near, far]))
        eps = epsilons_of(law, blocks, float(sigmas.min()))
        print(f"| {name} | " + " | ".join(f"{e:.3f}" for e in eps) + " |")
    law_blocks = block_law.dominating_law(pair)[0]
    if law_blocks != blocks:
        start = time.process_time()
        own = block_means(interior_block(pair.gram, args.sigma, law_blocks), args.draws)
        near = np.array([np.mean(np.maximum(own - t, 0.0)) for t in T_SAMPLED])
        law = envelope_law(np.concatenate([T_SAMPLED, T_FAR]), np.concatenate([near, empirical_far_tail(own)]))
        eps = epsilons_of(law, law_blocks, float(sigmas.min()))
        print(f"| (d') (d) at the law's own blocks, J = {law_blocks} of {args.n // law_blocks} "
              f"({time.process_time() - start:.1f} CPU s) | " + " | ".join(f"{e:.3f}" for e in eps) + " |")
    start = time.process_time()
    bound = BlockLawBound(pair, 100_000, 0, 0.0025)  # the Accountant's default samples
    grid = np.linspace(0.0, 3.0, 3001)
    upper = bound.upper(grid)
    certified = [float(grid[np.flatnonzero(upper <= d)[0]]) if np.any(upper <= d) else math.inf for d in DELTAS]
    power = block_law.tilt_plan(pair)[0].power
    print(f"| (e) certified, REMOVE only: epscert.matrix.block_law (J = {bound.blocks}, {bound.draws:,} draws, tilt "
          f"power {power:g}, β = 0.0025, {time.process_time() - start:.1f} CPU s) | "
          + " | ".join(f"{e:.3f}" for e in certified) + " |")
    start = time.process_time()
    add = BlockLawAddBound(pair, 100_000, 0, 0.0025 / 2)  # the rows' share for ADD (β/4 of the run's 0.005)
    upper = add.upper(grid)
    certified = [float(grid[np.flatnonzero(upper <= d)[0]]) if np.any(upper <= d) else math.inf for d in DELTAS]
    print(f"| (f) certified, ADD: epscert.matrix.block_law.BlockLawAddBound (the same plain draws, β = 0.00125, "
          f"{time.process_time() - start:.1f} CPU s more) | " + " | ".join(f"{e:.3f}" for e in certified) + " |")


if __name__ == "__main__":
    main()
