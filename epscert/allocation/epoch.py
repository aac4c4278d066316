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
"""

from __future__ import annotations

from dataclasses import dataclass

from epscert.allocation.cells import CellLaw, combine, rel_product


@dataclass(frozen=True)
class ChainLaw:
    """A cell law with its floating-point allowances (see module docstring)."""

    law: CellLaw
    mass_rel_error: float
    value_rel_error: float
    max_count: int = 0


def _combine(x: ChainLaw, y: ChainLaw, chain: str, cells: int, tau: float,
             weights: tuple[float, float]) -> ChainLaw:
    law, stats = combine(x.law, y.law, "mean", chain, cells=cells, tau=tau, weights=weights)
    return ChainLaw(
        law=law,
        mass_rel_error=rel_product(x.mass_rel_error, y.mass_rel_error, stats.mass_rel_error),
        value_rel_error=rel_product(max(x.value_rel_error, y.value_rel_error), stats.value_rel_error),
        max_count=max(x.max_count, y.max_count, stats.max_count),
    )


def mean_of_steps(base: ChainLaw, steps: int, chain: str, *, cells: int, tau: float) -> ChainLaw:
    """Law of the mean of ``steps`` independent copies of ``base`` (binary doubling)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got steps={steps}")
    block, size = base, 1
    acc: ChainLaw | None = None
    count = 0
    remaining = steps
    while True:
        if remaining & 1:
            if acc is None:
                acc = block
            else:
                total = count + size
                acc = _combine(acc, block, chain, cells, tau, (count / total, size / total))
            count += size
        remaining >>= 1
        if not remaining:
            break
        size *= 2
        block = _combine(block, block, chain, cells, tau, (0.5, 0.5))
    assert acc is not None and count == steps
    return acc
