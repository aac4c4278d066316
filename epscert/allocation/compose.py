"""E epochs: the law of Π_e S_e by doubling products of independent copies.

Both hockey-stick integrands (Π S_e − e^ε)_+ and (1 − e^ε Π S_e)_+ are convex in any partial
product A = Π_{e in block} S_e (a convex function of a positive multiple of A), so the product
of two independent convex-order bounds is again a bound for every downstream use, and the
re-gridding (contraction / spread in :func:`epscert.allocation.cells.combine`) keeps each
chain on its side. The block for 2^j epochs is combined with itself by ``op="product"``; the
set bits of E are multiplied into the running product.

Floating point: a relative value error θ in the atoms of a block moves Π S_e by a relative θ
per appearance; a block of 2^j epochs appears at most E/2^j times, which is passed to the
kernel as ``copies`` and ``weight_total``; the one-epoch share already counts all E epochs.
``mass_rel_error`` adds as in :mod:`epscert.allocation.epoch`.
"""

from __future__ import annotations

from dataclasses import replace

from epscert.allocation.cells import combine
from epscert.allocation.epoch import ChainLaw


def product_of_epochs(epoch: ChainLaw, epochs: int, chain: str, *, cells: int, tau: float) -> ChainLaw:
    """Law of the product of ``epochs`` independent copies of the one-epoch law.

    The returned ``value_error`` is the total additive allowance for the E-fold product.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got epochs={epochs}")
    # the one-epoch value error is already scaled for all E epochs
    block = replace(epoch, value_error=0.0)
    total_value = epoch.value_error
    size = 1
    acc: ChainLaw | None = None
    remaining = epochs
    while True:
        if remaining & 1:
            if acc is None:
                acc = block
            else:
                law, stats = combine(acc.law, block.law, "product", chain, cells=cells, tau=tau)  # appears once
                acc = ChainLaw(law, acc.mass_rel_error + block.mass_rel_error + stats.mass_rel_error,
                               0.0, max(acc.max_count, block.max_count, stats.max_count))
                total_value += stats.value_abs_error  # this product appears once
        remaining >>= 1
        if not remaining:
            break
        size *= 2
        # a 2^j-epoch block appears at most epochs // size times in the final product
        law, stats = combine(block.law, block.law, "product", chain, cells=cells, tau=tau,
                             copies=max(1, epochs // size), weight_total=max(1, epochs // size))
        total_value += stats.value_abs_error
        block = ChainLaw(law, 2.0 * block.mass_rel_error + stats.mass_rel_error, 0.0,
                         max(block.max_count, stats.max_count))
    assert acc is not None
    return replace(acc, value_error=total_value)
