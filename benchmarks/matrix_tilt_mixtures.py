"""Issue-33 evidence at n = b = 2000, σ = 1.2 (one participation, 16 bands): two routes past the loss tilt, measured.

    python -m benchmarks.matrix_tilt_mixtures [--draws 100000] [--seed 0]

Notation of :mod:`epscert.matrix.cluster_tilt`: under Q, g ~ N(0, G), x_k = g_k - G_kk/2, L = log((1/b) Σ_k e^{x_k}),
h = (e^L - e^ε)_+, δ_remove(ε) = E_Q[h]. The certified values there are Y = Z̄ ρκ e^{-θL} h in [0, B̄_θ(ε)].

1. Mixtures of orders. A proposal Σ_θ λ_θ Q_θ has density Σ_θ λ_θ e^{θL}/Z_θ against Q, a function of L only, so its
   values h/(Σ_θ λ_θ e^{θL}/Z_θ) have the range R = min over polynomials P(u) = Σ_θ a_θ u^θ (a_θ >= 0) with
   P(e^ℓ) >= e^ℓ - e^ε for every ℓ of Σ_θ a_θ Z_θ (λ_θ = a_θ Z_θ / R). That is a linear programme; solved here on a
   grid of ℓ (a relaxation: its optimum is at most the true one) with the cluster proposal's Z̄_θ for the orders
   above the tables'. Printed: R/δ against the best single order's B̄_θ/δ.

2. Multiple importance sampling. Draws from λ_A (the order-θ cluster proposal) + λ_B (cluster shifts) + λ_C (bulk
   shifts), where a cluster shift is g = noise + s G u_k (u_k the large-deviation pattern u* of an ε-crossing
   centred at mode k, s in {0.9, 1, 1.1}, k uniform) and a bulk shift g = noise + t G 1 (t in {0.02, 0.03, 0.04}).
   On the joint space (tuple, g), with the tuple of a shift draw drawn given g from the tilt's own conditional law
   (θ indices i.i.d. with probabilities e^{x_k}/Σ e^{x}), the weight of every draw is

       Y = h / (λ_A / W_A + λ_B r_B(g) + λ_C r_C(g)),     W_A = Z̄ ρκ e^{-θL},  r = dR/dQ (Gaussian shifts),

   unbiased for δ_remove, and Y <= W_A h / λ_A <= B̄_θ / λ_A: the proven range only grows. Printed: the mean, the
   relative variance Var(Y)/E[Y]^2 and the largest value seen over the mean, for the tilt alone (λ_A = 1) and for
   the mixture, at the ε of δ ≈ 10⁻⁶ and 10⁻⁸.

3. The bounds those values give (β = 0.005 a side, as the Accountant's REMOVE rows): the rows' UCB (the smaller of
   KL-Chernoff and empirical Bernstein at the proven range, β/2 each), a truncated UCB (at a level τ = B 4^{-k}, the
   empirical Bernstein bound of min(Y, τ) at range τ plus the KL bound of (Y - τ)_+ at range B - τ, the best of
   k = 1..8 at β/16 each) and the rows' LCB (:func:`epscert.bounds.truncated_lcb.truncated_lcb`), each over the mean.

A Bernstein UCB from N values in [0, R] with relative variance V lies about sqrt(2 V log(1/α)/N) + 7 R log(1/α)/(3N δ)
above δ (relative). Its log log(UCB/LCB) must stay near 0.2 (1e-6) and 0.4 (1e-8) for 2% in ε (the slopes of
log δ there, about 25 and 30 per unit of ε). Nothing is certified here: the figures are evidence for the issue's
note. One core, numpy, dense G (2000 x 2000).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy.optimize import linprog, minimize  # noqa: E402
from scipy.special import gammaln, logsumexp  # noqa: E402

from epscert.bounds.empirical_bernstein import eb_ucb  # noqa: E402
from epscert.bounds.kl import kl_ucb  # noqa: E402
from epscert.bounds.truncated_lcb import truncated_lcb, truncation_levels  # noqa: E402
from epscert.config.samplers import cached_pair  # noqa: E402
from epscert.matrix.cluster_tilt import cluster_order_range, tilt_for  # noqa: E402
from epscert.matrix.loss_tilt import max_order  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

from benchmarks.matrix_rivals import binomial_c_col  # noqa: E402

#: (ε, δ(ε) there): the tilt's own means at 10^5 draws (n = b = 2000, σ = 1.2; the production log's crossings).
POINTS = ((0.44, 1.18e-6), (0.68, 1.0e-8))
SHIFT_SCALES = (0.9, 1.0, 1.1)
BULK_SHIFTS = (0.02, 0.03, 0.04)
WEIGHTS = (0.7, 0.15, 0.15)  # λ_A, λ_B, λ_C
#: The failure probability of each side (the REMOVE share of the Accountant's error_prob = 0.01).
BETA = 0.005
#: Levels B·4^-k, k = 1..TRUNCATED, of the truncated UCB (part 3).
WINDOW = 81  # the pattern's support
TRUNCATED = 8


def log_range(log_z: float, theta: int, eps: float) -> float:
    return log_z + (1 - theta) * eps + (theta - 1) * math.log(theta - 1) - theta * math.log(theta)


def order_lp(log_zs: dict[int, float], eps: float) -> float:
    """The grid relaxation of part 1: min Σ_θ b_θ s.t. Σ_θ b_θ e^{θℓ - log Z_θ} >= e^ℓ - e^ε on ℓ - ε in (0, 1.5]."""
    thetas = np.array(sorted(log_zs))
    ell = eps + np.linspace(1e-3, 1.5, 600)
    rows = np.exp(thetas[None, :] * ell[:, None] - np.array([log_zs[t] for t in thetas])[None, :])
    rows /= (np.exp(ell) - math.exp(eps))[:, None]
    res = linprog(np.ones(thetas.size), A_ub=-rows, b_ub=-np.ones(ell.size), bounds=[(0, None)] * thetas.size,
                  method="highs")
    if res.status != 0:
        raise RuntimeError(f"the order LP failed: {res.message}")
    return float(res.fun)


def crossing_pattern(g: np.ndarray, eps: float) -> np.ndarray:
    """u* of part 2: min u^T G u / 2 over u on a window at the centre with (1/b) Σ_k e^{(Gu)_k - G_kk/2} >= e^ε."""
    b = g.shape[0]
    idx = np.arange(b // 2 - WINDOW // 2, b // 2 + WINDOW // 2 + 1)
    sub = g[np.ix_(idx, idx)]
    half = np.diag(g)[idx] / 2

    def excess(u):
        return logsumexp(np.concatenate([sub @ u - half, [math.log(b - WINDOW)]])) - math.log(b) - eps

    start = np.zeros(WINDOW)
    start[WINDOW // 2] = 6.0
    res = minimize(lambda u: 0.5 * u @ sub @ u, start, constraints=[{"type": "ineq", "fun": excess}], method="SLSQP",
                   options=dict(maxiter=500))
    return res.x


def log_kappa(tuples: np.ndarray, b: int, w: int) -> np.ndarray:
    """log κ of :mod:`epscert.matrix.cluster_tilt` for any tuples: clusters of sorted indices less than w apart."""
    t = np.sort(tuples, axis=1)
    gaps = np.diff(t, axis=1)
    new = gaps >= w
    r = 1 + new.sum(axis=1)
    spans = (t[:, -1] - t[:, 0]) - np.where(new, gaps, 0).sum(axis=1)
    slack = b - 1 - (spans + w * (r - 1))

    def log_comb(n, k):
        return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)

    return np.where(slack >= 0, log_comb(np.maximum(slack, 0) + r, r), -np.inf) - log_comb(b - 1 - w * (r - 1) + r, r)


def shift_patterns(pair, pattern: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(U, G U^T rows, u_k^T G u_k): the pattern centred at every mode k (cut at the ends), its shifts and their
    quadratic forms (set-up, outside the timed draws)."""
    b, h = pair.bins, pattern.size // 2
    u = np.zeros((b, b))
    for k in range(b):
        lo, hi = max(0, k - h), min(b, k + h + 1)
        u[k, lo:hi] = pattern[lo - (k - h): hi - (k - h)]
    gu = u @ pair.g
    return u, gu, np.einsum("ij,ij->i", gu, u)


