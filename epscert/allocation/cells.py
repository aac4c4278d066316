"""Cell laws of a nonnegative random variable and the convex-order combine kernel.

A :class:`CellLaw` is a finite (sub-)probability law on [0, ∞): atoms ``values`` (sorted,
>= 0) with ``masses`` (>= 0). Two chains of such laws are carried, one below and one above
the true law in the **convex order** (X ≤_cx Y iff E f(X) <= E f(Y) for every convex f,
for laws of equal total mass; both chains preserve mass and first moment exactly in exact
arithmetic):

* **contraction (lower chain)** — the atoms that fall in one cell are replaced by one atom at
  their conditional mean. By Jensen, E f(contracted) <= E f(original) for convex f.
  Any grouping is a contraction, so the grouping need not even match the cells exactly.
* **two-point spread (upper chain)** — the atoms of a cell [a, b] (mass M, mean μ) are
  replaced by atoms at a and b with masses M (b − μ)/(b − a) and M (μ − a)/(b − a).
  Since f(z) <= ((b − z) f(a) + (z − a) f(b))/(b − a) on [a, b] for convex f, the spread
  dominates: E f(original) <= E f(spread).

:func:`combine` forms the law of ``a·X + b·Y`` (``"mean"``) or ``X·Y`` (``"product"``) for
independent X, Y from the n² pairs of atoms, and maps it onto a fresh cell grid. Convex order
is closed under these operations whenever the downstream function is convex in the factor
(SPEC §2: (Π_e S_e − e^ε)_+ and (1 − e^ε Π_e S_e)_+ are convex in any single factor, in any
partial mean with nonnegative weights and in any partial product), so by induction

    lower chain ≤_cx true law ≤_cx upper chain,   at every level.

The grid is re-chosen at every level from the two input laws: one bottom cell [0, g_0) (its
spread endpoint 0 is an atom like any other), ``cells`` main cells over the *significant range*
(mass below it and first moment above it at most ``tau`` of the total, bounded from above on
groups of atoms, :func:`significant_range`), uniform in a map of u, the log z distance from the
log of the mean in units of 1/16 of the range (:mod:`epscert.allocation.grid`; its
:class:`~epscert.allocation.grid.GridShape` depends on σ), and ``_TOP_CELLS`` coarser
log-uniform cells up to the largest pair value. The grid affects only the tightness, never the soundness: contraction and
spread are valid for any cells. Each computed pair value z is placed in the cell with
e_k <= z < e_{k+1} *exactly* (a log-based guess is checked against both edges; misses are
searched), so every spread moves each atom only to the edges of a cell that holds it.

Floating point (phase "kernel", reported in :class:`KernelStats`) is carried as two *relative*
allowances per chain law L̂ (computed masses m̂, values v̂), never as an additive term:

* ``mass_rel_error`` r — one-sided: the upper chain has an ideal law V (true ≤_cx V) with
  V <= (1 + r)·L̂ as measures, the lower chain one with L >= (1 − r)·L̂ (true ≥_cx L). Dropping
  mass from the lower chain or adding mass to the upper chain is therefore always safe: the
  integrands are >= 0, the spread acts atom by atom (linear in the measure), and a contraction
  may group the dropped part separately (any grouping is a contraction).
* ``value_rel_error`` Γ — a coupling: each ideal atom v and its computed v̂ satisfy
  v̂/v ∈ [1/(1 + Γ), 1 + Γ]. It survives every step: a mean with nonnegative weights or a
  product of scaled atoms is a scaled pair (Γ_out = max(Γ_x, Γ_y), resp. (1+Γ_x)(1+Γ_y) − 1);
  a contraction of scaled atoms is the scaled contraction of the unscaled ones (the weighted mean
  of θ_i z_i is θ̄·mean(z_i) with θ̄ between the θ_i); and the spread of a computed pair ẑ = θz
  to the edges [a, b] of its cell is θ times the spread of z to [a/θ, b/θ], a mean-preserving
  spread of z (per atom). At the end (:mod:`epscert.allocation.bracket`) Γ only moves e^ε by the
  factor 1 + Γ and scales the sum by 1 + Γ: (v − K)_+ <= (1 + Γ)(v̂ − K/(1 + Γ))_+ and
  (1 − K v)_+ <= (1 − K v̂/(1 + Γ))_+ (and the mirror images for the lower side).

The rounding of one kernel step, with u the unit roundoff and γ_n = n·u/(1 − n·u) (a sum of n
nonnegative terms in any order is within γ_{n−1} relative of the exact sum):

* pair values: ``PAIR_REL_ERROR`` (≤ 3 roundings of nonnegative terms, the weights' included);
* cell sums: ``np.bincount`` adds the ``count`` terms of a cell sequentially within a block of rows
  (``count``: the cell's most in one block; counted, since the mass allowance compounds over the
  levels, roughly T·E times the last step's) and the ``chunks`` block sums are added in order:
  γ_{count+chunks} relative;
* lower chain (contraction): mass M̂ = Σ m̂ (γ_{count+chunks+1} with the pair-mass product);
  the offset Ô = Σ m̂·(ẑ − a) has nonnegative terms (ẑ >= a exactly by the placement; the
  difference and the product each round once), so the mean μ̂ = a + Ô/M̂ has
  |μ̂ − μ| <= u·μ + γ_{2(count+chunks)+3}·(μ − a) and μ − a <= min(1, w/a)·μ: a relative value
  error that is small where the cell is narrow; Γ takes the largest over the cells;
* upper chain (spread): the node masses of a cell are M_b = O/w and M_a = M − O/w, w = b − a,
  the exact spread of the computed pairs (Σ m̂ (b − ẑ)/w = M − O/w). M and O are sums of
  nonnegative terms and M_b one division more: within γ_{count+chunks+5} relative. M_a is a
  difference of two such values with O/w <= M, so its computed value is within
  2γ_{count+chunks+6}·M of the exact one (γ_{k+1}·M from M̂ with the pair-mass products,
  γ_{k+5}·O/w <= γ_{k+5}·M from the quotient with the differences, products and ŵ = fl(b − a),
  u·M from the subtraction, k = count + chunks); the kernel adds that bound (times 1 + 2γ_{k+1}
  for M against M̂, rounded up) to the computed M_a, so it is below the exact mass at a by at most
  the final addition's rounding, u relative, which the relative allowance covers (adding mass
  to the upper chain is safe, above). The mass at b is covered by the relative allowance too: a
  mass error only, and no value error beyond the pair values' own. (The added mass is about
  2γ_{count+chunks+6} of the cell's mass per step.)

Overflow (the top cap): every edge lies below about ``TOP_LIMIT`` = 2^1000 (products of two
atoms can exceed the float range, e.g. at σ = 0.3 over many epochs). A pair whose computed value
is above the top edge b (``inf`` included) is *over the cap*. The lower chain drops it (safe,
above). The upper chain spreads it over [b, ∞): every nonnegative convex f has a recession slope
f'(∞) = lim f(z)/z ∈ [0, ∞] and f(z) <= f(b) + (z − b) f'(∞) <= f(b) + z f'(∞) for z >= b, so
the atom's mass m goes to b and (an upper bound on) its first moment m z, formed without
overflow or underflow (:func:`_excess_moment`), is carried as an *excess moment* D with
E f(true) <= E f(law) + D f'(∞). For the final integrands,
(v − e^ε)_+ has slope 1 (D is added to the REMOVE upper bound) and (1 − e^ε v)_+ slope 0 (the
mass at +∞ contributes nothing to ADD, so D is not added there). Through a later mean a·X + b·Y
the slope of x ↦ f(ax + by) is a f'(∞); through a product X·Y the slope of x ↦ f(xy) is
y f'(∞): :func:`epscert.allocation.epoch.propagate_excess` composes D accordingly.

Underflow (the relative model needs normal results): every main cell lies above
``NORMAL_GUARD``; the lower chain drops pairs whose computed value is below it (dropping is
safe, above), and the upper chain inflates both nodes of the bottom cell [0, g_0) by
M_0·``SUBNORMAL_ABS``/g_0, which covers the absolute error of a subnormal product (<= half the
smallest subnormal); products of atoms >= NORMAL_GUARD that stay above g_0 are normal. A pair
*mass* m_i·m_j computed below the smallest normal ``MIN_NORMAL`` (so exactly below it too) is
dropped by the lower chain; the upper chain spreads it over [0, ∞) like the pairs over the cap
(f(z) <= f(0) + z f'(∞)): mass 2·MIN_NORMAL (>= the pair's, doubled or not) at 0, and its first
moment into D. Without this a pair of tiny mass near the cap could carry a first moment far
above its (unbounded) rounding error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from epscert.allocation.grid import GridShape, MainGrid

#: Unit roundoff of float64.
UNIT_ROUNDOFF = 2.0**-53
#: Coarse log-uniform cells above the significant range (tail first moment <= tau there).
_TOP_CELLS = 16
#: Groups of contiguous atoms per law used to bound the significant range (tightness only).
_RANGE_GROUPS = 256
_EDGE_ATOMS = 32
#: Safety factor on the per-level relative value allowance of the cell means.
FP_SAFETY = 2.0
#: Relative error of one computed pair value: 0.5a + 0.5b and a·b round once, a weighted mean
#: three times (the weight, the product, the sum); (1 + u)^3 − 1 < 4u.
PAIR_REL_ERROR = 4.0 * UNIT_ROUNDOFF
#: Lowest edge of the main cells (2^-960 >> the smallest normal 2^-1022): values above it are normal.
NORMAL_GUARD = 2.0**-960
LOG_NORMAL_GUARD = -960.0 * math.log(2.0)
#: Largest top edge (about; module docstring, overflow): products and means of atoms below it
#: stay finite or overflow to inf, which the kernel sends over the cap.
TOP_LIMIT = 2.0**1000
LOG_TOP_LIMIT = 1000.0 * math.log(2.0)
#: Absolute error bound of a result in the subnormal range (the smallest subnormal, 2^-1074).
SUBNORMAL_ABS = 2.0**-1074
#: The smallest normal float64; pair masses below it are dropped (lower) or raised to it (upper).
MIN_NORMAL = 2.0**-1022
#: Pairs per block of rows of the pair matrix (each block is summed separately, cache-sized).
_BLOCK_PAIRS = 1 << 16
#: Pairs formed by :func:`combine` in this process so far (a work counter: the prefix cache's
#: prefetch budget reads it, :mod:`epscert.allocation.prefix`; no bound depends on it).
PAIRS_FORMED = [0]


@dataclass(frozen=True)
class CellLaw:
    """Atoms ``values`` (sorted ascending, >= 0) with nonnegative ``masses``."""

    values: np.ndarray
    masses: np.ndarray

    @property
    def mass(self) -> float:
        return float(self.masses.sum())

    @property
    def first_moment(self) -> float:
        return float(np.dot(self.masses, self.values))

    def __len__(self) -> int:
        return int(self.values.size)


@dataclass(frozen=True)
class KernelStats:
    """Floating-point bookkeeping of one combine step (see module docstring)."""

    max_count: int
    mass_rel_error: float
    value_rel_error: float
    #: upper bound on the first moment over the cap (pairs of the *computed* atoms; the caller
    #: scales it by the inputs' allowances, :func:`epscert.allocation.epoch.propagate_excess`)
    excess_moment: float = 0.0


def gamma_n(n):
    """γ_n = n·u/(1 − n·u): relative error bound of n roundings (elementwise for arrays)."""
    nu = np.asarray(n, dtype=np.float64) * UNIT_ROUNDOFF
    if np.any(nu >= 0.5):
        raise ValueError("too many terms for the rounding bound γ_n (n·u >= 1/2)")
    return nu / (1.0 - nu)


def rel_product(*rels: float) -> float:
    """Relative allowance of a product of factors each within 1 ± rel: Π (1 + rel) − 1, rounded up.

    Also a valid lower-side allowance: Π (1 − rel) >= 1 − Σ rel >= 1 − (Π (1 + rel) − 1).
    """
    out = 1.0
    for r in rels:
        out *= 1.0 + float(r)
    # 2 roundings per factor, each <= u·out: absolute error of out − 1 below 3·k·u·out
    return (out - 1.0) + 3.0 * len(rels) * UNIT_ROUNDOFF * out


def pair_law(x: CellLaw, y: CellLaw, op: str, weights: tuple[float, float] = (0.5, 0.5)):
    """The pairs of atoms: (values, masses, row of x) of a·x + b·y (op "mean") or x·y ("product").

    When y is x and the operation is symmetric (a product, or equal weights), the law of the
    pair value is the same over (i, j) and (j, i): only i <= j is formed, with the mass of each
    off-diagonal pair doubled (exact in binary floating point).
    """
    if op not in ("mean", "product"):
        raise ValueError(f"op must be 'mean' or 'product', got op={op!r}")
    wa, wb = weights
    if y is x and (op == "product" or wa == wb):
        i, j = np.triu_indices(len(x))
        a, b = x.values[i], x.values[j]
        z = wa * a + wb * b if op == "mean" else a * b
        m = x.masses[i] * x.masses[j]
        m[i != j] *= 2.0
        return z, m, i
    if op == "mean":
        z = (wa * x.values)[:, None] + (wb * y.values)[None, :]
    else:
        z = x.values[:, None] * y.values[None, :]
    m = x.masses[:, None] * y.masses[None, :]
    rows = np.repeat(np.arange(len(x)), len(y))
    return z.ravel(), m.ravel(), rows


def _groups(law: CellLaw, groups: int):
    """Contiguous groups of atoms: (mass, first moment, smallest value, largest value) each.

    The ``_EDGE_ATOMS`` lowest and highest atoms (the coarse top cells, the tails) are groups of
    their own; the rest is cut into ``groups`` runs of about equal length.
    """
    n = len(law)
    k = min(_EDGE_ATOMS, n // 2)
    starts = np.unique(np.concatenate([np.arange(k), np.linspace(k, n - k, groups + 1).astype(np.intp),
                                       np.arange(n - k, n)]))
    starts = starts[starts < n]
    ends = np.append(starts[1:], n) - 1
    mass = np.add.reduceat(law.masses, starts)
    moment = np.add.reduceat(law.masses * law.values, starts)
    return mass, moment, law.values[starts], law.values[ends]


def _pair_values(a, b, op: str, wa: float, wb: float):
    """The pair value op(a, b), formed exactly as in the kernel (so equal inputs round equally)."""
    return wa * a + wb * b if op == "mean" else a * b


def significant_range(x: CellLaw, y: CellLaw, op: str, weights: tuple[float, float],
                      tau: float) -> tuple[float, float, float]:
    """(lo, hi, top) in log z: mass below e^lo and first moment above e^hi each <= tau of the total.

    Bounded on groups of contiguous atoms (``_RANGE_GROUPS`` per law): the pair of groups g, h
    has values in [op(min_g, min_h), op(max_g, max_h)] (op is increasing in both arguments on
    [0, ∞)), so counting its whole mass below t when its smallest value is < t (and its whole
    first moment above t when its largest value is > t) over-estimates both tails; the range is
    therefore at least as wide as the exact one. Only the tightness depends on it (module
    docstring). ``top`` is the log of an upper bound on the largest pair value (the caller
    compares the exact pair values with the top edge anyway), at most ``LOG_TOP_LIMIT``; lo and
    hi are clamped to it too (pairs above it go over the cap, module docstring).
    """
    wa, wb = weights
    mx, fx, lx, ux = _groups(x, _RANGE_GROUPS)
    my, fy, ly, uy = _groups(y, _RANGE_GROUPS)
    with np.errstate(over="ignore"):  # inf: over the cap (module docstring)
        zmin = _pair_values(lx[:, None], ly[None, :], op, wa, wb).ravel()
        zmax = _pair_values(ux[:, None], uy[None, :], op, wa, wb).ravel()
    mass = (mx[:, None] * my[None, :]).ravel()
    if op == "mean":
        moment = (wa * fx[:, None] * my[None, :] + wb * mx[:, None] * fy[None, :]).ravel()
    else:
        moment = (fx[:, None] * fy[None, :]).ravel()
    with np.errstate(divide="ignore", over="ignore"):
        order = np.argsort(zmin)
        below = np.cumsum(mass[order])
        k = min(int(np.searchsorted(below, tau * below[-1], side="right")), below.size - 1)
        positive = zmin[zmin > 0.0]
        lo = math.log(max(zmin[order][k], positive.min() if positive.size else 0.0) or 1.0)
        order = np.argsort(zmax)[::-1]
        above = np.cumsum(moment[order])
        k = min(int(np.searchsorted(above, tau * above[-1], side="right")), above.size - 1)
        hi = math.log(zmax[order][k]) if zmax[order][k] > 0.0 else lo
        top_value = float(zmax.max())
        top = math.log(top_value) if top_value > 0.0 else lo
    lo, top = min(lo, LOG_TOP_LIMIT), min(top, LOG_TOP_LIMIT)
    hi = min(max(hi, lo), top)
    return lo, hi, top


def _block_masses(x: CellLaw, y: CellLaw, r0: int, r1: int, c0: int, symmetric: bool):
    """(masses, tiny) of the pairs (i, j), r0 <= i < r1, j >= c0, flattened; in the symmetric case
    (c0 = r0) pairs with j < i get 0 and pairs with j > i twice their mass (exact: multiplication
    by 0, 1, 2). ``tiny`` marks the pairs (mass not structurally 0) whose product m_i·m_j was
    computed below ``MIN_NORMAL``: the exact product is below it too (rounding is monotone and
    MIN_NORMAL is a float), but its relative error is not bounded (module docstring, underflow)."""
    m = x.masses[r0:r1, None] * y.masses[None, c0:]
    tiny = m < MIN_NORMAL
    if symmetric:
        rows = r1 - r0
        factor = np.tri(rows, rows, -1, dtype=np.float64).T * 2.0 + np.eye(rows)
        tiny[:, :rows] &= factor > 0.0
        m[:, :rows] *= factor
        m[:, rows:] *= 2.0
    return m.ravel(), tiny.ravel()


def upper_product(a, b):
    """An upper bound on the exact a·b for floats a, b >= 0: max(fl(ab), MIN_NORMAL)·(1 + 4u).

    If fl(ab) is normal, ab <= fl(ab)(1 + u); if not, ab < MIN_NORMAL (monotone rounding); the
    final product rounds once more, (1 + 4u)(1 − u) >= 1 + u. Overflow gives inf (still a bound).
    """
    with np.errstate(over="ignore"):
        return np.maximum(np.multiply(a, b), MIN_NORMAL) * (1.0 + 4.0 * UNIT_ROUNDOFF)


def _excess_moment(x: CellLaw, y: CellLaw, op: str, weights: tuple[float, float], rows: np.ndarray,
                   cols: np.ndarray, mult: np.ndarray) -> float:
    """An upper bound on Σ mult·m_i·m_j·op(x_i, y_j) over the given pairs, free of overflow and
    underflow: product (m_i x_i)(m_j y_j), mean a (m_i x_i) m_j + b m_i (m_j y_j), every product
    by :func:`upper_product`, the sum of the n nonnegative terms raised by γ_{n+2}."""
    mi, mj = x.masses[rows], y.masses[cols]
    ai, bj = upper_product(mi, x.values[rows]), upper_product(mj, y.values[cols])
    if op == "product":
        terms = upper_product(ai, bj)
    else:
        wa, wb = weights
        terms = upper_product(upper_product(wa, ai), mj) + upper_product(upper_product(wb, bj), mi)
    with np.errstate(over="ignore"):
        return float(np.dot(terms, mult) * (1.0 + gamma_n(rows.size + 2)))


def cell_grid(x: CellLaw, y: CellLaw, op: str, weights: tuple[float, float], *, cells: int, tau: float,
              shape: GridShape = GridShape()):
    """(edges, main grid or None, lo, main cells) of the fresh grid of one combine step.

    Boundaries 0 | e^lo ... e^hi (``cells`` main cells) ... e^top (``_TOP_CELLS``), the top edge
    raised to the largest pair value but not above ``TOP_LIMIT``; e^lo >= ``NORMAL_GUARD``
    (module docstring, underflow and overflow).
    """
    wa, wb = weights
    lo, hi, top = significant_range(x, y, op, weights, tau)
    lo = max(lo, LOG_NORMAL_GUARD)
    hi, top = max(hi, lo), max(top, lo)
    n_main = cells if hi > lo else 0
    grid = MainGrid.build(x, y, op, weights, lo, hi, n_main, shape) if n_main else None
    main = grid.log_edges if n_main else np.array([lo])
    n_top = _TOP_CELLS if top > main[-1] else 0
    upper_part = np.linspace(main[-1], top, n_top + 1)[1:] if n_top else np.empty(0)
    edges = np.concatenate([[0.0], np.exp(np.concatenate([main, upper_part]))])
    with np.errstate(over="ignore"):
        z_max = float(_pair_values(x.values[-1:], y.values[-1:], op, wa, wb)[0])
    edges[-1] = min(max(edges[-1], z_max), TOP_LIMIT)  # holds the largest pair value, or the cap
    return np.maximum.accumulate(edges), grid, lo, n_main


def combine(x: CellLaw, y: CellLaw, op: str, chain: str, *, cells: int, tau: float,
            weights: tuple[float, float] = (0.5, 0.5),
            shape: GridShape = GridShape()) -> tuple[CellLaw, KernelStats]:
    """Law of a·X + b·Y or X·Y mapped onto a fresh grid: contraction ("lower") or spread ("upper").

    The returned :class:`KernelStats` hold this step's own relative allowances (module
    docstring); the caller composes them with the inputs' (:func:`rel_product`).

    The n² pairs are formed in blocks of rows (``_BLOCK_PAIRS`` pairs, cache-sized); each block
    is accumulated by its own sequential sums, and the blocks' per-cell sums are then added in
    order. Every pair is placed in the cell [e_k, e_{k+1}) that holds its computed value
    exactly: a log-based guess, then a check against both edges and a search for the rare misses.
    Pairs above the top edge are over the cap (module docstring, overflow): dropped by the lower
    chain, moved to the top edge by the upper chain with their first moment in ``excess_moment``.
    """
    if chain not in ("lower", "upper"):
        raise ValueError(f"chain must be 'lower' or 'upper', got chain={chain!r}")
    if op not in ("mean", "product"):
        raise ValueError(f"op must be 'mean' or 'product', got op={op!r}")
    if len(x) == 0 or len(y) == 0:
        # the lower chain may have dropped every atom (all pairs under NORMAL_GUARD or over the cap, e.g.
        # σ <= 0.05 over many epochs): the zero measure is below every law, and so is its combine
        if chain == "upper":
            raise ValueError("the upper chain never drops mass, got an empty law")
        empty = CellLaw(np.empty(0), np.empty(0))
        return empty, KernelStats(0, 0.0, 0.0)
    wa, wb = weights
    symmetric = y is x and (op == "product" or wa == wb)
    edges, grid, lo, n_main = cell_grid(x, y, op, weights, cells=cells, tau=tau, shape=shape)
    lower = chain == "lower"
    n_cells = edges.size - 1
    width = np.diff(edges)
    right = edges[1:]
    mass = np.zeros(n_cells)
    offset = np.zeros(n_cells)  # Σ m (z − a): the mean (lower) or the mass at b (upper)
    counts = np.zeros(n_cells, dtype=np.int64)  # per cell, the most terms of one block's sum
    right_open = right.copy()
    right_open[-1] = math.inf  # the last cell is closed: z == top edge is no miss
    last_guess = float(min(n_main + 1, n_cells - 1))
    top_edge = edges[-1]
    excess = 0.0  # Σ m z over the cap and of the tiny masses (upper chain), computed atoms
    n_excess = 0
    n_rows, n_cols = len(x), len(y)
    PAIRS_FORMED[0] += n_rows * n_cols // (2 if symmetric else 1)
    rows_per_block = max(1, _BLOCK_PAIRS // max(1, n_cols))
    chunks = 0
    for r0 in range(0, n_rows, rows_per_block):
        r1 = min(n_rows, r0 + rows_per_block)
        c0 = r0 if symmetric else 0
        with np.errstate(over="ignore"):  # inf is over the cap
            z = _pair_values(x.values[r0:r1, None], y.values[None, c0:], op, wa, wb).ravel()
        m, tiny = _block_masses(x, y, r0, r1, c0, symmetric)
        if lower:
            m[z < NORMAL_GUARD] = 0.0  # may have underflowed: dropped (safe for the lower chain)
        over = z > top_edge
        special = np.flatnonzero(over | tiny)
        if special.size:  # over the cap or of tiny mass (module docstring): the lower chain drops them
            if lower:
                m[special] = 0.0
            else:  # spread over [top edge, ∞) resp. [0, ∞): the moment into the excess
                rows, cols = r0 + special // (n_cols - c0), c0 + special % (n_cols - c0)
                mult = np.where(rows == cols, 1.0, 2.0) if symmetric else np.ones(special.size)
                excess += _excess_moment(x, y, op, weights, rows, cols, mult)
                n_excess += special.size
            z[over] = top_edge
            if not lower:
                m[tiny] = 2.0 * MIN_NORMAL  # >= mult·m_i·m_j (mult <= 2), at 0 (even if over the cap)
                z[tiny] = 0.0
        with np.errstate(divide="ignore"):
            t = np.log(z)
        if grid is not None:
            np.maximum(t, lo - 1.0, out=t)  # log 0 = -inf: the bottom cell (no inf/inf below)
            t = grid.position(t)
        np.clip(t, 0.0, last_guess, out=t)
        idx = t.astype(np.intp)
        d = z - edges[idx]
        miss = np.flatnonzero((d < 0.0) | (z >= right_open[idx]))
        if miss.size:  # exact placement: e_k <= z < e_{k+1} (the last cell closed)
            k = np.searchsorted(edges, z[miss], side="right") - 1
            idx[miss] = np.clip(k, 0, n_cells - 1)
            d[miss] = z[miss] - edges[idx[miss]]
        d *= m
        mass += np.bincount(idx, weights=m, minlength=n_cells)
        offset += np.bincount(idx, weights=d, minlength=n_cells)
        np.maximum(counts, np.bincount(idx, minlength=n_cells), out=counts)
        chunks += 1
    occupied = mass > 0.0
    terms = counts + chunks
    if lower:
        safe_mass = np.where(occupied, mass, 1.0)
        values = np.minimum(edges[:-1] + np.minimum(offset / safe_mass, width), right)
        out = CellLaw(values[occupied], mass[occupied])
        with np.errstate(divide="ignore", invalid="ignore"):
            rel_w = np.where(edges[:-1] > 0, width / np.where(edges[:-1] > 0, edges[:-1], 1.0), 1.0)
        rel_w = np.minimum(rel_w * (1.0 + 4.0 * UNIT_ROUNDOFF), 1.0)
        mean_rel = FP_SAFETY * (UNIT_ROUNDOFF + gamma_n(2 * terms + 3) * rel_w * (1.0 + UNIT_ROUNDOFF))
        value_rel = rel_product(PAIR_REL_ERROR, float(np.max(np.where(occupied, mean_rel, 0.0))))
        mass_rel = float(np.max(np.where(occupied, gamma_n(terms + 1), 0.0)))
    else:
        safe_w = np.where(width > 0, width, 1.0)
        at_b = np.where(width > 0, offset / safe_w, 0.0)
        # the mass at a, M − O/w, is a difference: raised by its error bound (module docstring)
        slack = 2.0 * gamma_n(terms + 6) * (1.0 + 2.0 * gamma_n(terms + 1)) * (1.0 + 4.0 * UNIT_ROUNDOFF)
        at_a = np.where(width > 0, np.maximum(mass - at_b, 0.0) + slack * mass, mass)
        node_mass = np.zeros(n_cells + 1)
        node_mass[:-1] += at_a
        node_mass[1:] += at_b
        if occupied[0]:  # subnormal products in the bottom cell (module docstring)
            node_mass[:2] += mass[0] * (SUBNORMAL_ABS / edges[1]) * (1.0 + 4.0 * UNIT_ROUNDOFF)
        nz = node_mass > 0.0
        out = CellLaw(edges[nz], node_mass[nz])
        value_rel = PAIR_REL_ERROR
        mass_rel = float(np.max(np.where(occupied, gamma_n(terms + 5), 0.0)))
    stats = KernelStats(
        max_count=int(counts.max()) if counts.size else 0,
        mass_rel_error=mass_rel,
        value_rel_error=value_rel,
        # the chunks' bounds added in order, and this product: γ_{chunks+1}
        excess_moment=float(excess * (1.0 + gamma_n(chunks + 1))) if n_excess else 0.0,
    )
    return out, stats


#: Relative allowance on K = e^ε as computed (numpy's exp is within a few ulp; one more rounding
#: for the scaling below): the upper side uses K·(1 − K_SLACK), the lower side K·(1 + K_SLACK).
K_SLACK = 8.0 * UNIT_ROUNDOFF


def evaluation_rel_error(law: CellLaw) -> float:
    """Relative rounding of Σ m·(hockey term) over the atoms of ``law``.

    Each term (v − K)_+·m or (1 − K v)_+·m is formed with at most 3 roundings of nonnegative
    quantities (relative 3u), and a sum of n nonnegative terms in any order is within (n − 1)u
    relative of the exact sum, so (n + 4)u bounds the relative error of the computed hockey value
    for the K actually used. K itself is moved outward by ``K_SLACK`` (both integrands are
    non-increasing in K), which covers the rounding of e^ε.
    """
    return (len(law) + 4) * UNIT_ROUNDOFF


def k_outward(epsilons: np.ndarray, side: str, value_rel: float = 0.0) -> np.ndarray:
    """K = e^ε moved outward for ``side``: by ``K_SLACK`` (its rounding) and by the factor
    1 + ``value_rel`` of the chain's relative value error Γ (module docstring): the upper side
    uses K(1 − K_SLACK)/(1 + Γ), the lower side K(1 + K_SLACK)(1 + Γ). The scalar factor is
    formed with <= 3 roundings and pushed outward by 4u more, so it is on the safe side."""
    if side == "upper":
        factor = (1.0 - K_SLACK) / (1.0 + value_rel) * (1.0 - 4.0 * UNIT_ROUNDOFF)
    else:
        factor = (1.0 + K_SLACK) * (1.0 + value_rel) * (1.0 + 4.0 * UNIT_ROUNDOFF)
    return np.exp(np.asarray(epsilons, dtype=np.float64)) * factor


def hockey_remove(law: CellLaw, epsilons: np.ndarray, side: str = "upper", value_rel: float = 0.0) -> np.ndarray:
    """Σ m (v − K)_+ for every ε, with K = e^ε moved outward for ``side`` (:func:`k_outward`)."""
    k = k_outward(epsilons, side, value_rel)
    return np.maximum(law.values[None, :] - k[:, None], 0.0) @ law.masses


def hockey_add(law: CellLaw, epsilons: np.ndarray, side: str = "upper", value_rel: float = 0.0) -> np.ndarray:
    """Σ m (1 − K v)_+ for every ε, with K = e^ε moved outward for ``side`` (:func:`k_outward`)."""
    k = k_outward(epsilons, side, value_rel)
    with np.errstate(over="ignore"):  # e^ε·v = inf only where the integrand is 0
        return np.maximum(1.0 - k[:, None] * law.values[None, :], 0.0) @ law.masses


def log_edges_uniform(lo: float, hi: float, cells: int) -> np.ndarray:
    """``cells + 1`` log-uniform edges between e^lo and e^hi (helper for the base law)."""
    if not (hi > lo and cells >= 1 and math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"need finite lo < hi and cells >= 1, got lo={lo}, hi={hi}, cells={cells}")
    return np.exp(np.linspace(lo, hi, cells + 1))
