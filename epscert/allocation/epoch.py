"""One epoch: the law of S = (1/T) Σ_t W_t by doubling, in both convex-order chains.

X_0 is the (lower or upper) cell law of W on [0, c] (:func:`epscert.allocation.tails.base_laws`);
X_{k+1} = (X_k + X_k')/2 for two independent copies is the law of the mean of 2^k W's.
With T = Σ_k b_k 2^k in binary, the running mean R of the blocks used so far (count r) absorbs
X_k for every set bit: R ← (r/(r + 2^k))·R + (2^k/(r + 2^k))·X_k, independent blocks.
Each step is :func:`epscert.allocation.cells.combine` (contraction for the lower chain, spread
for the upper chain); by induction lower ≤_cx S·1_G ≤_cx upper (G: no W above the cap).

Floating-point bookkeeping (:class:`ChainLaw`, both allowances relative; see
:mod:`epscert.allocation.cells`): ``mass_rel_error`` r composes as a product of masses,
1 + r(X_{k+1}) = (1 + r(X_k))²(1 + kernel share), and likewise for R' from R and X_k;
``value_rel_error`` Γ of a weighted mean of scaled atoms (nonnegative weights) is the larger of
the inputs' Γ, composed with the kernel share (:func:`epscert.allocation.cells.rel_product`).
``excess_moment`` D (upper chain only): the first moment sent over the top cap, with
E f(true) <= E f(law) + D·f'(∞) for nonnegative convex f (:mod:`epscert.allocation.cells`,
overflow); :func:`propagate_excess` composes it through means and products.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from epscert.allocation.cells import UNIT_ROUNDOFF, CellLaw, KernelStats, combine, evaluation_rel_error, rel_product
from epscert.allocation.grid import GridShape

#: Relative rounding allowance of one :func:`propagate_excess` formula (<= 6 roundings of
#: nonnegative terms: (1 + u)^6 < 1 + 8u).
EXCESS_ROUNDING = 8.0 * UNIT_ROUNDOFF


@dataclass(frozen=True)
class ChainLaw:
    """A cell law with its floating-point allowances (see module docstring)."""

    law: CellLaw
    mass_rel_error: float
    value_rel_error: float
    max_count: int = 0
    excess_moment: float = 0.0

    @property
    def moment_bound(self) -> float:
        """Upper bound on the first moment of the ideal law (module docstring of cells: the ideal
        masses within 1 + r, values within 1 + Γ, and the sum's rounding)."""
        rel = rel_product(self.mass_rel_error, self.value_rel_error, evaluation_rel_error(self.law))
        return self.law.first_moment * (1.0 + rel)


def propagate_excess(x: ChainLaw, y: ChainLaw, op: str, weights: tuple[float, float],
                     stats: KernelStats) -> float:
    """The excess moment D of op(X, Y) (:mod:`epscert.allocation.cells`, overflow).

    Mean a·X + b·Y: x ↦ f(ax + by) has recession slope a·f'(∞), so D = a D_x + b D_y + new.
    Product X·Y: E_X f(Xy) <= E f(U_x y) + D_x·y·f'(∞), then y ↦ E f(U_x y) is convex with slope
    E[U_x] f'(∞), so D = D_x·E[Y] + D_y·E[U_x] + new with E[Y] <= E[U_y] + D_y and E[U] bounded by
    :attr:`ChainLaw.moment_bound`. The kernel's ``excess_moment`` is a sum over pairs of the
    computed atoms; the ideal pairs' masses are within (1 + r_x)(1 + r_y) and their values within
    (1 + Γ_x)(1 + Γ_y) (mean: the larger Γ), so it is scaled by all four. Every term is >= 0.
    """
    if op == "mean":
        wa, wb = weights
        carried = wa * x.excess_moment + wb * y.excess_moment
    else:
        carried = x.excess_moment * (y.moment_bound + y.excess_moment) + y.excess_moment * x.moment_bound
    new = stats.excess_moment * (1.0 + rel_product(x.mass_rel_error, y.mass_rel_error,
                                                     x.value_rel_error, y.value_rel_error))
    return (carried + new) * (1.0 + EXCESS_ROUNDING)


def mean_combine(x: ChainLaw, y: ChainLaw, chain: str, cells: int, tau: float,
                 weights: tuple[float, float], shape: GridShape) -> ChainLaw:
    """The chain law of a·X + b·Y (weights (a, b) >= 0) for independent X, Y, with its allowances."""
    law, stats = combine(x.law, y.law, "mean", chain, cells=cells, tau=tau, weights=weights, shape=shape)
    return ChainLaw(
        law=law,
        mass_rel_error=rel_product(x.mass_rel_error, y.mass_rel_error, stats.mass_rel_error),
        value_rel_error=rel_product(max(x.value_rel_error, y.value_rel_error), stats.value_rel_error),
        max_count=max(x.max_count, y.max_count, stats.max_count),
        excess_moment=propagate_excess(x, y, "mean", weights, stats),
    )


def doubling_blocks(base: ChainLaw, chain: str, *, cells: int, tau: float,
                    shape: GridShape = GridShape()) -> Callable[[int], ChainLaw]:
    """k ↦ X_k, the law of the mean of 2^k independent copies of ``base`` (computed once each).

    X_0 = base, X_{k+1} = (X_k + X_k')/2 by :func:`mean_combine`; a block is built from the one
    below it on first use and kept, so every caller that asks for X_k sees the same law.
    """
    blocks = [base]

    def block(k: int) -> ChainLaw:
        while len(blocks) <= k:
            top = blocks[-1]
            blocks.append(mean_combine(top, top, chain, cells, tau, (0.5, 0.5), shape))
        return blocks[k]

    return block


def mean_of_steps(base: ChainLaw, steps: int, chain: str, *, cells: int, tau: float,
                  shape: GridShape = GridShape(), blocks: Callable[[int], ChainLaw] | None = None) -> ChainLaw:
    """Law of the mean of ``steps`` independent copies of ``base`` (binary doubling).

    ``blocks`` (k ↦ X_k, :func:`doubling_blocks` of the same base and settings) lets callers share
    the doubling blocks; the result is the same law either way.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got steps={steps}")
    block = blocks or doubling_blocks(base, chain, cells=cells, tau=tau, shape=shape)
    level, size = 0, 1
    acc: ChainLaw | None = None
    count = 0
    remaining = steps
    while remaining:
        if remaining & 1:
            if acc is None:
                acc = block(level)
            else:
                total = count + size
                acc = mean_combine(acc, block(level), chain, cells, tau, (count / total, size / total), shape)
            count += size
        remaining >>= 1
        level, size = level + 1, size * 2
    assert acc is not None and count == steps
    return acc
