"""The first k < b iterations of a matrix mechanism with Balls-and-Bins batches of cycle length b.

In the first k iterations only the bins j < k have taken part (bin j at iteration j), so an example's
output is that of the *k-bin pair* P' = (1/k) Σ_{j<k} N(C_k e_j, σ²I) with probability q = k/b (its bin
is one of the first k) and pure noise Q = N(0, σ²I) otherwise: the pair is (P_q, Q) with
P_q = (1 - q) Q + q P'. C_k is C truncated to k rows and columns (for a Toeplitz C, the Toeplitz strategy
of the same c_col over k iterations), and P' is the matrix pair of C_k with cycle length k (every bin
takes part once), which the accountant certifies like any other run.

The hockey-stick divergences of a mixture with Q follow from P''s exactly (write H_α(P||Q) =
sup_S P(S) - α Q(S), δ(ε) = H_{e^ε}):

- REMOVE: H_α(P_q||Q) = q · H_{α'}(P'||Q) with α' = (α - 1 + q)/q, i.e. δ_{P_q||Q}(ε') = q δ_{P'||Q}(ε)
  at e^{ε'} = 1 + q (e^ε - 1) (an identity);
- ADD: H_α(Q||P_q) = (1 - α + αq) · H_{α'}(Q||P') with α' = αq/(1 - α + αq) (0 where 1 - α + αq <= 0),
  and 1 - α + αq <= q for α >= 1, so δ_{Q||P_q}(ε') <= q δ_{Q||P'}(ε) at e^{-ε'} = 1 + q (e^{-ε} - 1).

For the same ε, the REMOVE map gives the larger ε': (1 - q + q e^ε)(1 - q + q e^{-ε}) >= 1 (AM-GM on
e^ε + e^{-ε} >= 2). Hence, with ε* an upper bound on both directions' ε of P' at δ/q:
ε(δ) of (P_q, Q), both directions, is at most log(1 + q (e^{ε*} - 1)) (:func:`amplified_epsilon`);
and with δ* an upper bound on both directions' δ of P' at ε = log(1 + (e^{ε'} - 1)/q) (the REMOVE
preimage, which is the smaller of the two preimages, so δ* bounds the ADD side too since δ falls in ε),
δ(ε') <= q δ* (:func:`amplified_delta`). Where δ >= q the answer is ε = 0: the total variation of
(P_q, Q) is at most q.
"""

from __future__ import annotations

import math


def check_fraction(q: float) -> float:
    """q = k/b in (0, 1]; ValueError otherwise."""
    if not 0.0 < q <= 1.0:
        raise ValueError(f"the participating fraction q = k/b must be in (0, 1], got q={q!r}")
    return float(q)


def inner_delta(delta: float, q: float) -> float | None:
    """δ/q, the δ at which P' is asked; None where δ >= q (then ε = 0: TV(P_q, Q) <= q <= δ)."""
    q = check_fraction(q)
    return None if delta >= q else delta / q


def amplified_epsilon(inner_epsilon: float, q: float) -> float:
    """log(1 + q (e^{ε*} - 1)): the ε(δ) bound of (P_q, Q) from P''s ε* at δ/q (module docstring).

    Computed as log1p(q · expm1(ε*)), rounded up by one relative ulp-scale factor so that float rounding
    cannot make the reported ε smaller than the exact one; inf stays inf.
    """
    q = check_fraction(q)
    if math.isinf(inner_epsilon):
        return math.inf
    if inner_epsilon <= 0.0:
        return 0.0
    # e^{ε*} may overflow for a huge ε*: log(1 + q(e^ε - 1)) = ε + log(q + (1 - q) e^{-ε}) there
    if inner_epsilon > 700.0:
        value = inner_epsilon + math.log(q + (1.0 - q) * math.exp(-inner_epsilon))
    else:
        value = math.log1p(q * math.expm1(inner_epsilon))
    return math.nextafter(value * (1.0 + 4e-16), math.inf)


def inner_epsilon(epsilon: float, q: float) -> float:
    """log(1 + (e^{ε'} - 1)/q): the ε at which P' is asked for the δ(ε') bound of (P_q, Q).

    Rounded down (a smaller ε gives P' a larger δ, so the bound stays on the safe side).
    """
    q = check_fraction(q)
    if epsilon <= 0.0:
        return 0.0
    if epsilon - math.log(q) > 700.0:  # expm1(ε)/q would overflow: log(1 + (e^ε - 1)/q) in log space
        value = epsilon - math.log(q) + math.log1p(-(1.0 - q) * math.exp(-epsilon))
    else:
        value = math.log1p(math.expm1(epsilon) / q)
    return max(0.0, math.nextafter(value * (1.0 - 4e-16), -math.inf))


def amplified_delta(inner: float, q: float) -> float:
    """q · δ*: the δ(ε') bound of (P_q, Q) from P''s δ* at :func:`inner_epsilon` (module docstring),
    rounded up."""
    q = check_fraction(q)
    return min(1.0, math.nextafter(q * inner * (1.0 + 4e-16), math.inf))
