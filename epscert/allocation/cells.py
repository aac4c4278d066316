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

The grid is re-chosen at every level from the pair law itself: one bottom cell [0, g_0) (its
spread endpoint 0 is an atom like any other), ``cells`` cells uniform in log z over the
*significant range* (mass below it and first moment above it at most ``tau`` of the total),
and ``_TOP_CELLS`` coarser log-uniform cells up to the largest atom. The grid affects only
the tightness, never the soundness: contraction and spread are valid for any cells.

Floating point (phase "kernel", reported in :class:`KernelStats`): masses are products and
sums of nonnegative numbers, so each computed mass has a *relative* error; the per-cell sum
of ``count`` terms (``np.bincount`` adds sequentially) is within ``count·u`` relative, and a
product of two masses adds the two inputs' relative errors plus u. The recursion
r_out = r_x + r_y + (count_max + 2)·u is returned as ``mass_rel_error``. Cell means are
computed from offsets, μ = a + Σ m (z − a)/Σ m, so the error of μ is at most
(count·h + 4)·u·μ with h the relative cell width; its effect on any later expectation of the
functions above is at most that relative error times the first moment (remove; f is
1-Lipschitz in the factor after scaling by the other factors' means) or the mass (add;
e^ε·x·Lip <= 1 where the integrand is positive). ``value_abs_error`` collects that
per-level additive share (times a safety factor 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Unit roundoff of float64.
UNIT_ROUNDOFF = 2.0**-53
#: Coarse log-uniform cells above the significant range (tail first moment <= tau there).
_TOP_CELLS = 16
#: Probe bins used to locate the significant range (refined until it spans _MIN_PROBE_SPAN).
_PROBE_BINS = 4096
_MIN_PROBE_SPAN = 256
_MAX_PROBE_PASSES = 6
#: Safety factor on the per-level floating-point allowance of the cell means.
_FP_SAFETY = 2.0
#: Row groups of the pair matrix accumulated separately (shortens the sequential sums).
_CHUNKS = 32


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
    value_abs_error: float


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


def _significant_range(lz: np.ndarray, m: np.ndarray, mz: np.ndarray, tau: float) -> tuple[float, float]:
    """[lo, hi] in log z with mass below lo and first moment above hi each <= tau of the total.

    Located on a probe histogram, refined until the range spans at least _MIN_PROBE_SPAN
    probe bins (rounded outward to probe edges, so the criterion holds for the returned range).
    """
    finite = np.isfinite(lz)
    lo, hi = float(lz[finite].min()), float(lz[finite].max())
    m_tot, f_tot = float(m.sum()), float(mz.sum())
    for _ in range(_MAX_PROBE_PASSES):
        if not hi > lo:
            return lo, lo
        width = (hi - lo) / _PROBE_BINS
        idx = np.clip(np.floor((lz[finite] - lo) / width), 0, _PROBE_BINS - 1).astype(np.intp)
        pm = np.bincount(idx, weights=m[finite], minlength=_PROBE_BINS)
        pf = np.bincount(idx, weights=mz[finite], minlength=_PROBE_BINS)
        below = np.cumsum(pm) + float(m[~finite].sum())  # mass at or below each probe bin
        above = np.cumsum(pf[::-1])[::-1]  # first moment at or above each probe bin
        k_lo = int(np.searchsorted(below, tau * m_tot, side="right"))  # bins < k_lo: mass <= tau
        good = np.nonzero(above > tau * f_tot)[0]
        k_hi = int(good[-1]) if good.size else _PROBE_BINS - 1  # bins > k_hi: moment <= tau
        k_lo = min(k_lo, k_hi)
        new_lo, new_hi = lo + k_lo * width, lo + (k_hi + 1) * width
        span = k_hi + 1 - k_lo
        lo, hi = new_lo, min(new_hi, hi)
        if span >= _MIN_PROBE_SPAN:
            break
    return lo, hi


def combine(x: CellLaw, y: CellLaw, op: str, chain: str, *, cells: int, tau: float,
            weights: tuple[float, float] = (0.5, 0.5), copies: float = 1.0,
            weight_total: float = 1.0) -> tuple[CellLaw, KernelStats]:
    """Law of a·X + b·Y or X·Y mapped onto a fresh grid: contraction ("lower") or spread ("upper").

    ``copies`` bounds how often the output law appears as an independent factor/summand in the
    final product over all epochs, ``weight_total`` the sum of its linear weights there (E for
    per-epoch laws, E/2^j for a block of 2^j epochs); both only scale the floating-point share.
    """
    if chain not in ("lower", "upper"):
        raise ValueError(f"chain must be 'lower' or 'upper', got chain={chain!r}")
    z, m, rows = pair_law(x, y, op, weights)
    keep = m > 0.0
    z, m, rows = z[keep], m[keep], rows[keep]
    with np.errstate(divide="ignore"):
        lz = np.log(z)
    mz = m * z
    lo, hi = _significant_range(lz, m, mz, tau)
    top = float(lz[np.isfinite(lz)].max()) if np.any(np.isfinite(lz)) else lo
    # boundaries: 0 | exp(lo) ... exp(hi) (cells) ... exp(top) (_TOP_CELLS)
    n_main = cells if hi > lo else 0
    main = np.linspace(lo, hi, n_main + 1) if n_main else np.array([lo])
    n_top = _TOP_CELLS if top > main[-1] else 0
    upper_part = np.linspace(main[-1], top, n_top + 1)[1:] if n_top else np.empty(0)
    log_edges = np.concatenate([main, upper_part])
    edges = np.concatenate([[0.0], np.exp(log_edges)])
    if n_top:
        edges[-1] = max(edges[-1], float(z.max()))  # the top edge must hold the largest atom
    n_cells = edges.size - 1
    # cell index: 0 = [0, e^lo), then uniform-in-log cells, then the top cells
    idx = np.zeros(z.size, dtype=np.intp)
    fin = np.isfinite(lz)
    if n_main:
        step = (hi - lo) / n_main
        k = np.floor((lz[fin] - lo) / step).astype(np.intp) + 1
        if n_top:
            step_t = (top - hi) / n_top
            kt = np.floor((lz[fin] - hi) / step_t).astype(np.intp) + 1 + n_main
            k = np.where(lz[fin] >= hi, kt, k)
        idx[fin] = np.clip(k, 0, n_cells - 1)
    left = edges[idx]
    # chunked accumulation: rows of the pair matrix in _CHUNKS groups, one bincount, then a
    # short sum over chunks; per-cell sum error <= (max chunk-cell count + _CHUNKS)·u relative
    n_rows = len(x)
    chunks = min(_CHUNKS, n_rows)
    row_chunk = (np.arange(n_rows) * chunks) // n_rows
    chunk_of_pair = row_chunk[rows]
    flat = idx + n_cells * chunk_of_pair
    size = n_cells * chunks
    mass = np.bincount(flat, weights=m, minlength=size).reshape(chunks, n_cells).sum(axis=0)
    offset = np.bincount(flat, weights=m * (z - left), minlength=size).reshape(chunks, n_cells).sum(axis=0)
    counts = np.bincount(flat, minlength=size).reshape(chunks, n_cells).max(axis=0)
    width = np.diff(edges)
    occupied = mass > 0.0
    # relative position of the mean in its cell, clipped to [0, 1] (rounding only)
    frac = np.zeros(n_cells)
    safe_w = np.where(width > 0, width, 1.0)
    frac[occupied] = np.clip(offset[occupied] / mass[occupied] / safe_w[occupied], 0.0, 1.0)
    frac[width <= 0] = 0.0
    if chain == "lower":
        values = edges[:-1] + frac * width
        out = CellLaw(values[occupied], mass[occupied])
    else:
        node_mass = np.zeros(n_cells + 1)
        node_mass[:-1] += mass * (1.0 - frac)
        node_mass[1:] += mass * frac
        nz = node_mass > 0.0
        out = CellLaw(edges[nz], node_mass[nz])
    sum_err = (counts + chunks + 2) * UNIT_ROUNDOFF  # relative, per cell
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_w = np.where(edges[:-1] > 0, width / np.where(edges[:-1] > 0, edges[:-1], 1.0), 1.0)
    # relative error of each cell mean: offset sum and mass sum (each (count+chunks)·u of a
    # quantity <= width·mass) plus the pair values' own rounding (4u)
    gamma = _FP_SAFETY * (2.0 * (counts + chunks + 2) * np.minimum(rel_w, 1.0) + 4.0) * UNIT_ROUNDOFF
    mean = edges[:-1] + frac * width
    remove_share = weight_total * float(np.sum(mass * mean * gamma))
    add_share = max_present(gamma, mass, copies)
    stats = KernelStats(
        max_count=int(counts.max()) if counts.size else 0,
        mass_rel_error=float(np.max(np.where(occupied, sum_err, 0.0))) + UNIT_ROUNDOFF,
        value_abs_error=max(remove_share, add_share),
    )
    return out, stats


def max_present(gamma: np.ndarray, mass: np.ndarray, copies: float) -> float:
    """Bound on E[max γ over the cells hit by ``copies`` independent draws of a law with masses.

    Layer cake: with γ sorted decreasing, E[max] = Σ_k (γ_(k) − γ_(k+1)) P(some draw in the first
    k cells) <= Σ_k (γ_(k) − γ_(k+1)) min(1, copies·Σ_{j<=k} M_(j)).
    """
    order = np.argsort(gamma)[::-1]
    g = gamma[order]
    steps = g - np.append(g[1:], 0.0)
    hit = np.minimum(1.0, copies * np.cumsum(mass[order]) * (1.0 + 4.0 * UNIT_ROUNDOFF * mass.size))
    return float(np.dot(steps, hit))


def hockey_remove(law: CellLaw, epsilons: np.ndarray) -> np.ndarray:
    """Σ m (v − e^ε)_+ for every ε (exact for the atoms; vectorised over ε)."""
    k = np.exp(np.asarray(epsilons, dtype=np.float64))
    return np.maximum(law.values[None, :] - k[:, None], 0.0) @ law.masses


def hockey_add(law: CellLaw, epsilons: np.ndarray) -> np.ndarray:
    """Σ m (1 − e^ε v)_+ for every ε."""
    k = np.exp(np.asarray(epsilons, dtype=np.float64))
    with np.errstate(over="ignore"):  # e^ε·v = inf only where the integrand is 0
        return np.maximum(1.0 - k[:, None] * law.values[None, :], 0.0) @ law.masses


def log_edges_uniform(lo: float, hi: float, cells: int) -> np.ndarray:
    """``cells + 1`` log-uniform edges between e^lo and e^hi (helper for the base law)."""
    if not (hi > lo and cells >= 1 and math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"need finite lo < hi and cells >= 1, got lo={lo}, hi={hi}, cells={cells}")
    return np.exp(np.linspace(lo, hi, cells + 1))
