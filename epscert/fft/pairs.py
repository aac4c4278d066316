"""Loss cells of a pair and their two grid PMFs: connect-the-dots (upper) and merging (lower).

Grid: g_i = offset + i·Δ. A pair (P, Q) with privacy loss ω = log dP/dQ is cut into cells
C_k = {ω ∈ [g_k, g_{k+1})} with masses P_k = P(C_k), Q_k = Q(C_k). With the surplus and deficit

    s_k = P_k - e^{g_k} Q_k >= 0,        d_k = e^{g_{k+1}} Q_k - P_k >= 0

(both >= 0 because the cell's average loss log(P_k/Q_k) lies in [g_k, g_{k+1}]), the two PMFs are:

**Upper (connect the dots; Doroshenko et al. 2022).** Each loss ω ∈ [g_k, g_{k+1}] is split between
its two grid neighbours with weights a = (e^{-ω} - e^{-g_{k+1}})/(e^{-g_k} - e^{-g_{k+1}}) at g_k and
1 - a at g_{k+1}: P-mass and Q-mass (E e^{-ω}) are kept, and as functions of t = e^ε,
a(1 - t e^{-g_k})_+ + (1 - a)(1 - t e^{-g_{k+1}})_+ >= (1 - t e^{-ω})_+ for every t > 0 (equal for
t <= e^{g_k} and t >= e^{g_{k+1}}, a chord of a convex function in between). So every composition
δ(ε) = E f_ε(Σ ω_j), f_ε(w) = (1 - e^{ε-w})_+, can only grow when one step at a time is split
(condition on the other steps: f_ε(w + r) = f_{ε-r}(w)). Summed over a cell, the split is linear:

    mass at g_k from C_k = d_k/(e^Δ - 1),       mass at g_{k+1} from C_k = s_k/(1 - e^{-Δ}).

Losses above the top grid point go to +∞, losses below the bottom one are moved up to it: both
raise every f_ε.

**Lower (merging; a post-processing, then rounding down).** Mapping the output o to a label through
any Markov kernel gives a pair dominated by (P, Q) (Blackwell), and the composition of dominated
pairs is dominated, so its δ(ε) is a lower bound for every ε. Labels: split cell C_k into an up
part (fraction α_k, deficit α_k d_k with respect to g_{k+1}) and a down part (fraction 1 - α_k,
surplus (1 - α_k)s_k with respect to g_k); the label "g_k" collects the down part of C_k and a
fraction θ_k of the up part of C_{k-1}, with θ_k α_{k-1} d_{k-1} <= (1 - α_k) s_k, so that its
loss log(P/Q) is >= g_k. Then every label's loss is rounded DOWN to its grid point (ω̂ <= ω
pointwise: E f_ε(Σ ω̂_j) <= E f_ε(Σ ω_j)), the unused up part of C_{k-1} included (loss >= g_{k-1}).
The rounding moves only what merging could not balance: a second-order loss where the cell masses
vary smoothly, unlike rounding every loss down (first order: k·Δ over k steps).

A *reservoir* R (one heavy atom whose loss L_R is a grid point: its region is chosen so, see
:mod:`epscert.fft.gaussmix`) balances the cells next to it exactly: a fraction φ of R has deficit
φ(e^{g - L_R} - 1) with respect to g > L_R and surplus φ(1 - e^{g - L_R}) with respect to g < L_R,
so a whole cell C_k above R lands on g_k with φ_k = s_k/(e^{g_k - L_R} - 1) of R (below R: on
g_{k+1} with φ_k = d_k/(1 - e^{g_{k+1} - L_R})), nearest cells first while R lasts. This is what
keeps a subsampled step whose body is narrower than Δ (q = 10^-5, Δ = 10^-4) tight: rounding its
body down would shift the sum by about n·Δ.

Floating point. Every mass comes with an absolute error bound (``err_p``, ``err_q``); the upper PMF
uses s^hi = max(s̃, 0) + err_s and d^hi, the lower uses s^lo = max(s̃ - err_s, 0), d^hi and
P^lo = max(P̃ - err_p, 0), so each output mass is >= (upper) or <= (lower) the exact mass of the
construction. Composition is monotone in every mass (all weights f_ε >= 0), so that suffices.
Cell edges come from a loss map evaluated in floating point: a computed edge has loss within ``eta``
of its grid point. For the upper PMF a point within eta of an edge may be split by the wrong pair
of neighbours: its weight at g_{k-1} or g_{k+2} is short by at most eta/(1 - e^{-Δ}) per unit
mass, so each mass gets + (2·eta/(1 - e^{-Δ}))·(P of the two cells on each side). For the lower
PMF the cells are a partition whatever their edges, so only a cell whose surplus is not certified
(s^lo = 0) is rounded down one more step (its loss is >= g_k - eta >= g_{k-1}).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Unit round-off of float64.
UNIT_ROUNDOFF = 2.0**-53
#: The reservoir balances at most this many cells next to it. Moving a fraction of it j cells
#: shrinks the spread of the losses by about j·Δ²/2 per unit of the cell's mass (first order in Δ
#: once j grows with 1/Δ), so far cells are merged among themselves instead.
#: exp of a grid point g is accurate to this many units of u·(1 + |g|) (argument rounding and exp).
EXP_ROUNDOFF_UNITS = 4.0


@dataclass(frozen=True, eq=False)
class Cells:
    """Cells C_k = [g_{start+k}, g_{start+k+1}), k = 0..K-1, of one pair on the grid offset + iΔ.

    ``p``, ``q``, ``err_p``, ``err_q``: masses of the cells and their absolute error bounds.
    ``below_p``/``above_p`` (with errors): P-mass of the losses below the first and at or above the
    last edge (the truncated tails). ``eta``: bound on |loss(computed edge) - grid point|.
    """

    delta: float
    offset: float
    start: int
    p: np.ndarray
    q: np.ndarray
    err_p: np.ndarray
    err_q: np.ndarray
    below_p: float = 0.0
    below_err: float = 0.0
    above_p: float = 0.0
    above_err: float = 0.0
    eta: float = 0.0
    #: Optional mixture form: P_k = Σ_i a_i C_{i,k}, Q_k = Σ_i b_i C_{i,k} with component masses C_i
    #: (and their errors); the surplus and deficit are then formed per component (less cancellation).
    components: tuple = ()
    p_weights: tuple = ()
    q_weights: tuple = ()

    @property
    def size(self) -> int:
        return int(self.p.size)

    def edges(self) -> np.ndarray:
        """g_start .. g_{start+K} (K + 1 values)."""
        return self.offset + self.delta * (self.start + np.arange(self.size + 1, dtype=np.float64))


@dataclass(frozen=True, eq=False)
class GridMasses:
    """A sub-probability on the grid: ``masses[i]`` at offset + (start + i)Δ, plus ``inf_mass`` at +∞."""

    delta: float
    offset: float
    start: int
    masses: np.ndarray
    inf_mass: float = 0.0

    def losses(self) -> np.ndarray:
        return self.offset + self.delta * (self.start + np.arange(self.masses.size, dtype=np.float64))


@dataclass(frozen=True)
class Reservoir:
    """An atom of P-mass ``p`` (error ``err``) whose loss lies in [g_index, g_index + ``excess``]."""

    index: int
    p: float
    err: float
    excess: float = 0.0


def surplus_deficit(cells: Cells) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(s̃, err_s, d̃, err_d): s = P - e^{g_k}Q, d = e^{g_{k+1}}Q - P with absolute error bounds.

    Plain form: err_s <= err_p + e^{g_k} err_q + c·u(1 + |g_k|)e^{g_k}Q + 2u(P + e^{g_k}Q) (the two
    input errors, the exponential's error (c = EXP_ROUNDOFF_UNITS), the product and difference
    roundings). Mixture form (``cells.components``): s = Σ_i (a_i - e^{g_k} b_i) C_i, so each
    component's error is weighted by |a_i - e^{g_k} b_i| (small for the component the two sides
    share), plus the same exponential and rounding terms over Σ_i (a_i + e^{g_k} b_i) C_i.
    """
    u = UNIT_ROUNDOFF
    g = cells.edges()
    glo, ghi = g[:-1], g[1:]
    with np.errstate(over="ignore"):
        elo, ehi = np.exp(glo), np.exp(ghi)
        qlo, qhi = elo * cells.q, ehi * cells.q
        round_s = EXP_ROUNDOFF_UNITS * u * (1.0 + np.abs(glo)) * qlo + 2.0 * u * (cells.p + qlo)
        round_d = EXP_ROUNDOFF_UNITS * u * (1.0 + np.abs(ghi)) * qhi + 2.0 * u * (cells.p + qhi)
        if not cells.components:
            s = cells.p - qlo
            d = qhi - cells.p
            return s, cells.err_p + elo * cells.err_q + round_s, d, cells.err_p + ehi * cells.err_q + round_d
        s = np.zeros(cells.size)
        d = np.zeros(cells.size)
        err_s, err_d = round_s.copy(), round_d.copy()
        for (comp, err), a, b in zip(cells.components, cells.p_weights, cells.q_weights):
            cs, cd = a - b * elo, b * ehi - a
            s += cs * comp
            d += cd * comp
            err_s += np.abs(cs) * err + 2.0 * u * (a + b * elo) * comp * (2.0 + np.abs(glo))
            err_d += np.abs(cd) * err + 2.0 * u * (a + b * ehi) * comp * (2.0 + np.abs(ghi))
    return s, err_s, d, err_d


