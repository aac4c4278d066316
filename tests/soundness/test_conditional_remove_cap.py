"""Issue #13 item 2: the proposed state cap B(S') for the conditional REMOVE value is false as stated.

Setting (epscert.dpsgd.conditional): Y = E[(W_T - c) 1{W_T > max(M, c)}], c = TK - R,
R = S' + M, S' the sum of the other T - 2 conditioning coordinates. The proposed route bounds
Y <= A(c*), c* = (TK - S')/2, A(x) = E[W 1{W > x}] = Φ̄(σ log x - 1/(2σ)), via
"Y <= E[W 1{W > max(c, M)}]". That step needs c >= 0: when R > TK (c < 0) the integrand is
W - c > W. The configuration pinned below (all coordinates reachable: the T - 2 others equal
S'/(T - 2) <= M) has Y > A(c*) by 2.3e-4 relative, far above the code's FLOAT_REL.

Repair (checked here on a grid): with g = TK - S' > 0, if c >= 0 then max(c, M) >= (c + M)/2 = g/2
and (W - c) <= W, so Y <= A(g/2); if c < 0 then M > g, a = M, and on {W > M}: W - c = W + M - g
<= 2W, so Y <= 2 A(M) <= 2 A(g). Hence Y <= max(A(g/2), 2 A(g)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from epscert.dpsgd.conditional import FLOAT_REL, remove_values


def _tail_mean(x, sigma):
    """A(x) = E[W 1{W > x}] for the lognormal W of the conditional estimator."""
    return special.ndtr(-(sigma * np.log(x) - 0.5 / sigma))


def _y(sp, m, sigma, steps, eps):
    """Y from the code (remove_values) with R = S' + M."""
    return remove_values(np.log(sp + m), np.log(m), sigma, steps, np.array([eps]))[0]


def test_route_cap_fails_when_sum_exceeds_tk():
    sigma, eps, steps = 0.2, 0.01, 10
    sp, m = 9.884474614697965, 1.2486711129333021
    assert sp / (steps - 2) <= m  # reachable: the other coordinates are each <= M
    tk = steps * math.exp(eps)
    assert sp + m > tk  # c < 0: the case the route's first step does not cover
    y = float(_y(np.array([sp]), np.array([m]), sigma, steps, eps)[0])
    route_cap = float(_tail_mean((tk - sp) / 2.0, sigma))
    assert y > route_cap * (1.0 + 1e3 * FLOAT_REL)  # a real violation, not rounding
    assert y / route_cap == pytest.approx(1.0002335, rel=1e-6)


@pytest.mark.parametrize("sigma", [0.1, 0.2, 0.5, 1.0])
@pytest.mark.parametrize("steps", [2, 3, 10, 100])
def test_repaired_cap_holds_on_grid(sigma, steps):
    worst = 0.0
    for eps in (0.001, 0.01, 0.1, 1.0, 4.0):
        tk = steps * math.exp(eps)
        for sp in np.linspace(0.0, 0.999 * tk, 40 if steps > 2 else 1):
            g = tk - sp
            m = np.geomspace(max(sp / max(steps - 2, 1), 1e-3), 1e3 * tk, 300)  # S' <= (T-2) M
            y = _y(np.full_like(m, sp), m, sigma, steps, eps)
            cap = max(_tail_mean(g / 2.0, sigma), 2.0 * _tail_mean(g, sigma))
            worst = max(worst, float(np.max(y)) / cap)
    assert 0.0 < worst <= 1.0 + FLOAT_REL