def mixture_values(pair, tilt, shifts, weights, eps_list, draws: int, seed: int) -> dict:
    """Part 2's values at each ε (a dict of arrays), from ``draws`` draws on ``seed`` (``shifts``:
    :func:`shift_patterns`). ``tilt`` is the cluster proposal (its ρ, κ and window w)."""
    g_mat, b, theta, w = pair.g, pair.bins, tilt.theta, tilt.gas.w
    half = pair.half_diag
    lam_a, lam_b, lam_c = weights
    u, gu, quad = shifts
    row_sums = g_mat.sum(axis=1)
    total = float(row_sums.sum())
    rng = np.random.default_rng(seed)
    out = {e: [] for e in eps_list}
    block = 1000
    for _ in range(draws // block):
        n_a, n_b, n_c = rng.multinomial(block, [lam_a, lam_b, lam_c])
        noise = pair.noise(rng.standard_normal((block, b)))
        tuples_a, log_w_a = tilt.draw(rng, n_a)
        parts = [tilt.shifted(noise[:n_a], tuples_a)]
        scales = np.array(SHIFT_SCALES)[rng.integers(len(SHIFT_SCALES), size=n_b)]
        parts.append(noise[n_a:n_a + n_b] + scales[:, None] * gu[rng.integers(b, size=n_b)])
        bulk = np.array(BULK_SHIFTS)[rng.integers(len(BULK_SHIFTS), size=n_c)]
        parts.append(noise[n_a + n_b:] + bulk[:, None] * row_sums[None, :])
        g = np.concatenate(parts)
        x = g - half
        loss = logsumexp(x, axis=1) - math.log(b)
        shifted = x[n_a:]
        cum = np.cumsum(np.exp(shifted - logsumexp(shifted, axis=1, keepdims=True)), axis=1)
        tuples_s = np.stack([np.minimum((cum < rng.random((shifted.shape[0], 1))).sum(axis=1), b - 1)
                             for _ in range(theta)], axis=1)
        log_w = np.concatenate([log_w_a, log_kappa(tuples_s, b, w) + tilt.log_rho(tuples_s)])
        terms = [math.log(lam_a) - (tilt.log_z + log_w - theta * loss)]
        if lam_b > 0:
            proj = g @ u.T
            terms.append(math.log(lam_b) + logsumexp(np.stack([logsumexp(s * proj - s * s * quad / 2, axis=1)
                                                               for s in SHIFT_SCALES]), axis=0)
                         - math.log(b * len(SHIFT_SCALES)))
        if lam_c > 0:
            sums = g.sum(axis=1)
            terms.append(math.log(lam_c) + logsumexp(np.stack([t * sums - t * t * total / 2 for t in BULK_SHIFTS]),
                                                     axis=0) - math.log(len(BULK_SHIFTS)))
        log_den = logsumexp(np.stack(terms), axis=0)
        for e in eps_list:
            gap = e - loss
            above = gap < 0
            log_h = np.where(above, loss + np.log(-np.expm1(np.where(above, gap, -1.0))), -np.inf)
            out[e].append(np.exp(log_h - log_den))
    return {e: np.concatenate(v) for e, v in out.items()}


def bounds(y: np.ndarray, value_range: float) -> tuple[float, float, float]:
    """Part 3: (the rows' UCB, the truncated UCB, the rows' LCB) of the values ``y`` in [0, ``value_range``]."""
    count, mean, var = y.size, float(y.mean()), float(y.var(ddof=1))
    ucb = min(kl_ucb(mean, count, BETA / 2, scale=value_range), eb_ucb(mean, var, count, BETA / 2, scale=value_range))
    trunc = math.inf
    for k in range(1, TRUNCATED + 1):
        tau = value_range * 4.0 ** -k
        low = np.minimum(y, tau)
        part = eb_ucb(float(low.mean()), float(low.var(ddof=1)), count, BETA / (2 * TRUNCATED), scale=tau)
        trunc = min(trunc, part + kl_ucb(max(mean - float(low.mean()), 0.0), count, BETA / (2 * TRUNCATED),
                                         scale=value_range - tau))
    levels = truncation_levels(value_range)
    lcb = truncated_lcb(np.array([float(np.minimum(y, t).mean()) for t in levels]), value_range, count, BETA)
    return ucb, trunc, lcb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = b = 2000
    sigma = 1.2
    pair = cached_pair(toeplitz_strategy(binomial_c_col(16), n), b, sigma)
    top = max(max_order(pair), cluster_order_range(pair)[0])
    log_zs = {t: tilt_for(pair, t).log_z for t in range(2, top + 1)}
    print(f"# matrix_tilt_mixtures: {platform.node() or 'host'}, one core; n = b = {n}, 16 bands, σ = {sigma}; "
          f"orders 2..{top} (tables to {max_order(pair)}, clusters above); {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| ε | δ | best single order: θ, B̄/δ | mixture of orders (LP): R/δ |")
    print("|---|---|---|---|")
    for eps, delta in POINTS:
        singles = {t: math.exp(log_range(z, t, eps)) for t, z in log_zs.items()}
        best = min(singles, key=singles.get)
        print(f"| {eps} | {delta:.3g} | θ = {best}: {singles[best] / delta:.4g} | {order_lp(log_zs, eps) / delta:.4g} |")
    theta = min(log_zs, key=lambda t: log_range(log_zs[t], t, POINTS[0][0]))
    tilt = tilt_for(pair, theta)
    if not getattr(tilt, "by_clusters", False):
        raise SystemExit(f"θ = {theta} is a table order here: this experiment needs the cluster proposal")
    eps_list = [e for e, _ in POINTS]
    print()
    print(f"| proposal (θ = {theta}, {args.draws} draws, seed {args.seed}) | ε | mean | relative variance | "
          "max / mean | proven range / mean | rows' UCB / mean | truncated UCB / mean | LCB / mean | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    shifts = shift_patterns(pair, crossing_pattern(pair.g, POINTS[0][0]))
    for name, weights in (("tilt alone", (1.0, 0.0, 0.0)), (f"mixture λ = {WEIGHTS}", WEIGHTS)):
        start = time.process_time()
        values = mixture_values(pair, tilt, shifts, weights, eps_list, args.draws, args.seed)
        cpu = time.process_time() - start
        for e in eps_list:
            y = values[e]
            mean = float(y.mean())
            bound = math.exp(log_range(tilt.log_z, theta, e)) / weights[0]
            ucb, trunc, lcb = bounds(y, bound)
            print(f"| {name} | {e} | {mean:.4g} | {float(y.var()) / mean ** 2:.4g} | {float(y.max()) / mean:.4g} | "
                  f"{bound / mean:.4g} | {ucb / mean:.3f} | {trunc / mean:.3f} | {lcb / mean:.3f} | {cpu:.0f} |")


if __name__ == "__main__":
    main()