def _sliver_allowance(cells: Cells) -> np.ndarray:
    """Per grid point (K + 1 values): 2·eta/(1 - e^{-Δ}) times the P-mass of two cells each side."""
    if cells.eta <= 0.0:
        return np.zeros(cells.size + 1)
    weight = 2.0 * cells.eta / -math.expm1(-cells.delta)
    padded = np.concatenate([[0.0, 0.0], cells.p + cells.err_p, [0.0, 0.0]])
    window = padded[:-3] + padded[1:-2] + padded[2:-1] + padded[3:]  # cells k-2 .. k+1 around point k
    return weight * window


def ctd_upper(cells: Cells) -> GridMasses:
    """The connect-the-dots PMF with every mass rounded up (module docstring), on K + 1 points."""
    u = UNIT_ROUNDOFF
    s, err_s, d, err_d = surplus_deficit(cells)
    s_hi = np.maximum(s, 0.0) + err_s
    d_hi = np.maximum(d, 0.0) + err_d
    # 1/(e^Δ − 1) as e^{-Δ}/(1 − e^{-Δ}) past e^Δ's range (a grid step > 709 nats: no overflow); the extra
    # exp and product are covered by the wider factor (1 + 8u); an underflow to 0 there is below the
    # composition's resolution floor (epscert.analytic.resolution)
    if cells.delta < 700.0:
        down = d_hi / math.expm1(cells.delta) * (1.0 + 4.0 * u)
    else:
        down = d_hi * (math.exp(-cells.delta) / -math.expm1(-cells.delta)) * (1.0 + 8.0 * u)
    up = s_hi / -math.expm1(-cells.delta) * (1.0 + 4.0 * u)
    masses = np.zeros(cells.size + 1)
    masses[:-1] += down
    masses[1:] += up
    masses += _sliver_allowance(cells)
    masses[0] += cells.below_p + cells.below_err  # losses below the first edge: moved up to it
    inf_mass = min(1.0, (cells.above_p + cells.above_err) * (1.0 + 2.0 * u))
    return GridMasses(cells.delta, cells.offset, cells.start, masses, inf_mass)


