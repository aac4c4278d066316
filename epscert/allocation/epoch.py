"""One epoch: the law of S = (1/T) Σ_t W_t by doubling, in both convex-order chains.

X_0 is the (lower or upper) cell law of W on [0, c] (:func:`epscert.allocation.tails.base_laws`);
X_{k+1} = (X_k + X_k')/2 for two independent copies is the law of the mean of 2^k W's.
With T = Σ_k b_k 2^k in binary, the running mean R of the blocks used so far (count r) absorbs
X_k for every set bit: R ← (r/(r + 2^k))·R + (2^k/(r + 2^k))·X_k, independent blocks.
Each step is :func:`epscert.allocation.cells.combine` (contraction for the lower chain, spread
for the upper chain); by induction lower ≤_cx S·1_G ≤_cx upper (G: no W above the cap).

Floating-point bookkeeping (:class:`ChainLaw`): ``mass_rel_error`` follows
r(X_{k+1}) = 2 r(X_k) + kernel share and r(R') = r(R) + r(X_k) + kernel share (a product of two
masses adds their relative errors). ``value_error`` is the sum of the kernels' additive shares, already
scaled for all appearances of each law in the E-epoch product (see
:func:`epscert.allocation.cells.combine`); a law that is combined with itself is counted once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from epscert.allocation.cells import CellLaw, combine


@dataclass(frozen=True)
class ChainLaw:
    """A cell law with its floating-point allowances (see module docstring)."""

    law: CellLaw
    mass_rel_error: float
    value_error: float
    max_count: int = 0


def _combine(x: ChainLaw, y: ChainLaw, chain: str, cells: int, tau: float,
             weights: tuple[float, float], copies: float, weight_total: float) -> ChainLaw:
    law, stats = combine(x.law, y.law, "mean", chain, cells=cells, tau=tau, weights=weights,
                         copies=copies, weight_total=weight_total)
    return ChainLaw(
        law=law,
        mass_rel_error=x.mass_rel_error + y.mass_rel_error + stats.mass_rel_error,
        value_error=stats.value_abs_error,  # this step's share only; summed by the caller
        max_count=max(x.max_count, y.max_count, stats.max_count),
    )


def mean_of_steps(base: ChainLaw, steps: int, chain: str, *, cells: int, tau: float,
                  epochs: int = 1) -> ChainLaw:
    """Law of the mean of ``steps`` independent copies of ``base`` (binary doubling).

    ``epochs`` only scales the floating-point shares (each law appears in every epoch).
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got steps={steps}")
    block, size = base, 1
    total_value = base.value_error  # the sum of every step's share (each counted once)
    acc: ChainLaw | None = None
    count = 0
    remaining = steps
    while True:
        if remaining & 1:
            if acc is None:
                acc = block
            else:
                total = count + size
                acc = _combine(acc, block, chain, cells, tau, (count / total, size / total),
                               copies=epochs, weight_total=epochs)
                total_value += acc.value_error
            count += size
        remaining >>= 1
        if not remaining:
            break
        size *= 2
        block = _combine(block, block, chain, cells, tau, (0.5, 0.5),
                         copies=epochs * max(1, steps // size), weight_total=epochs)
        total_value += block.value_error
    assert acc is not None and count == steps
    return replace(acc, value_error=total_value)
