"""Shardable Monte Carlo sums: per (direction, ε), the count, ΣY and ΣY² (SPEC §3).

Y = (1 - e^{ε - ℓ})_+ ∈ [0, 1] for each sampled directional loss ℓ; sums are exact
integers on the 2**-52 grid (:mod:`epscert.montecarlo.exactsum`), so ``merge`` is associative,
commutative and bit-for-bit independent of how samples were split across shards.
The importance scale s is not stored: it is a function of the configuration.
Conditional Monte Carlo values (not bounded by 1, often far below 2**-52) are summed exactly
in units 2**-1126 instead (:mod:`epscert.montecarlo.exactfloat`, ``unit_log2``), with ``extra``
sums (the truncated sums of its lower confidence bound); sums in different units never merge.

API in the create / add / merge / result shape that a Beam CombineFn wraps.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

import numpy as np

from epscert.montecarlo.exactfloat import UNIT_LOG2, RowSums, float_units
from epscert.montecarlo.exactsum import GRID_LOG2, grid_sum_rows
from epscert.names import Direction


@dataclass(frozen=True)
class DirectionSums:
    """Exact sums for one direction over an ε grid (integers in units of 2**-52)."""

    count: int
    sum_y: tuple[int, ...]
    sum_y2: tuple[int, ...]
    unit_log2: int = GRID_LOG2
    extra: tuple[int, ...] = ()

    def __add__(self, other: "DirectionSums") -> "DirectionSums":
        if len(self.sum_y) != len(other.sum_y):
            raise ValueError(f"cannot merge sums over {len(self.sum_y)} and {len(other.sum_y)} epsilons")
        if self.unit_log2 != other.unit_log2 or len(self.extra) != len(other.extra):
            raise ValueError(f"cannot merge sums in units 2**-{self.unit_log2} ({len(self.extra)} extra) with "
                             f"sums in units 2**-{other.unit_log2} ({len(other.extra)} extra)")
        return DirectionSums(
            self.count + other.count,
            tuple(a + b for a, b in zip(self.sum_y, other.sum_y)),
            tuple(a + b for a, b in zip(self.sum_y2, other.sum_y2)),
            self.unit_log2,
            tuple(a + b for a, b in zip(self.extra, other.extra)),
        )

    def _mean(self, units: int) -> float:
        return float(Fraction(units, self.count << self.unit_log2)) if self.count else 0.0

    def mean(self, i: int) -> float:
        return self._mean(self.sum_y[i])

    def mean_sq(self, i: int) -> float:
        return self._mean(self.sum_y2[i])

    def mean_extra(self, i: int) -> float:
        return self._mean(self.extra[i])


@dataclass(frozen=True)
class Accumulator:
    """Per-direction sums; equality is exact, so merge invariance is testable with ``==``.

    ``tags`` names the backends and devices that drew the samples (sorted, unique;
    see :mod:`epscert.montecarlo.backends`); empty for sums folded by hand with :func:`add`.
    """

    parts: tuple[tuple[Direction, DirectionSums], ...]
    tags: tuple[str, ...] = ()

    def __getitem__(self, direction: Direction) -> DirectionSums:
        for d, sums in self.parts:
            if d is direction:
                return sums
        raise KeyError(direction)

    @property
    def directions(self) -> tuple[Direction, ...]:
        return tuple(d for d, _ in self.parts)


def create(directions: Iterable[Direction], n_eps: int, unit_log2: int = GRID_LOG2, n_extra: int = 0) -> Accumulator:
    """The empty accumulator (identity of ``merge``)."""
    zero = DirectionSums(0, (0,) * n_eps, (0,) * n_eps, unit_log2, (0,) * n_extra)
    return Accumulator(tuple((d, zero) for d in sorted(set(directions), key=lambda d: d.value)))


def y_values(losses: np.ndarray, epsilon: float | np.ndarray) -> np.ndarray:
    """Y = (1 - e^{ε - ℓ})_+ = -expm1(min(ε - ℓ, 0)), in [0, 1] (ε may broadcast against ℓ)."""
    return -np.expm1(np.minimum(epsilon - losses, 0.0))


def add(acc: Accumulator, direction: Direction, losses: np.ndarray, epsilons: tuple[float, ...]) -> Accumulator:
    """Fold a block of directional losses into ``acc`` for every ε of the grid.

    All ε at once on an (|grid|, chunk) array, in chunks of at most ``ADD_CHUNK`` losses and
    ``ADD_ELEMENTS`` values, so the temporaries stay small whatever the grid (a dense grid is streamed
    in narrower chunks); integer sums make the result independent of the chunking.
    """
    losses = np.asarray(losses, dtype=np.float64).ravel()
    if np.isnan(losses).any():
        raise FloatingPointError("a sampled privacy loss is NaN")
    eps = np.asarray(epsilons, dtype=np.float64)[:, None]
    sums_y, sums_y2 = [0] * len(epsilons), [0] * len(epsilons)
    chunk = max(1, min(ADD_CHUNK, ADD_ELEMENTS // max(1, len(epsilons))))
    for start in range(0, losses.size, chunk):
        y = y_values(losses[None, start:start + chunk], eps)
        sums_y = [a + b for a, b in zip(sums_y, grid_sum_rows(y))]
        y *= y
        sums_y2 = [a + b for a, b in zip(sums_y2, grid_sum_rows(y))]
    block = DirectionSums(int(losses.size), tuple(sums_y), tuple(sums_y2))
    return merge([acc, Accumulator(((direction, block),))])


class ValueSums:
    """Exact sums of (|grid|, n) values, their squares and (k, n) extra values over many blocks
    (:class:`~epscert.montecarlo.exactfloat.RowSums`: integers formed once, in :meth:`fold_into`)."""

    def __init__(self, n_eps: int, n_extra: int) -> None:
        self.count = 0
        self.y, self.y2, self.extra = RowSums(n_eps), RowSums(n_eps), RowSums(n_extra)
        self.levels = None

    def truncated_at(self, taus: np.ndarray) -> "ValueSums":
        """Make ``extra`` the truncated sums Σ min(Y, τ_{e,k}) (row e·K + k) of the values given to
        :meth:`add_truncated`, for the (|grid|, K) levels ``taus`` (finite, > 0). Returns self."""
        taus = np.asarray(taus, dtype=np.float64)
        self.levels = taus
        self.order = np.argsort(taus, axis=1, kind="stable")
        self.ascending = np.take_along_axis(taus, self.order, axis=1)
        n_eps, k = taus.shape
        self.extra = RowSums(n_eps * (k + 1))  # bucket j of row e: values with exactly j levels below them
        self.bucket_counts = np.zeros(n_eps * (k + 1), dtype=np.int64)
        return self

    def add_truncated(self, values: np.ndarray) -> None:
        """:meth:`add` of the values and of min(values, τ) at every level, with each value counted once.

        min(Y, τ) is Y when Y <= τ and τ otherwise, so Σ_Y min(Y, τ_k) = Σ_{Y <= τ_k} Y + τ_k #{Y > τ_k}.
        Each value goes to the bucket j = #{levels < Y} of its ε, and Y <= τ_k exactly when j <= (the
        rank of τ_k among the sorted levels): the buckets' exact sums and counts give every truncated
        sum as the same exact integer, with one exact addition per value instead of one per level
        (issue 33: the per-level additions were the largest per-ε cost of the value estimators)."""
        values = np.asarray(values, dtype=np.float64)
        self.y.add(values)
        self.y2.add(values * values)
        self.count += int(values.shape[1])
        n_eps, k = self.levels.shape
        rows, cols = np.nonzero(values)  # zeros add nothing and lie in bucket 0, which no level counts
        picked = values[rows, cols]
        bucket = np.empty(picked.size, dtype=np.int64)
        edges = np.searchsorted(rows, np.arange(n_eps + 1))  # np.nonzero lists the rows in order
        for e in range(n_eps):
            lo, hi = edges[e], edges[e + 1]
            bucket[lo:hi] = np.searchsorted(self.ascending[e], picked[lo:hi], side="left")
        key = rows.astype(np.int64) * (k + 1) + bucket
        self.extra.add_at(key, picked)
        self.bucket_counts += np.bincount(key, minlength=self.bucket_counts.size)

    def level_totals(self) -> tuple[int, ...]:
        """The truncated sums of :meth:`truncated_at` (row e·K + k), exact integers in units 2**-UNIT_LOG2."""
        n_eps, k = self.levels.shape
        sums = self.extra.totals()
        out = [0] * (n_eps * k)
        for e in range(n_eps):
            below, above = 0, int(self.bucket_counts[e * (k + 1): (e + 1) * (k + 1)].sum())
            for a in range(k):  # the a-th smallest level: buckets 0..a lie at or below it
                below += sums[e * (k + 1) + a]
                above -= int(self.bucket_counts[e * (k + 1) + a])
                level = int(self.order[e, a])
                out[e * k + level] = below + float_units(float(self.ascending[e, a])) * above
        return tuple(out)

    def add(self, values: np.ndarray, extra: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64)
        self.y.add(values)
        self.y2.add(values * values)
        self.extra.add(extra)
        self.count += int(values.shape[1])

    def fold_into(self, acc: Accumulator, direction: Direction) -> Accumulator:
        extra = tuple(self.extra.totals()) if self.levels is None else self.level_totals()
        block = DirectionSums(self.count, tuple(self.y.totals()), tuple(self.y2.totals()), UNIT_LOG2, extra)
        return merge([acc, Accumulator(((direction, block),))])


def tagged(acc: Accumulator, tag: str) -> Accumulator:
    """``acc`` with ``tag`` (a 'backend:device' name) added to its tags."""
    return Accumulator(acc.parts, tuple(sorted(set(acc.tags) | {tag})))


#: Losses per vectorised chunk of :func:`add` (its temporaries: |grid| x chunk values), and the most
#: values one chunk may hold (32 ε at the full chunk; a denser grid gets fewer losses per chunk).
ADD_CHUNK = 2**15
ADD_ELEMENTS = 2**20


def merge(accumulators: Iterable[Accumulator]) -> Accumulator:
    """Exact, associative, order-independent merge of accumulators."""
    totals: dict[Direction, DirectionSums] = {}
    tags: set[str] = set()
    for acc in accumulators:
        tags.update(acc.tags)
        for d, sums in acc.parts:
            totals[d] = totals[d] + sums if d in totals else sums
    return Accumulator(tuple(sorted(totals.items(), key=lambda kv: kv[0].value)), tuple(sorted(tags)))

