"""Issue-33 evidence: the REMOVE side at one participation, σ = 1.2; why 2% in 120 CPU s is out of reach.

    python -m benchmarks.matrix_remove_side [--samples N] [--sigma 1.2] [--n 2000]

Setting: n = b (one participation), 16 bands, c_i = binom(2i, i)/4^i, the pair of :mod:`epscert.matrix.pair`.
Under Q, g ~ N(0, G), x = g - v/2, L = log mean_k e^{x_k}, δ_remove(ε) = E_Q[(e^L - e^ε)_+]. The certified
REMOVE values are the loss-tilted ones (:mod:`epscert.matrix.cluster_tilt`): Y = Z̄ρκ e^{-θL} (e^L - e^ε)_+ in
[0, B̄_θ(ε)] under the order-θ cluster proposal. A certificate on values in [0, R] from N draws pays, on the upper
side, the empirical Bernstein range term 7 R log(2/β')/(3 (N - 1)) (or the KL bound's Bernoulli worst case) and
a variance term sqrt(2 V log(2/β')/N), and as much again on the lower side. Printed:

1. **The Rényi floor, by order.** Z_θ >= Z_θ^diag (G >= 0 entrywise; :mod:`benchmarks.matrix_renyi_floor`), so
   B_θ(ε) >= Z_θ^diag e^{(1-θ)ε} (θ-1)^{θ-1} θ^{-θ} for EVERY loss-tilted proposal of order θ, however drawn.
   Over θ = 2..40 the floor is least near θ = 10-11 and grows past it like the single-mode moment
   e^{v θ(θ-1)/2}: no order, drawn by any method, has a range below it.
2. **What the default order gives** (θ the Accountant's choice, 11 at σ = 1.2): from ``--samples`` draws, per ε
   on a grid around ε(1e-6) and ε(1e-8): the mean, the relative variance V/mean², the effective sample size
   (Σ Y)²/Σ Y², and the certified interval on ε(δ) from the rows' bounds (KL and empirical Bernstein at β/2
   each, the truncated KL lower bound at β, β = 0.005: 'both' at the default error_prob 0.01). Beside it the
   same from the values conditioned on the collective line (below): an unbiased variance reduction with the same
   range. Then how the draws and δ split over r, the number of clusters of the drawn tuple.
3. **Samples for 2%.** With the measured relative variance and range, the N at which the two variance terms and
   the range term of the certificate fit in a 2% interval (log δ moves by slope · 0.02 ε across it, the slope
   from the estimates on the grid; first order, the KL bound ignored), and the CPU seconds of that many REMOVE
   draws at this run's rate (one fine pass, one direction: the Accountant also runs two search passes and the
   ADD side).

The line (a measurement here, not a certificate: its rounding is not analysed). With u = G⁻¹1, the noise
splits as τ 1 + r, τ = uᵀ noise / (uᵀ G u) ~ N(0, s²), s² = 1/(1ᵀ G⁻¹ 1), r independent of τ; along the line
L = L0 + τ exactly, so E[Y | tuple, r] = Z̄ρκ e^{(1-θ)ε} K(L0 - ε) with

    K(μ) = E[(e^{(1-θ)y} - e^{-θy}) 1{y > 0}],  y ~ N(μ, s²)
         = e^{(1-θ)μ + (1-θ)²s²/2} Φ(μ/s + (1-θ)s) - e^{-θμ + θ²s²/2} Φ(μ/s - θs).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.special import log_ndtr

from benchmarks.matrix_renyi_floor import log_z_diag
from benchmarks.matrix_rivals import binomial_c_col
from epscert.bounds.empirical_bernstein import eb_ucb
from epscert.bounds.kl import kl_ucb
from epscert.bounds.truncated_lcb import truncated_lcb, truncation_levels
from epscert.config.samplers import cached_pair
from epscert.matrix import kernels as mk
from epscert.matrix.cluster_tilt import choose_order, tilt_for
from epscert.matrix.loss_tilt import log_peak, remove_tilt_log_values
from epscert.matrix.strategies import toeplitz_strategy

BANDS = 16
#: β of one direction's row (error_prob 0.01 over two directions); the UCB takes KL and EB at β/2 each
BETA = 0.005
BLOCK = 5000


def line_log_k(l0: np.ndarray, eps: float, theta: int, var_tau: float) -> np.ndarray:
    """log K(L0 - ε) (module docstring), -inf where it underflows."""
    s = math.sqrt(var_tau)
    mu = np.asarray(l0, dtype=np.float64) - eps
    t1 = (1 - theta) * mu + 0.5 * (1 - theta) ** 2 * var_tau + log_ndtr(mu / s + (1 - theta) * s)
    t2 = -theta * mu + 0.5 * theta**2 * var_tau + log_ndtr(mu / s - theta * s)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(t1), t1 + np.log(-np.expm1(np.minimum(t2 - t1, -1e-300))), -np.inf)


def certified_interval(values: np.ndarray, ranges: np.ndarray, grid: np.ndarray, delta: float):
    """(lower, upper) ε of the rows' rule on one direction's values (|ε| x N): the first ε with UCB <= δ, the
    UCB made non-increasing; the last ε below it with LCB > δ."""
    n = values.shape[1]
    ucb, lcb = [], []
    for i in range(len(grid)):
        x = values[i]
        ucb.append(min(kl_ucb(float(x.mean()), n, BETA / 2, scale=float(ranges[i])),
                       eb_ucb(float(x.mean()), float(x.var(ddof=1)), n, BETA / 2, scale=float(ranges[i]))))
        levels = truncation_levels(float(ranges[i]))
        lcb.append(truncated_lcb(np.array([np.minimum(x, lv).mean() for lv in levels]), float(ranges[i]), n, BETA,
                                 mk.FLOAT_REL))
    ucb = np.maximum.accumulate(np.array(ucb)[::-1])[::-1]
    ok = np.flatnonzero(ucb <= delta)
    upper = float(grid[ok[0]]) if ok.size else math.inf
    low = np.flatnonzero((np.array(lcb) > delta) & (grid < upper))
    return (float(grid[low[-1]]) if low.size else 0.0), upper


def draw_values(pair, tilt, grid, count, rng, u_scaled, var_tau):
    """(plain, line, cluster counts) of ``count`` draws of the order-θ proposal at every ε of ``grid``."""
    plain, line, clusters = [], [], []
    theta, w = tilt.theta, getattr(getattr(tilt, "gas", None), "w", 1)
    for start in range(0, count, BLOCK):
        m = min(BLOCK, count - start)
        noise = pair.noise(rng.standard_normal((m, pair.bins)))
        tau = noise @ u_scaled
        tuples, log_w = tilt.draw(rng, m)
        g = tilt.shifted(noise, tuples)
        log_z = tilt.log_z + log_w
        plain.append(np.exp(remove_tilt_log_values(np, g, tuples, pair.g, pair.half_diag, log_z, theta, list(grid),
                                                   shifted=True)))
        l0 = mk.log_mean_exp(np, g - pair.half_diag) - tau
        line.append(np.exp(np.array([log_z + (1 - theta) * e + line_log_k(l0, e, theta, var_tau) for e in grid])))
        ordered = np.sort(tuples, axis=1)
        clusters.append(1 + np.count_nonzero(np.diff(ordered, axis=1) >= w, axis=1))
    return np.concatenate(plain, axis=1), np.concatenate(line, axis=1), np.concatenate(clusters)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--sigma", type=float, default=1.2)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    n, sigma = args.n, args.sigma
    pair = cached_pair(toeplitz_strategy(np.array(binomial_c_col(BANDS)), n), n, sigma)
    targets = {1e-6: np.linspace(0.40, 0.50, 26), 1e-8: np.linspace(0.58, 0.82, 25)}
    all_eps = np.concatenate(list(targets.values()))
    theta = choose_order(pair, all_eps)
    tilt = tilt_for(pair, theta)
    ones = np.ones(pair.bins)
    u = np.linalg.solve(pair.g, ones)
    var_tau = 1.0 / float(u @ pair.g @ u)
    print(f"# matrix_remove_side: n = b = {n}, {BANDS} bands, σ = {sigma}, order θ = {theta} (the Accountant's), "
          f"{args.samples:,} draws, seed {args.seed}; line: s = {math.sqrt(var_tau):.4f}, "
          f"max |G u - 1| = {float(np.max(np.abs(pair.g @ u - 1))):.1e}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; CPU s are time.process_time of this process\n")
    start = time.process_time()
    plain, line, clusters = draw_values(pair, tilt, all_eps, args.samples, np.random.default_rng(args.seed),
                                        u * var_tau, var_tau)
    cpu = time.process_time() - start
    ranges = tilt.value_range(all_eps)
    log_z_floor = log_z_diag(pair.diag, 40)

    print("## 1. The Rényi floor: min over θ <= 40 of Z_θ^diag e^{(1-θ)ε}(θ-1)^{θ-1}θ^{-θ} / δ̂ (any order, any draw)\n")
    print("| δ | ε (the estimate's crossing) | δ̂ there | floor: best θ, B/δ̂ | at θ = 8, 12, 16 | drawn order's B̄/δ̂ |")
    print("|---|---|---|---|---|---|")
    at = 0
    crossings = {}
    for delta, grid in targets.items():
        sl = slice(at, at + len(grid))
        at += len(grid)
        mean = line[sl].mean(axis=1)
        i = int(np.argmin(np.abs(np.log(np.maximum(mean, 1e-300)) - math.log(delta))))
        crossings[delta] = (sl, i)
        eps, dhat = float(grid[i]), float(mean[i])
        floors = {t: log_z_floor[t] + (1 - t) * eps + log_peak(t) - math.log(dhat) for t in range(2, 41)}
        best = min(floors, key=floors.get)
        print(f"| {delta:.0e} | {eps:.3f} | {dhat:.3g} | θ = {best}: {math.exp(floors[best]):.3g} | "
              + ", ".join(f"{math.exp(min(floors[t], 700)):.2g}" for t in (8, 12, 16))
              + f" | {ranges[sl][i] / dhat:.3g} |")

    print(f"\n## 2. The order-{theta} draws ({cpu:.1f} CPU s for {args.samples:,}, plain and line together)\n")
    print("| δ | values | mean at ε | relative variance | ESS | certified ε interval | width |")
    print("|---|---|---|---|---|---|---|")
    needs = {}
    for delta, (sl, i) in crossings.items():
        grid = targets[delta]
        for name, vals in (("plain (the rows')", plain), ("line-conditioned", line)):
            v = vals[sl]
            x = v[i]
            relvar = float(x.var() / x.mean() ** 2)
            lower, upper = certified_interval(v, ranges[sl], grid, delta)
            print(f"| {delta:.0e} | {name} | {x.mean():.3g} | {relvar:.3g} | {x.sum() ** 2 / np.sum(x ** 2):.0f} | "
                  f"[{lower:.3f}, {upper:.3f}] | {upper / lower - 1:.1%} |")
            needs[(delta, name)] = (relvar, float(ranges[sl][i] / x.mean()), grid, v.mean(axis=1), i)

    sl, i = crossings[1e-6]
    x = plain[sl][i]
    print("\n| clusters r of the drawn tuple | share of draws | share of δ̂ (ε(1e-6)) |")
    print("|---|---|---|")
    for r in range(1, theta + 1):
        pick = clusters == r
        if pick.any():
            print(f"| {r} | {pick.mean():.4f} | {x[pick].sum() / x.sum():.4f} |")

    print("\n## 3. Samples for a 2% interval (both sides' variance terms and the upper range term; KL ignored)\n")
    print("| δ | values | slope d log δ/dε | log δ budget | range R/δ̂ | N | CPU s of REMOVE draws alone, this run's rate |")
    print("|---|---|---|---|---|---|---|")
    log_term = math.log(2 / (BETA / 2))
    per_sample = cpu / args.samples  # one draw serves both value kinds (the line adds one dot product)
    for (delta, name), (relvar, rng_ratio, grid, mean, i) in needs.items():
        lo, hi = max(i - 3, 0), min(i + 3, len(grid) - 1)
        slope = -(math.log(mean[hi]) - math.log(mean[lo])) / (grid[hi] - grid[lo])
        budget = math.log1p(0.02) * grid[i] * slope
        # 2 sqrt(2 relvar log/N) + 7 R log/(3N) <= budget, solved for N
        a, c = 2 * math.sqrt(2 * relvar * log_term), 7 * rng_ratio * log_term / 3
        root = (a + math.sqrt(a * a + 4 * budget * c)) / (2 * budget)
        count = root * root
        print(f"| {delta:.0e} | {name} | {slope:.1f} | {budget:.3f} | {rng_ratio:.3g} | {count:.2g} | "
              f"{count * per_sample:.0f} |")


if __name__ == "__main__":
    main()
