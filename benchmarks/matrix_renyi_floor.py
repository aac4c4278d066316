"""Issue-33 evidence: how small the loss-tilted estimator's value range can get, at any order θ.

    python -m benchmarks.matrix_renyi_floor

The certified method ``tilted`` (:mod:`epscert.matrix.loss_tilt`) draws from Q_θ ∝ e^{θL} Q and its
values lie in [0, B_θ(ε)] with B_θ(ε) = Z_θ e^{(1-θ)ε} (θ-1)^{θ-1} θ^{-θ}, Z_θ = E_Q[e^{θL}]: the Rényi
(Chernoff) bound on δ. A KL or Bernstein bound on n values in [0, R] moves the UCB above the mean by about
7 R log(1/α) / (3n), so a certificate of δ within a factor 1 + r needs n of the order of R / (r δ).

A floor on Z_θ that needs no table. Z_θ = b^{-θ} Σ_{k ∈ [b]^θ} Π_{j<j'} e^{G_{k_j k_j'}} (the module's
expansion). When G >= 0 entrywise (every strategy here: c_i >= 0), every factor with k_j != k_j' is >= 1,
so dropping them gives

    Z_θ >= Z_θ^diag = b^{-θ} Σ_{s ∈ N^b, |s| = θ} θ!/Π_k s_k! Π_k e^{G_kk s_k (s_k - 1)/2}
         = b^{-θ} θ! [t^θ] Π_k (Σ_{s <= θ} t^s e^{G_kk s(s-1)/2} / s!),

the same moment for independent modes with the pair's own variances (C = I at those variances). The
polynomial product is formed in log space, site by site. So min_θ B_θ^diag(ε)/δ is a floor on the range of
the values, in units of δ, for every order the estimator could ever use, exact tuple draws assumed; the
exact Z_θ from the tables (θ <= the order they allow at this b) shows how far above the floor the real
moment is.

Printed per configuration of ``benchmarks/matrix_production.py`` and δ: ε (the estimate that issue 33's
table quotes, or the certified interval's upper end where it quotes none), the best θ of the floor and
min_θ B_θ^diag(ε)/δ, the exact B_θ(ε)/δ at the largest order the tables allow, and the samples a
Bernstein range term of 7 R log(1/α)/(3n) <= δ/4 needs (α = 1e-6) at the floor and at that exact order
(b = 10^4: the Gram matrix is not built, and the last columns show the floor at θ = 2, the order the tables
allow there). The last column: for one participation (banded G), the cluster proposal of
:mod:`epscert.matrix.cluster_tilt` (orders above the tables', up to its state cap): its best order and B̄_θ(ε)/δ,
the range of the values it draws (Z̄ >= Z_θ: the stationary profile and the placements, a few percent).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from benchmarks.matrix_rivals import binomial_c_col
from epscert.matrix.cluster_tilt import cluster_order_range, tilt_for
from epscert.matrix.loss_tilt import LossTilt, log_peak, max_order
from epscert.matrix.strategies import toeplitz_strategy
from epscert.config.samplers import cached_pair

#: (n, b, σ, bands, δ, ε): ε from issue 33's table (the estimate where it gives one).
POINTS = (
    (10_000, 1000, 2.0, 16, 1e-6, 5.598),
    (2000, 2000, 1.2, 16, 1e-6, 0.482),
    (2000, 2000, 1.2, 16, 1e-8, 0.688),
    (2000, 2000, 0.6, 16, 1e-6, 5.703),
    (2000, 100, 4.61, 16, 1e-10, 4.969),
    (2000, 100, 4.61, 16, 1e-12, 5.94),
    (10_000, 10_000, 2.0, 64, 1e-6, 0.1),  # no certified ε yet: a guess near JAX Privacy's estimate, 0.11
    (10_000, 10_000, 2.0, 64, 1e-6, 0.2),
)
#: Above this many bins the Gram matrix is not built: one participation (b = n), whose mode variances are
#: Σ_{i < min(bands, n - k)} c_i² / σ² (column k of the banded Toeplitz C), and G >= 0 as c >= 0.
DENSE_LIMIT = 4000
MAX_THETA = 40
LOG_ALPHA = math.log(1e6)


def log_z_diag(diag: np.ndarray, theta_max: int) -> np.ndarray:
    """log Z_θ^diag for θ = 0..theta_max (module docstring): the product over the sites of
    Σ_s t^s e^{G_kk s(s-1)/2}/s!, truncated at degree theta_max, formed in log space one site at a time."""
    s = np.arange(theta_max + 1)
    log_fact = np.array([math.lgamma(k + 1) for k in s])
    pick = s[:, None] - s[None, :]  # [total, part]: the other factor's degree, valid where >= 0
    coeff = np.where(s == 0, 0.0, -np.inf)  # log of the product's coefficients so far
    for v in diag:
        site = v * s * (s - 1) / 2.0 - log_fact
        terms = np.where(pick >= 0, coeff[np.clip(pick, 0, None)] + site[None, :], -np.inf)
        coeff = logsumexp(terms, axis=1)
    return coeff + log_fact - s * math.log(diag.size)


def main() -> None:
    print("| n | b | σ | δ | ε | floor: best θ, min B/δ | samples at the floor | exact θ_max, B/δ | samples at θ_max "
          "| cluster orders (one participation): best θ, B̄/δ |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, b, sigma, bands, delta, eps in POINTS:
        c_col = binomial_c_col(bands)
        if b > DENSE_LIMIT:
            assert b == n and np.all(c_col >= 0)
            head = np.cumsum(c_col**2)
            pair, diag = None, head[np.minimum(bands, n - np.arange(b)) - 1] / sigma**2
        else:
            pair = cached_pair(toeplitz_strategy(c_col, n), b, sigma)
            if np.min(pair.g) < 0:
                print(f"| {n} | {b} | {sigma} | {delta:.0e} | G has negative entries: no floor |")
                continue
            diag = pair.diag
        logz = log_z_diag(diag, MAX_THETA)
        logb = [logz[t] + (1 - t) * eps + log_peak(t) - math.log(delta) for t in range(2, MAX_THETA + 1)]
        best = int(np.argmin(logb)) + 2
        floor = math.exp(min(logb))
        need = 4 * 7 * LOG_ALPHA / 3
        if pair is None:
            print(f"| {n} | {b} | {sigma} | {delta:.0e} | {eps} | θ = {best}: {floor:.3g} | {need * floor:.2g} "
                  f"| θ_max = 2 (b² > MAX_TABLE_ENTRIES): its floor {math.exp(logb[0]):.3g} | {need * math.exp(logb[0]):.2g} |",
                  flush=True)
            continue
        top = max_order(pair)
        tilt = LossTilt(pair, top)
        exact = math.exp(tilt.log_z + (1 - top) * eps + log_peak(top) - math.log(delta)) if top > 1 else 1 / delta
        clusters = "–"
        cluster_top = cluster_order_range(pair)[0]
        if cluster_top > top:  # the cluster proposal's B̄_θ = Z̄ e^{(1-θ)ε} peak: its best order and range, in δ
            ranges = {t: math.exp(tilt_for(pair, t).log_z + (1 - t) * eps + log_peak(t) - math.log(delta))
                      for t in range(top + 1, cluster_top + 1)}
            t_best = min(ranges, key=ranges.get)
            clusters = f"θ = {t_best} (of <= {cluster_top}): {ranges[t_best]:.3g}"
        print(f"| {n} | {b} | {sigma} | {delta:.0e} | {eps} | θ = {best}: {floor:.3g} | {need * floor:.2g} "
              f"| θ = {top}: {exact:.3g} | {need * exact:.2g} | {clusters} |", flush=True)


if __name__ == "__main__":
    main()
