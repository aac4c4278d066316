"""Conditional and importance estimators of the matrix-mechanism pair: one value per sample and ε.

Notation of :mod:`epscert.matrix.pair`: under Q, g ~ N(0, G) (b x b Gram
matrix of the whitened modes), v_j = G_jj, x_k = g_k - v_k/2, S = Σ_k e^{x_k} = b e^L, K = e^ε,
B = b K. Then (SPEC §2 under Q)

    δ_remove(ε) = E_Q[(e^L - K)_+] = (1/b) E_Q[(S - B)_+],     δ_add(ε) = E_Q[(1 - K e^L)_+].

Kriging identity. For a direction u with s = uᵀg and var(s) = uᵀGu = v_u, put d = G u / v_u and
g_⊥ = g - s d: then g_⊥ is independent of s (their covariance is G u - G u = 0) and g = g_⊥ + s d.
Conditioning on g_⊥ leaves a one-dimensional Gaussian s ~ N(0, v_u), along which every x_k is
affine: x_k(s) = a_k + s d_k with a_k = (g_⊥)_k - v_k/2. Because C >= 0, G >= 0 entrywise; every
d used below is >= 0, so S(s) = Σ_k e^{a_k + s d_k} is convex and increasing in s, and the
conditional expectations are integrals of exponentials of affine functions against a Gaussian:

    ∫_c^h e^{a + s d} φ_v(s) ds = e^{a + d² v/2} [Φ((h - d v)/√v) - Φ((c - d v)/√v)].       (★)

REMOVE, ``conditional`` (Asmussen–Kroese over the modes, each along its own kriging line). Split
on which mode is largest, A_j = {x_j > x_k for all k ≠ j} (ties have probability 0). For mode j
take u = e_j: s = g_j, v = v_j, d = G e_j / v_j (d_j = 1, a_j = -v_j/2). Given g_⊥, A_j is an
interval of s: x_j(s) >= x_k(s) is s (1 - d_k) >= a_k - a_j, a lower end where d_k < 1, an upper
end where d_k > 1 (possible when v_k > v_j), and a sure or empty condition where d_k = 1. On it
the integrand (S(s) - B)_+ is positive for s > s* (the root of S = B), so

    I_j = (1/b) E[(S - B)_+ 1{A_j} | g_⊥] = (1/b) ∫_{max(lo, s*)}^{hi} (S(s) - B) φ_{v_j}(s) ds   (by ★),

and Z = Σ_j I_j has E_Q[Z] = δ_remove (tower property on each j, then Σ_j 1{A_j} = 1). Modes k with
d_k = 0 (no overlap with mode j) are constants along the line and enter through their sum and
their maximum. Range: on A_j, S <= b e^{x_j(s)}, so I_j <= E[(e^{x_j} - K)_+] = δ_G(ε; √v_j), the
Gaussian mechanism's δ at sensitivity √v_j (SPEC §7), and Z <= Σ_j δ_G(ε; √v_j).

ADD, ``conditional`` (one line: the mean). Take u = 1/b (s = mean_k g_k). Then mean_k d_k = 1 and
mean_k (g_⊥)_k = 0, so by Jensen S(s) >= b e^{mean_k x_k(s)} = b e^{s - v̄/2} (v̄ = mean_k v_k): the
integrand (1 - K S(s)/b)_+ vanishes for s > ŝ = -ε + v̄/2, the root s* of S = b/K is <= ŝ, and

    J = E[(1 - K e^L)_+ | g_⊥] = Φ(s*/√v_u) - (K/b) Σ_k e^{a_k + d_k² v_u/2} Φ((s* - d_k v_u)/√v_u)   (by ★),

with E_Q[J] = δ_add and 0 <= J <= Φ(ŝ/√v_u) (the proven range).

REMOVE, ``importance`` (the "at least one rare event" estimator, issue 23): L <= max_k x_k, so for
thresholds t_k with Σ_k e^{t_k} <= B the integrand vanishes unless some x_k >= t_k. Under the
component P_i, p_ik = Pr_i[x_k >= t_k] = Φ̄((t_k + v_k/2 - G_ik)/√v_k); M = (1/b) Σ_ik p_ik. Draw
(i, k) with probability p_ik/(b M), then g from P_i conditioned on x_k >= t_k (a truncated g_k,
the rest by kriging), and return Y = M h(g)/N(g) with h = (1 - e^{ε - L})_+ (the P-form integrand,
in [0, 1]) and N(g) = #{k : x_k >= t_k} >= 1. The proposal has density (1/(bM)) Σ_i P_i(g) N(g) on
the union, so dP/dproposal = M/N there: E[Y] = δ_remove and 0 <= Y <= M. The thresholds are those
of ε0 (the smallest ε of the grid); for ε >= ε0 they still satisfy Σ e^{t_k} <= b e^ε.
They are uniform, t_k = ε0 (so Σ_k e^{t_k} = b e^{ε0}): the symmetric choice, not optimised over the
modes. Any t with Σ_k e^{t_k} <= b e^{ε0} keeps the estimator unbiased with range M; the choice
only affects M and the variance.

ADD, ``importance``: the event {mean_k x_k < -ε} of the Jensen bound above has probability
P_V = Φ(ŝ/√v̄_u) under Q; drawing s truncated to s < ŝ and g_⊥ freely gives Y = P_V (1 - K e^L)_+
in [0, P_V] with E[Y] = δ_add.

Numerics: roots by Newton on log S (convex, increasing), started above the root, so every iterate
stays above it and the iteration is monotone; all integrals in log space (``log_ndtr``) and
combined as e^M (Σ e^{l - M}); computed values are within a relative ``FLOAT_REL`` of the exact
ones (the cancellation in the REMOVE integral is that of ∫ (S - B) against ∫ S on the mass of the
tail, a factor of a few).
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
from scipy import special

from epscert.analytic.deterministic import gaussian_bracket
from epscert.matrix import kernels as mk
from epscert.matrix.kernels import FLOAT_REL
from epscert.matrix.line_roots import NEWTON_STEPS, NEWTON_TOL, remove_root
from epscert.matrix.cluster_tilt import tilt_for
from epscert.matrix.loss_tilt import law_tv, remove_tilt_log_values
from epscert.montecarlo.protocol import BLOCK_ELEMENTS, ValueSampler
from epscert.names import Direction

#: Lines (modes) integrated per sample by the REMOVE conditional estimator, evenly spaced with a
#: random offset: measured at n = 2000, b = 100, 16 bands, 8 lines give the lowest variance per CPU
#: second (relative variance x lines: 31 at 5-10 lines against 134 with all 100).
LINES_PER_SAMPLE = 8
#: Elements of one (N, b) array of the importance estimator per block (512 KiB of float64), and its
#: fewest rows. Cost only (the block layout changes which draws a seed gives, not their law). With
#: the shared BLOCK_ELEMENTS (2621 rows at b = 100, about ten 2 MiB temporaries per block) glibc
#: returned the freed heap top to the operating system after every block and faulted it in again
#: at the next: 40% of the estimator's CPU (draw() alone, b = 100, 16 bands, one core: 139k
#: samples/s against 244k with trimming disabled by MALLOC_TRIM_THRESHOLD_). Blocks of 2^16
#: elements stay below the trim threshold the allocator settles on (655 rows at b = 100: 230k
#: samples/s; at b = 1000 they cost 10% against larger blocks). The naive sampler meets the same
#: cost with per-thread buffers instead (:func:`~epscert.matrix.pair.block_buffers`):
#: its kernel writes in place, while this one is shared with JAX and cannot.
IMPORTANCE_BLOCK_ELEMENTS = 2**16
IMPORTANCE_MIN_BLOCK = 64
#: Fewest rows per block when the tilted tuples are drawn by clusters (:mod:`epscert.matrix.cluster_tilt`): its
#: per-block Python steps dominate small blocks. Cost only. Measured at n = b = 2000, 16 bands, σ = 1.2, θ = 11,
#: one core: REMOVE 0.23 ms a sample at 64 rows, 0.13 at 256, 0.11 at 512, 0.13 at 1024 (ADD 0.09-0.10 up to 512).
CLUSTER_MIN_BLOCK = 512


class NumpySpecial:
    """The special functions the kernels need, for numpy arrays (:mod:`epscert.matrix.jax_kernels` has the JAX
    twin: ``jax_backend.log_ndtr``, its ndtri_exp and a ``lax.while_loop`` Newton; numpy's Newton loops are plain
    Python loops over the lanes still moving, :func:`_line_newton_lanes` and line_roots' ``newton_active``)."""

    log_ndtr = staticmethod(special.log_ndtr)
    ndtri_exp = staticmethod(special.ndtri_exp)


def _log_ndtr_both(sp, hi):
    """(log Φ(hi), log Φ(-hi)): the upper end's two tails, for :func:`log_diff_ndtr_at`."""
    return sp.log_ndtr(hi), sp.log_ndtr(-hi)


def log_diff_ndtr_at(xp, sp, lo, hi_tails):
    """log(Φ(hi) - Φ(lo)) for lo <= hi (either may be ±inf), from whichever tail is accurate, with the upper
    end given by ``hi_tails`` = (log Φ(hi), log Φ(-hi)) (:func:`_log_ndtr_both`: formed once where hi does not
    change, e.g. over an ε grid): both ends in the upper tail (lo > 0) as Φ̄(lo) - Φ̄(hi), else Φ(hi) - Φ(lo)."""
    upper = lo > 0
    q = sp.log_ndtr(xp.where(upper, -lo, lo))
    la = xp.where(upper, q, hi_tails[0])
    lc = xp.where(upper, hi_tails[1], q)
    return la + xp.log(-xp.expm1(xp.minimum(lc - la, 0.0)))


class RemoveLines:
    """Constants of the REMOVE line estimator for one pair: per mode j its neighbours (d_jk > 0)."""

    def __init__(self, pair) -> None:
        g, b = pair.g, pair.bins
        self.b = b
        self.v = pair.diag
        d = g / self.v[None, :]  # column j: d for line j
        near = (d > 0) & ~np.eye(b, dtype=bool)
        width = max(1, int(near.sum(axis=0).max()))
        self.width = width
        idx = np.zeros((b, width), dtype=np.int64)
        dk = np.zeros((b, width))
        mask = np.zeros((b, width), dtype=bool)
        for j in range(b):
            ks = np.flatnonzero(near[:, j])
            idx[j, : ks.size], dk[j, : ks.size], mask[j, : ks.size] = ks, d[ks, j], True
            idx[j, ks.size:] = j
        self.idx, self.d, self.mask = idx, dk, mask
        self.self_or_near = near | np.eye(b, dtype=bool)  # [k, j]: k is j or a neighbour of j
        self.top = min(b, width + 2)  # the largest x off j's neighbourhood is among the top width + 2


def remove_line_log_values(xp, sp, g, lines, lines_consts, half_diag, log_big_b, top_k):
    """(|ε|, N) logs of the values (b/K) Σ_r I_{j_r} over K lines j_r per sample (``lines``, N x K), for g ~ Q.

    With the lines of a sample j_r = (U + floor(r b/K)) mod b, U uniform on {0..b-1}, every line is
    in the set with probability K/b, so E[(b/K) Σ_r I_{j_r}] = Σ_j E[I_j] = δ_remove; K = b (every
    line) gives Z of the module docstring. ``lines_consts`` = (idx, d, mask, self_or_near, v) of
    :class:`RemoveLines`; ``log_big_b`` the values log(b e^ε) over the grid; ``top_k(x)`` returns
    (values, indices) of the ``RemoveLines.top`` largest entries of each row, sorted descending.
    """
    idx_all, d_all, mask_all, self_or_near, v_all = lines_consts
    n, k_lines = lines.shape
    idx, dk, mask, v = idx_all[lines], d_all[lines], mask_all[lines], v_all[lines]  # (N, K, W), (N, K)
    x = g - half_diag  # (N, b)
    sv = xp.sqrt(v)
    g_line = xp.take_along_axis(g, lines, axis=1)  # s = g_j of each line
    # residual exponents of the neighbours along each line j: a_k = x_k - g_j d_k  -> (N, K, W)
    rows = xp.arange(n)[:, None, None]
    a = xp.where(mask, x[rows, idx] - g_line[:, :, None] * dk, -xp.inf)
    own = -0.5 * v  # a_j
    # the sum and maximum of the modes off j's neighbourhood (constants along line j)
    shift = xp.max(x, axis=1, keepdims=True)
    ex = xp.exp(x - shift)
    total = xp.sum(ex, axis=1, keepdims=True)
    local = xp.take_along_axis(ex @ self_or_near.astype(ex.dtype), lines, axis=1)  # Σ over j and its neighbours
    far_sum = xp.maximum(total - local, 0.0)
    log_far = xp.where(far_sum > 0, xp.log(xp.where(far_sum > 0, far_sum, 1.0)) + shift, -xp.inf)
    top_vals, top_idx = top_k(x)
    off = ~self_or_near[top_idx[:, None, :], lines[:, :, None]]  # (N, K, top): top entry off j's set
    first = xp.argmax(off, axis=2)
    far_max = xp.where(xp.any(off, axis=2), xp.take_along_axis(top_vals, first, axis=1), -xp.inf)
    # the interval A_j of s
    lo = far_max + 0.5 * v  # x_j(s) = s - v_j/2 >= every far x_k
    gap = a - own[:, :, None]  # a_k - a_j
    one_minus = 1.0 - dk
    with_lo = mask & (one_minus > 0)
    with_hi = mask & (one_minus < 0)
    level = mask & (one_minus == 0)
    safe = xp.where(one_minus == 0, 1.0, one_minus)
    lo = xp.maximum(lo, xp.max(xp.where(with_lo, gap / safe, -xp.inf), axis=2))
    hi = xp.min(xp.where(with_hi, gap / safe, xp.inf), axis=2)
    empty = xp.any(level & (gap > 0), axis=2) | (lo >= hi)
    # the upper ends of (★) do not depend on ε: their log Φ(±·) once per sample (log_diff_ndtr_at's h side)
    h = xp.where(~empty, hi, 1.0)
    h_near = _log_ndtr_both(sp, (h[:, :, None] - dk * v[:, :, None]) / sv[:, :, None])
    h_own = _log_ndtr_both(sp, (h - v) / sv)
    h_base = _log_ndtr_both(sp, h / sv)
    log_big_b = list(log_big_b)
    # JAX: the grid from the largest ε down, each Newton started at the root of the ε above it (below the
    # start of remove_root, above the new root: S is increasing, and B falls with ε); numpy: as given
    if xp is not np:
        grid = xp.asarray(log_big_b)
        order = xp.argsort(-grid)
    out, root = [], None
    for i in range(len(log_big_b)):
        log_big = log_big_b[i] if xp is np else grid[order[i]]
        root = remove_root(xp, sp, a, dk, own, log_far, v, log_big, None if xp is np else root)
        c = xp.maximum(lo, root)
        ok = ~empty & (c < h)
        # off the lanes kept, a lower end below h (the values there are dropped: no NaN, no warning)
        c = xp.where(ok, c, xp.minimum(h, 0.0) - 1.0)
        # terms of (★): neighbours, the own mode (a_j = -v/2, d = 1), the far constant, -B
        cn = (c[:, :, None] - dk * v[:, :, None]) / sv[:, :, None]
        t_near = xp.where(mask, a + 0.5 * dk * dk * v[:, :, None] + log_diff_ndtr_at(xp, sp, cn, h_near), -xp.inf)
        t_own = log_diff_ndtr_at(xp, sp, (c - v) / sv, h_own)
        base = log_diff_ndtr_at(xp, sp, c / sv, h_base)
        t_far = log_far + base
        pos = xp.concatenate([t_near, t_own[:, :, None], t_far[:, :, None]], axis=2)
        top = xp.maximum(xp.max(pos, axis=2), log_big + base)
        top = xp.where(xp.isfinite(top), top, 0.0)
        rest = xp.sum(xp.exp(pos - top[:, :, None]), axis=2) - xp.exp(log_big + base - top)
        log_value = xp.where(ok & (rest > 0), top + xp.log(xp.where(rest > 0, rest, 1.0)), -xp.inf)
        peak = xp.max(log_value, axis=1)
        peak = xp.where(xp.isfinite(peak), peak, 0.0)
        # (b/K) Σ_r I_r with I_r = value_r / b, in log space (values far below 1e-300 keep their digits)
        out.append(peak + xp.log(xp.sum(xp.exp(log_value - peak[:, None]), axis=1)) - math.log(k_lines))
    if xp is not np:
        return xp.stack(out)[xp.argsort(order)]
    return xp.stack(out)


def stratified_lines(offset, bins: int, count: int, xp=np):
    """(N, K) lines (U + floor(r b/K)) mod b for offsets U (N,): each line has probability K/b."""
    steps = xp.asarray([(r * bins) // count for r in range(count)])
    return (offset[:, None] + steps[None, :]) % bins


def add_line_log_values(xp, sp, g, d, half_diag, var_u, log_b, eps_list, groups=None):
    """(|ε|, N) logs of the values J of the ADD line estimator along the mean (module docstring).

    ``d`` = G u / (uᵀ G u) with u = 1/b, ``var_u`` = uᵀ G u. Modes with the same d_k move together along
    the line, so S(s) = Σ_u A_u e^{s d_u} with A_u = Σ_{k: d_k = d_u} e^{a_k}: ``groups`` = (levels d_u,
    b x U one-hot of each mode's level; :func:`line_groups`) makes every per-ε step work on U columns
    instead of b (U = 1 for a circulant G); None keeps one group per mode. The root of S(s) = b/K is found
    by Newton on log S (convex: a log-sum-exp of affine functions) from the lower of ŝ = -ε + v̄/2 (where
    log S >= log(b/K) by Jensen) and every group's crossing (log(b/K) - log A_u)/d_u (where its term alone is
    b/K), so every iterate is above the root and every term at most b/K; J is formed as
    Φ(s*/√v_u) (1 - (K/b) Σ_u A_u e^{d_u² v_u/2} Φ((s* - d_u v_u)/√v_u)/Φ(s*/√v_u)) in log space.
    """
    s_mean = xp.mean(g, axis=1)
    a = g - s_mean[:, None] * d - half_diag  # a_k = (g_⊥)_k - v_k/2
    if groups is None:
        levels, log_a = d, a
    else:
        levels, onehot = groups
        top = xp.max(a, axis=1, keepdims=True)
        with np.errstate(divide="ignore") if xp is np else contextlib.nullcontext():  # an underflowed A_u: -inf
            log_a = xp.log(xp.exp(a - top) @ onehot) + top  # log A_u
    vbar = 2.0 * xp.mean(half_diag)
    sd = math.sqrt(var_u)
    eps_list = list(eps_list)
    if xp is not np:
        # JAX: per ε, from the smallest up, each Newton started at the lower of ŝ(ε) and the root of the ε below
        # (the target b/K falls with ε, S is increasing: that root is above this one; +inf for the first)
        grid = xp.asarray(eps_list)
        order = xp.argsort(grid)
        out, root = [], xp.full((g.shape[0], 1), xp.inf)
        for i in range(len(eps_list)):
            logs, root = _add_line_chunk(xp, sp, log_a, levels, var_u, sd, vbar, log_b, grid[order[i]][None], root)
            out.append(logs)
        return xp.concatenate(out, axis=0)[xp.argsort(order)]
    # numpy: the grid in chunks of ADD_LINE_ELEMENTS (N, ε, U) entries, one Newton loop per chunk (per ε, the
    # numpy calls on (N, U) arrays of a b = 2000 block, 64 x 31, cost more than their arithmetic)
    chunk = max(1, ADD_LINE_ELEMENTS // max(1, int(g.shape[0]) * int(levels.shape[0])))
    return xp.concatenate([_add_line_chunk(xp, sp, log_a, levels, var_u, sd, vbar, log_b, eps_list[i:i + chunk])[0]
                           for i in range(0, len(eps_list), chunk)], axis=0)


#: Entries of the (N, ε, U) arrays of one numpy Newton loop of :func:`add_line_log_values` (2 MiB of float64).
ADD_LINE_ELEMENTS = 2**18


def _add_line_chunk(xp, sp, log_a, levels, var_u, sd, vbar, log_b, eps_list, above=None):
    """((|ε|, N) log J of :func:`add_line_log_values`, (N, |ε|) roots) for a few ε at once, ε on the middle
    axis. Every entry is the per-ε computation's, operation for operation (the same elementwise steps, the
    same reductions over the last, contiguous axis), and numpy steps each lane on its own
    (:func:`_line_newton_lanes`), so the values are those of one loop per ε. JAX: ``above`` (N, 1), one
    ε: roots of a smaller ε, above this root; the start is the lower of ŝ and it (if rounding left it an ulp
    below the root, f <= 0 and it is kept: within the root's own rounding)."""
    eps = xp.asarray(eps_list)
    log_target = log_b - eps  # log(b/K), (E,)
    scaled = log_a[:, None, :] - log_target[None, :, None]  # log(A_u K/b), (N, E, U)

    def step_tol(_, s):
        m = _line_step(xp, scaled, levels, s)
        return s - m, xp.any(m > NEWTON_TOL * (1.0 + xp.abs(s)))

    # above the root: ŝ (Jensen) and each group's crossing s_u = (log(b/K) - log A_u)/d_u, where S(s_u) >= A_u
    # e^{s_u d_u} = b/K (the modes' common level holds most of S, so the least s_u is within a few hundredths of
    # the root: two or three Newton steps where ŝ took about eight)
    rising = levels > 0
    with np.errstate(divide="ignore", invalid="ignore") if xp is np else contextlib.nullcontext():
        crossing = xp.min(xp.where(rising, -scaled / xp.where(rising, levels, 1.0), xp.inf), axis=2)
    start = xp.minimum(xp.zeros((log_a.shape[0], len(eps_list))) + (-eps + 0.5 * vbar), crossing)
    if xp is np:
        s = _line_newton_lanes(scaled, levels, start)
    else:  # JAX, warm started: stops once no step exceeds NEWTON_TOL (1 + |s|), as remove_root
        s = sp.newton_loop(NEWTON_STEPS, step_tol, xp.minimum(start, above))
    base = sp.log_ndtr(s / sd)
    logs = (log_a[:, None, :] + 0.5 * levels * levels * var_u + sp.log_ndtr((s[:, :, None] - levels * var_u) / sd)
            - log_target[:, None] - base[:, :, None])
    inner = xp.sum(xp.exp(logs), axis=2)  # = (K/b) Σ_u A_u e^{d_u² v/2} Φ(.)/Φ(s*/√v)
    rest = 1.0 - inner
    out = xp.where(rest > 0, base + xp.log(xp.where(rest > 0, xp.minimum(rest, 1.0), 1.0)), -xp.inf)
    return out.T, s


def _line_newton_lanes(scaled: np.ndarray, levels: np.ndarray, start: np.ndarray) -> np.ndarray:
    """numpy: the Newton of :func:`_add_line_chunk` lane by lane, each (sample, ε) lane stepped until its own step
    is at most NEWTON_TOL (1 + |s|) (that step taken), the rest of the loop on the lanes still moving only. A
    lane's iterates depend on its own inputs alone, so the roots do not depend on the chunking; each is above the
    root (Newton on the convex log S from above) and within rounding of it once a step is that small (quadratic
    convergence: the next step would be of the order of its square). The values are stationary in the root
    (dJ/ds* = φ(s*/√v_u)/√v_u (1 - (K/b) S(s*)) = 0 there), so such a root moves them by rounding only."""
    s = np.array(start, dtype=np.float64)
    flat = s.reshape(-1)
    terms = scaled.reshape(flat.size, -1)
    lanes = np.flatnonzero(np.isfinite(flat))
    for _ in range(NEWTON_STEPS):
        if lanes.size == 0:
            break
        now = flat[lanes]
        step = _line_step(np, terms[lanes], levels, now)
        flat[lanes] = now - step
        lanes = lanes[step > NEWTON_TOL * (1.0 + np.abs(now))]
    return s


def _line_step(xp, scaled, levels, s):
    """The Newton step f/f' of f = log S - log(b/K) at s (one value per lane: ``scaled`` has the groups on its last
    axis, ``s`` the lanes' shape), 0 where f <= 0. Every iterate lies in [root, start] and the start is at most each
    group's crossing, so every term A_u e^{s d_u} K/b is <= 1 and their sum >= 1 (S >= b/K above the root): the
    terms need no maximum taken out."""
    w = xp.exp(scaled + s[..., None] * levels)
    total = xp.sum(w, axis=-1)
    f = xp.log(total)
    return xp.where(f > 0, f * total / xp.sum(w * levels, axis=-1), 0.0)


def line_groups(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(levels, one-hot b x U) of the distinct values of d, for :func:`add_line_log_values`."""
    levels, index = np.unique(d, return_inverse=True)
    return levels, (index[:, None] == np.arange(levels.size)[None, :]).astype(np.float64)


def add_bound_log_prob(var_u: float, vbar: float, eps: float) -> float:
    """log Φ(ŝ/√v_u), ŝ = -ε + v̄/2: the proven range of the ADD values (module docstring)."""
    return float(special.log_ndtr((-eps + 0.5 * vbar) / math.sqrt(var_u)))


def remove_importance_log_values(xp, sp, g_noise, comp, mode, u_trunc, g_rows, kriging, thresholds, log_tail_i_k,
                                 half_diag, log_scale, eps_list):
    """(|ε|, N) logs of the values M h/N of the REMOVE importance estimator (module docstring).

    ``comp`` i and ``mode`` k per sample (drawn with probability p_ik / (b M)); ``u_trunc`` in (0, 1];
    ``g_rows`` = G (the mean G e_i of P_i is its row i); ``kriging`` = G / diag(G) (column k is
    G e_k / v_k); ``log_tail_i_k`` = log p_ik of the drawn pair; ``log_scale`` = log M.
    """
    v = 2.0 * half_diag
    g = g_noise + g_rows[comp]
    mean_k = g_rows[comp, mode]
    sd_k = xp.sqrt(v[mode])
    current = xp.take_along_axis(g, mode[:, None], axis=1)[:, 0] - mean_k
    # w_k | w_k >= τ: survival inverse, Φ̄(w/sd) = u Φ̄(τ/sd), i.e. w = -sd Φ^{-1}(u p_ik)
    w_new = -sd_k * sp.ndtri_exp(xp.log(u_trunc) + log_tail_i_k)
    g = g + kriging[:, mode].T * (w_new - current)[:, None]
    x = g - half_diag
    hits = xp.maximum(xp.sum(x >= thresholds, axis=1), 1)
    loss = mk.log_mean_exp(xp, x)
    return xp.stack([log_scale + _log_h(xp, eps - loss) - xp.log(hits.astype(loss.dtype)) for eps in eps_list])


def _log_h(xp, gap):
    """log(1 - e^{gap})_+ = log(-expm1(gap)) for gap < 0, -inf otherwise."""
    neg = gap < 0
    return xp.where(neg, xp.log(-xp.expm1(xp.where(neg, gap, -1.0))), -xp.inf)


def add_importance_log_values(xp, sp, g_noise, u_trunc, d, half_diag, var_u, log_prob, eps_list, bound):
    """(|ε|, N) logs of the values P_V (1 - K e^L)_+ of the ADD importance estimator: the mean s = mean_k g_k
    drawn truncated to s < ``bound`` = ŝ(ε0) (log Pr = ``log_prob``), the rest by kriging."""
    sd = math.sqrt(var_u)
    s_new = sd * sp.ndtri_exp(xp.log(u_trunc) + log_prob)
    s_new = xp.minimum(s_new, bound)  # the law has no mass above ŝ; guards the last ulp
    g = g_noise + (s_new - xp.mean(g_noise, axis=1))[:, None] * d
    loss = mk.log_mean_exp(xp, g - half_diag)
    return xp.stack([log_prob + _log_h(xp, eps + loss) for eps in eps_list])


def remove_thresholds(pair, eps0: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(t, log p (b x b, [i, k]), log M) of the REMOVE importance estimator: t_k = ε0 for every k
    (Σ_k e^{t_k} = b e^{ε0}, so the union of {x_k >= t_k} covers {L > ε0}); p_ik = Pr_i[x_k >= t_k]."""
    v, g = pair.diag, pair.g
    t = np.full(pair.bins, float(eps0))
    z = (t[None, :] + 0.5 * v[None, :] - g) / np.sqrt(v)[None, :]
    log_p = special.log_ndtr(-z)
    log_m = float(special.logsumexp(log_p)) - pair.log_bins
    return t, log_p, log_m


class MatrixValueSampler(ValueSampler):
    """Values Y per ε with δ = E[Y], 0 <= Y <= value_range (module docstring), for one pair.

    ``method`` 'conditional', 'importance' or 'tilted'; ``eps0`` the smallest ε of the grid (the importance
    events are those of ε0, valid for every ε >= ε0); ``order`` the tilt order θ of 'tilted', required
    there (:func:`~epscert.matrix.cluster_tilt.choose_order` over the run's grid, in
    :func:`epscert.config.samplers.value_sampler`: loss_tilt's tables, or clusters for one participation).
    'tilted' takes REMOVE from ``shift`` (:class:`~epscert.matrix.shift_mixture.ShiftMixture`) where given
    (:func:`epscert.matrix.shift_mixture.applies`: the tilt reaches no order above 2 and the block law bounds REMOVE).
    'tilted' uses the conditional estimator's mean line for ADD (its range Φ(ŝ(ε)/√v_u) falls with every ε of the grid; the importance estimator's P_V(ε0) does not,
    and a wide grid left the 'both' UCB at its ADD range).
    """

    guarantee = "mc_upper_confidence"

    def __init__(self, pair, method: str, eps0: float, order: int | None = None, shift=None) -> None:
        if method not in ("conditional", "importance", "tilted"):
            raise ValueError(f"method must be 'conditional', 'importance' or 'tilted', got method={method!r}")
        if shift is not None and method != "tilted":
            raise ValueError(f"shift (the REMOVE shift mixture) is for method='tilted' only, got method={method!r}")
        self.pair, self.method, self.eps0 = pair, method, float(eps0)
        #: 'tilted' only: the REMOVE values' shift mixture (:mod:`epscert.matrix.shift_mixture`) in place of the tilt
        self.shift = shift
        b = pair.bins
        u = np.full(b, 1.0 / b)
        gu = pair.g @ u
        self.var_u = float(u @ gu)
        self.d_mean = gu / self.var_u
        self.d_groups = line_groups(self.d_mean)
        self.vbar = float(np.mean(pair.diag))
        if method == "conditional":
            self.lines = RemoveLines(pair)
            self.lines_per_sample = min(b, LINES_PER_SAMPLE)
        elif method == "tilted":
            if order is None:  # the order is the run's (config.samplers.value_sampler: the grid's), never a default here
                raise ValueError("method='tilted' needs its order (epscert.matrix.cluster_tilt.choose_order)")
            self.tilt = tilt_for(pair, order)
        else:
            self.thresholds, self.log_p, self.log_m = remove_thresholds(pair, self.eps0)
            flat = np.exp(self.log_p.ravel() - self.log_p.max())
            self.cum_p = np.cumsum(flat / flat.sum())
        self.add_log_prob = add_bound_log_prob(self.var_u, self.vbar, self.eps0)

    #: The module of this sampler's JAX kernels, named, not imported (it imports this one and JAX lazily).
    jax_kernels_module = "epscert.matrix.jax_kernels"

    @functools.cached_property
    def kriging(self) -> np.ndarray:
        """G / diag(G) (column k is G e_k / v_k), for 'importance' only: built when first asked for (a b x b
        array, 800 MB at b = 10^4, that the other methods never read)."""
        return self.pair.g / self.pair.diag[None, :]

    def width(self) -> int:
        if self.method == "conditional":
            return 16 * self.lines_per_sample * (self.lines.width + 2) + 4 * self.pair.bins  # (N, K, W) temporaries
        return 4 * self.pair.bins

    @property
    def order(self) -> int:
        """The tilt order θ of 'tilted'."""
        return self.tilt.theta

    def block_size(self) -> int:
        if self.method == "tilted" and self.tilt.by_clusters:
            return max(CLUSTER_MIN_BLOCK, IMPORTANCE_BLOCK_ELEMENTS // self.pair.bins)
        if self.method in ("importance", "tilted"):
            return max(IMPORTANCE_MIN_BLOCK, IMPORTANCE_BLOCK_ELEMENTS // self.pair.bins)
        return max(1, BLOCK_ELEMENTS // self.width())

    def log_scale(self, direction: Direction) -> float:
        return 0.0  # the values carry their scale

    def value_range(self, direction: Direction, epsilons) -> np.ndarray:
        """B(ε) >= every value: REMOVE conditional Σ_j δ_G(ε; √v_j) (upper side of the certified
        Gaussian bracket), importance M; ADD Φ(ŝ(ε)/√v_u) (importance: at ε0), rounded up."""
        return np.maximum(self._range(direction, epsilons), np.finfo(np.float64).tiny)  # a range that underflowed
        # is below the smallest normal, so the smallest normal still bounds every value

    def value_slack(self, direction: Direction, epsilons) -> np.ndarray:
        """The most the computed law of the draws moves the mean from δ, additively: REMOVE draws a cell of
        a computed table by inverse CDF (tilted: the tuples, :meth:`~epscert.matrix.loss_tilt.
        LossTilt.value_slack`; importance: the pair (i, k) among b² cells whose weights exp(log p_ik - max)
        are within 1000 ulp relative, since |log p| <= 745), so the mean moves by at most the law's total
        variation times the range (:func:`~epscert.matrix.loss_tilt.law_tv`); 0 elsewhere (the
        other draws are the generator's own normals and uniforms)."""
        eps = np.asarray(epsilons, dtype=np.float64)
        if direction is Direction.REMOVE and self.method == "tilted":
            return np.zeros(eps.shape) if self.shift is not None else self.tilt.value_slack(eps)
        if direction is Direction.REMOVE and self.method == "importance":
            return law_tv(self.pair.bins**2, 1000) * self.value_range(direction, eps)
        return np.zeros(eps.shape)

    def _range(self, direction: Direction, epsilons) -> np.ndarray:
        eps = np.asarray(epsilons, dtype=np.float64)
        up = 1.0 + 4 * FLOAT_REL
        if direction is Direction.ADD:
            if self.method == "importance":
                return np.full(eps.shape, math.exp(self.add_log_prob) * up)
            return np.exp([add_bound_log_prob(self.var_u, self.vbar, e) for e in eps]) * up
        if self.method == "tilted":
            return self.shift.value_range(eps) if self.shift is not None else self.tilt.value_range(eps)
        if self.method == "importance":
            return np.full(eps.shape, math.exp(self.log_m) * up)
        total = np.zeros_like(eps)
        for vj in np.unique(self.pair.diag):
            count = int(np.sum(self.pair.diag == vj))
            total += count * gaussian_bracket(1.0 / math.sqrt(vj), eps)[1]
        return np.minimum(total * up, float(self.pair.bins))

    def draw(self, rng: np.random.Generator, n: int, direction: Direction, epsilons) -> np.ndarray:
        """(|ε|, n) i.i.d. values for the ε grid ``epsilons`` (all >= ε0)."""
        eps = [float(e) for e in np.asarray(epsilons, dtype=np.float64)]
        if min(eps) < self.eps0:
            raise ValueError(f"epsilons must be >= eps0={self.eps0}, got min epsilon={min(eps)}")
        pair = self.pair
        if direction is Direction.REMOVE and self.shift is not None:  # its own draws (z shifted before the factor)
            g, exponent = self.shift.draw(rng, n)
            return np.exp(self.shift.log_values(g, exponent, eps))
        g_noise = pair.noise(rng.standard_normal((n, pair.bins)))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.exp(self.log_values(rng, g_noise, n, direction, eps))

    def log_values(self, rng: np.random.Generator, g_noise: np.ndarray, n: int, direction: Direction, eps):
        """(|ε|, n) logs of the values, from g_noise = L_G ξ and the rest of the draws taken from rng."""
        pair = self.pair
        if direction is Direction.ADD:
            if self.method in ("conditional", "tilted"):
                return add_line_log_values(np, NumpySpecial, g_noise, self.d_mean, pair.half_diag, self.var_u,
                                           pair.log_bins, eps, self.d_groups)
            u = 1.0 - rng.random(n)
            return add_importance_log_values(np, NumpySpecial, g_noise, u, self.d_mean, pair.half_diag, self.var_u,
                                             self.add_log_prob, eps, -self.eps0 + 0.5 * self.vbar)
        if self.method == "tilted":
            if self.shift is not None:
                raise ValueError("the shift mixture draws its own g (MatrixValueSampler.draw), not from g_noise")
            tuples, log_weight = self.tilt.draw(rng, n)
            g = self.tilt.shifted(g_noise, tuples)  # clusters: each index's band row only
            return remove_tilt_log_values(np, g, tuples, pair.g, pair.half_diag, self.tilt.log_z + log_weight,
                                          self.order, eps, shifted=True)
        if self.method == "conditional":
            lines = self.lines
            chosen = stratified_lines(rng.integers(0, pair.bins, size=n), pair.bins, self.lines_per_sample)
            return remove_line_log_values(np, NumpySpecial, g_noise, chosen,
                                          (lines.idx, lines.d, lines.mask, lines.self_or_near, lines.v),
                                          pair.half_diag, [pair.log_bins + e for e in eps], self._top_k)
        flat = np.minimum(np.searchsorted(self.cum_p, rng.random(n), side="right"), self.cum_p.size - 1)
        # searchsorted 'right' on the normalised cumulative sums is inverse_cdf's count of partial sums <= U
        comp, mode = np.divmod(flat, pair.bins)
        u = 1.0 - rng.random(n)
        return remove_importance_log_values(np, NumpySpecial, g_noise, comp, mode, u, pair.g, self.kriging,
                                            self.thresholds, self.log_p[comp, mode], pair.half_diag, self.log_m, eps)

    def _top_k(self, x: np.ndarray):
        k = self.lines.top
        if k >= x.shape[1]:
            order = np.argsort(-x, axis=1)
            return np.take_along_axis(x, order, axis=1), order
        idx = np.argpartition(-x, k - 1, axis=1)[:, :k]
        vals = np.take_along_axis(x, idx, axis=1)
        order = np.argsort(-vals, axis=1)
        return np.take_along_axis(vals, order, axis=1), np.take_along_axis(idx, order, axis=1)