def merge_lower(cells: Cells, reservoir: Reservoir | None = None) -> GridMasses:
    """The merged PMF with every mass rounded down (module docstring).

    Split fractions α_k = s_k/(s_k + d_{k-1}): with these the down part of C_k and the up part of
    C_{k-1} balance at g_k up to a second-order residual (s_k d_{k-1}/(s_k + d_{k-1}) against
    s_{k-1} d_{k-2}/(s_{k-1} + d_{k-2}), a smooth function at k and k - 1), where s_k/(s_k + d_k)
    would leave a first-order one. At each g_k: θ_k = min(1, S_k/D_k) of the incoming up part is
    merged (S_k = (1 - α_k)s_k^lo, D_k = α_{k-1}d_{k-1}^hi); the rest of that up part is rounded
    down to g_{k-1}. A reservoir below the cells spends its deficit on the surplus left over at
    the grid points nearest to it (a whole cell's down part at the first one); a reservoir above
    spends its surplus on the deficits left over nearest to it. A cell whose surplus is not
    certified (s^lo = 0) goes one step down whole (loss >= g_k - eta >= g_{k-1}).

    Output points: the K + 1 edges, and the reservoir's grid point (index start - 1 or start + K + 1).
    The tail at or above the last edge is one more label (loss >= that edge) unless it is the
    reservoir; the tail below the first edge is dropped.
    """
    u = UNIT_ROUNDOFF
    k_cells = cells.size
    s, err_s, d, err_d = surplus_deficit(cells)
    s_lo = np.maximum(s - err_s, 0.0)
    s_hi = np.maximum(s, 0.0) + err_s
    d_hi = np.maximum(d, 0.0) + err_d
    p_lo = np.maximum(cells.p - cells.err_p, 0.0)
    below = reservoir is not None and reservoir.index < cells.start
    above = reservoir is not None and not below
    d_prev = np.concatenate([d_hi[:1], d_hi[:-1]])
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(s_hi + d_prev > 0.0, s_hi / (s_hi + d_prev), 0.0)
    unsure = s_lo <= 0.0
    alpha[unsure] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        if above:  # push the residual to deficits, which the reservoir above pays
            floor = 1.0 - np.concatenate([[0.0], alpha[:-1] * d_hi[:-1]]) / np.where(s_hi > 0.0, s_hi, np.inf)
            alpha = np.clip(np.maximum(alpha, floor), 0.0, 1.0)
        else:  # push the residual to surpluses, which the reservoir below (or rounding) absorbs
            room = np.concatenate([(1.0 - alpha[1:]) * s_lo[1:], [0.0]]) / np.where(d_hi > 0.0, d_hi, np.inf)
            alpha = np.clip(np.minimum(alpha, room), 0.0, 1.0)
    alpha[unsure] = 0.0
    if not above and k_cells:
        alpha[-1] = 0.0  # nothing above the last cell balances its up part
    surplus = np.concatenate([np.where(unsure, 0.0, (1.0 - alpha) * s_lo), [0.0]])  # at g_0..g_K
    incoming = np.concatenate([[0.0], alpha * d_hi])
    g = cells.edges()
    phi = np.zeros(k_cells + 1)
    left = 0.0
    if reservoir is not None:
        g_r = cells.offset + cells.delta * reservoir.index
        cap = max(reservoir.p - reservoir.err, 0.0) * (1.0 - 4.0 * u)
        with np.errstate(divide="ignore", invalid="ignore"):
            if below:  # a fraction φ of R at g_k has deficit <= φ(e^{g_k - g_r} - 1): spend it on slack
                theta = np.where(incoming > 0.0, np.minimum(1.0, surplus / incoming), 1.0)
                slack = np.maximum(surplus - theta * incoming, 0.0)
                unit = np.expm1(g - g_r) * (1.0 + 4.0 * u)
                want = np.where(unit > 0.0, slack / unit, 0.0) * (1.0 - 4.0 * u)
                taken = int(np.searchsorted(np.cumsum(want), cap, side="right"))
                phi[:taken] = want[:taken]
            else:  # a fraction φ of R (loss >= g_r) at g_k has surplus >= φ(1 - e^{g_k - g_r})
                unit = -np.expm1(g - g_r) * (1.0 - 4.0 * u)
                want = np.where(unit > 0.0, np.maximum(incoming - surplus, 0.0) / unit, 0.0) * (1.0 + 4.0 * u)
                taken = int(np.searchsorted(np.cumsum(want[::-1]), cap, side="right"))
                if taken:
                    phi[k_cells + 1 - taken:] = want[k_cells + 1 - taken:]
                    surplus = surplus + phi * unit / (1.0 + 4.0 * u)
        left = max(cap - float(np.sum(phi)), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = np.where(incoming > 0.0, np.minimum(1.0, surplus / incoming), 1.0)
    theta = np.clip(np.nan_to_num(theta, nan=0.0), 0.0, 1.0)
    masses = np.zeros(k_cells + 1)
    down = (1.0 - alpha) * p_lo
    sure = ~unsure
    masses[:-1][sure] += down[sure]
    low = unsure.copy()
    if k_cells:
        low[0] = False  # an unsure first cell is dropped
    masses[:-2][low[1:]] += down[1:][low[1:]]
    up = alpha * p_lo
    masses[1:] += theta[1:] * up
    masses[:-1] += (1.0 - theta[1:]) * up  # unmerged up part: loss >= g_k
    masses += phi
    if not above:  # the top tail: loss >= the last edge (with a reservoir above, it is the reservoir)
        masses[-1] += max(cells.above_p - cells.above_err, 0.0)
    if reservoir is None:
        return GridMasses(cells.delta, cells.offset, cells.start, masses)
    if below:
        return GridMasses(cells.delta, cells.offset, cells.start - 1, np.concatenate([[left], masses]))
    return GridMasses(cells.delta, cells.offset, cells.start, np.concatenate([masses, [left]]))
