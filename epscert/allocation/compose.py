"""E epochs: the law of Π_e S_e by doubling products of independent copies.

Both hockey-stick integrands (Π S_e − e^ε)_+ and (1 − e^ε Π S_e)_+ are convex in any partial
product A = Π_{e in block} S_e (a convex function of a positive multiple of A), so the product
of two independent convex-order bounds is again a bound for every downstream use, and the
re-gridding (contraction / spread in :func:`epscert.allocation.cells.combine`) keeps each
chain on its side. The block for 2^j epochs is combined with itself by ``op="product"``; the
set bits of E are multiplied into the running product.

Floating point: both allowances are relative and compose as for a product of two independent
factors, 1 + r = (1 + r_x)(1 + r_y)(1 + kernel share), and the same for the value allowance Γ
(a product of atoms scaled by 1 + Γ_x and 1 + Γ_y; :mod:`epscert.allocation.cells`). The
excess moment over the top cap composes by :func:`epscert.allocation.epoch.propagate_excess`.
"""

from __future__ import annotations

from epscert.allocation.cells import combine, rel_product
from epscert.allocation.epoch import ChainLaw, propagate_excess
from epscert.allocation.grid import GridShape


def _product(x: ChainLaw, y: ChainLaw, chain: str, cells: int, tau: float, shape: GridShape) -> ChainLaw:
    law, stats = combine(x.law, y.law, "product", chain, cells=cells, tau=tau, shape=shape)
    return ChainLaw(law, rel_product(x.mass_rel_error, y.mass_rel_error, stats.mass_rel_error),
                    rel_product(x.value_rel_error, y.value_rel_error, stats.value_rel_error),
                    max(x.max_count, y.max_count, stats.max_count),
                    propagate_excess(x, y, "product", (1.0, 1.0), stats))


def product_of_epochs(epoch: ChainLaw, epochs: int, chain: str, *, cells: int, tau: float,
                      shape: GridShape = GridShape()) -> ChainLaw:
    """Law of the product of ``epochs`` independent copies of the one-epoch law."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got epochs={epochs}")
    block = epoch
    acc: ChainLaw | None = None
    remaining = epochs
    while True:
        if remaining & 1:
            acc = block if acc is None else _product(acc, block, chain, cells, tau, shape)
        remaining >>= 1
        if not remaining:
            break
        block = _product(block, block, chain, cells, tau, shape)
    assert acc is not None
    return acc
