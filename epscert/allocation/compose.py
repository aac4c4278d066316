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

from typing import Callable

from epscert.allocation.cells import combine, rel_product
from epscert.allocation.epoch import ChainLaw, propagate_excess
from epscert.allocation.grid import GridShape


def product_combine(x: ChainLaw, y: ChainLaw, chain: str, cells: int, tau: float, shape: GridShape) -> ChainLaw:
    """The chain law of X·Y for independent X, Y, with its allowances (module docstring)."""
    law, stats = combine(x.law, y.law, "product", chain, cells=cells, tau=tau, shape=shape)
    return ChainLaw(law, rel_product(x.mass_rel_error, y.mass_rel_error, stats.mass_rel_error),
                    rel_product(x.value_rel_error, y.value_rel_error, stats.value_rel_error),
                    max(x.max_count, y.max_count, stats.max_count),
                    propagate_excess(x, y, "product", (1.0, 1.0), stats))


def squaring_blocks(epoch: ChainLaw, chain: str, *, cells: int, tau: float,
                    shape: GridShape = GridShape()) -> Callable[[int], ChainLaw]:
    """j ↦ the law of the product of 2^j independent copies of ``epoch`` (each computed once)."""
    blocks = [epoch]

    def block(j: int) -> ChainLaw:
        while len(blocks) <= j:
            top = blocks[-1]
            blocks.append(product_combine(top, top, chain, cells, tau, shape))
        return blocks[j]

    return block


def product_of_epochs(epoch: ChainLaw, epochs: int, chain: str, *, cells: int, tau: float,
                      shape: GridShape = GridShape(), blocks: Callable[[int], ChainLaw] | None = None) -> ChainLaw:
    """Law of the product of ``epochs`` independent copies of the one-epoch law.

    ``blocks`` (:func:`squaring_blocks` of the same epoch law and settings) lets callers share
    the squared blocks; the result is the same law either way.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got epochs={epochs}")
    block = blocks or squaring_blocks(epoch, chain, cells=cells, tau=tau, shape=shape)
    acc: ChainLaw | None = None
    level, remaining = 0, epochs
    while remaining:
        if remaining & 1:
            acc = block(level) if acc is None else product_combine(acc, block(level), chain, cells, tau, shape)
        remaining >>= 1
        level += 1
    assert acc is not None
    return acc
