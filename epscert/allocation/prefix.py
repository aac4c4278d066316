"""Mid-epoch certificates: the laws of a Balls-and-Bins run after any number of steps, cached.

**The pair for a prefix.** One epoch of Balls-and-Bins with T steps releases x ∈ R^T, and the pair
is P_B = (1/T) Σ_{t<=T} N(e_t, σ²I_T), Q_B = N(0, σ²I_T) (SPEC §1). After r < T steps of the
epoch only the first r coordinates have been released: the mechanism that stops there is the
same ABLQ_B run with the record's bin uniform on [T] and only steps 1..r published, so its pair is
the marginal of (P_B, Q_B) on coordinates 1..r (its output is the projection of the full epoch's
output, and the projection of a dominating pair dominates the projection). Each component of P_B
and Q_B is a product measure across coordinates, so integrating out x_{r+1}, ..., x_T gives 1
for every component, whatever its mean there (N(1, σ²) or N(0, σ²) both integrate to 1): a
component with its bin t <= r keeps N(e_t, σ²I_r), and the T − r components with t > r all
become N(0, σ²I_r) = Q_r. So

    P_r = (1 − r/T) N(0, σ²I_r) + (1/T) Σ_{t<=r} N(e_t, σ²I_r),      Q_r = N(0, σ²I_r),

    dP_r/dQ_r (x) = 1 − r/T + (1/T) Σ_{t<=r} exp(x_t/σ² − 1/(2σ²)),

and under Q_r the terms W_t = exp(Z_t/σ − 1/(2σ²)) are i.i.d. with E_Q[W] = 1: the prefix factor

    S'_r = (1 − r/T)·1 + (r/T)·M_r,      M_r = (1/r) Σ_{t<=r} W_t,

is a mean of independent terms (the T − r constants 1 and the r lognormal W's), E_Q[S'_r] = 1, and
S'_T = S is the whole epoch's factor. At r = 1 it is 1 − 1/T + W/T, whose hockey-stick values have
a closed form (the lognormal's partial expectations, tests/allocation/test_prefix.py).

**A run cut mid-epoch.** After n = E·T + r steps (E whole epochs, 0 <= r < T) the likelihood
ratio is Π_{e<=E} S_e · S'_r, a product of independent factors (each epoch's allocation is drawn
afresh; adaptive composition of the epochs' pairs). Both integrands (v − e^ε)_+ and (1 − e^ε v)_+
are convex in each factor with the others fixed (a convex function of a nonnegative multiple of
it), so the convex-order chains of :mod:`epscert.allocation.compose` bound the product, and the
mean with the constant 1 is a mean with nonnegative weights of independent laws, bounded by the
chains of :mod:`epscert.allocation.epoch` (the constant is the exact one-atom law at 1, with no
allowances). The cap terms for W > c are :func:`epscert.allocation.tails.cap_terms` with the
prefix's terms, which never exceed a whole epoch's, so the run's cap serves every prefix.

**Construction and cache.** For one (σ, T, cap, accuracy settings) and one chain, :class:`ChainCache`
keeps the doubling blocks X_k (the mean of 2^k W's, :func:`~epscert.allocation.epoch.doubling_blocks`),
the epoch law (built exactly as :func:`~epscert.allocation.epoch.mean_of_steps`, so whole-epoch brackets
are unchanged), the squared epoch blocks, the products of E epochs, and the prefix means M_c.
A prefix is composed from the base-16 digits of c: the digit block D(d, j), the mean of d·16^j W's
(d = 1..15), is X_{4j + log2 d} for a power of two and otherwise D(d − b, j) and X_{4j + log2 b}
averaged with weights ((d − b)/d, b/d), b the lowest set bit of d (built on first use, at most 11
per digit position); then, in a canonical top-down order,

    M_c = ((c − b)/c)·M_{c−b} + (b/c)·D(d, j),      b = d·16^j the lowest nonzero digit of c,

(M_c = D(d, j) when c has one nonzero digit). Each M_c is a function of c alone, and c − b is c
with its lowest digit cleared, so the prefixes a training loop asks for one after another share
their high-digit ancestors: a query composes only the digit blocks of the low digits not seen
before, at most one less than the number of nonzero digits of r (<= 4 for T <= 10^6). The squared
epoch blocks likewise serve every E. A digit block costs one combine per set bit of d beyond the
first; a query that needs few combines spends the rest of a small budget building the digit blocks
of the prefixes a training loop will ask next (:meth:`ChainCache.prefetch`): the same laws, earlier.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np

from epscert.allocation.cells import PAIRS_FORMED, CellLaw
from epscert.allocation.compose import product_combine, product_of_epochs, squaring_blocks
from epscert.allocation.epoch import ChainLaw, doubling_blocks, mean_combine, mean_of_steps
from epscert.allocation.grid import GridShape
from epscert.allocation.tails import base_laws, log_cap

#: Prefix means and prefix factors kept per chain (about 32 KB each at 2000 cells: <= 8 MB per chain).
PREFIX_CACHE = 128
#: Share of the main cells in the centre bump of the prefix factor's grid (tightness only): with
#: r << T the factor 1 − r/T + (r/T)·M_r is a narrow bulk near 1 inside a range set by the far
#: tail of W/T (e.g. σ = 1, T = 1000, r = 1: δ(0) was 0.4% wide without it, 7e-6 with it).
PREFIX_CENTRE_SHARE = 0.3
#: Bits per digit of the prefix decomposition (base 16).
DIGIT_BITS = 4
#: The exact law of the constant 1 (no mass or value allowance).
ONE = ChainLaw(CellLaw(np.array([1.0]), np.array([1.0])), 0.0, 0.0)
#: Work a mid-epoch query may spend, its own included, building digit blocks ahead, in units of
#: :func:`combine_pairs` (cost only: the blocks are the same laws whenever built).
PREFETCH_COMBINES = 3
#: Queries ahead of the last two whose digit blocks are built first (a training loop's logging step).
PREFETCH_AHEAD = 8


class ChainCache:
    """The laws of one chain ("lower" or "upper") of a run with T steps per epoch (module docstring)."""

    def __init__(self, base: ChainLaw, steps: int, chain: str, *, cells: int, tau: float, shape: GridShape):
        self.steps = steps
        self.chain = chain
        self._settings = (cells, tau, shape)
        self._block = doubling_blocks(base, chain, cells=cells, tau=tau, shape=shape)
        self._epoch: ChainLaw | None = None
        self._squares = None
        self._products: dict[int, ChainLaw] = {}
        self._digits: dict[tuple[int, int], ChainLaw] = {}
        self._means: OrderedDict[int, ChainLaw] = OrderedDict()
        self._factors: OrderedDict[int, ChainLaw] = OrderedDict()
        self._asked: list[int] = []  # the last two prefixes asked for (the prefetch's guess of the next)

    def epoch(self) -> ChainLaw:
        """The law of one whole epoch's factor S (the same law as :func:`mean_of_steps`)."""
        if self._epoch is None:
            cells, tau, shape = self._settings
            self._epoch = mean_of_steps(self._block(0), self.steps, self.chain, cells=cells, tau=tau,
                                        shape=shape, blocks=self._block)
        return self._epoch

    def epochs(self, count: int) -> ChainLaw:
        """The law of the product of ``count`` >= 1 whole epochs (as :func:`product_of_epochs`)."""
        if count not in self._products:
            cells, tau, shape = self._settings
            if self._squares is None:
                self._squares = squaring_blocks(self.epoch(), self.chain, cells=cells, tau=tau, shape=shape)
            self._products[count] = product_of_epochs(self.epoch(), count, self.chain, cells=cells, tau=tau,
                                                      shape=shape, blocks=self._squares)
        return self._products[count]

    def digit_block(self, digit: int, position: int) -> ChainLaw:
        """D(d, j): the law of the mean of d·16^j W's, 1 <= d < 16 (module docstring)."""
        low = digit & -digit
        level = DIGIT_BITS * position + low.bit_length() - 1
        if digit == low:
            return self._block(level)
        if (digit, position) not in self._digits:
            cells, tau, shape = self._settings
            rest = digit - low
            self._digits[(digit, position)] = mean_combine(self.digit_block(rest, position), self._block(level),
                                                           self.chain, cells, tau, (rest / digit, low / digit), shape)
        return self._digits[(digit, position)]

    def prefix_mean(self, count: int) -> ChainLaw:
        """The law of M_c, the mean of c W's, in the canonical top-down order (module docstring)."""
        cells, tau, shape = self._settings
        missing = []
        c = count
        while c and c not in self._means:
            missing.append(c)
            c -= _lowest_digit(c)[2]  # the parent prefix: the lowest nonzero digit cleared
        law = self._means[c] if c else None
        if c:
            self._means.move_to_end(c)
        for c in reversed(missing):
            digit, position, low = _lowest_digit(c)
            block = self.digit_block(digit, position)
            parent = c - low
            law = block if parent == 0 else mean_combine(law, block, self.chain, cells, tau,
                                                         (parent / c, low / c), shape)
            _remember(self._means, c, law)
        return law

    def prefix_factor(self, prefix_steps: int) -> ChainLaw:
        """The law of S'_r = (1 − r/T)·1 + (r/T)·M_r for 1 <= r < T (module docstring)."""
        r, T = prefix_steps, self.steps
        if r in self._factors:
            self._factors.move_to_end(r)
            return self._factors[r]
        cells, tau, shape = self._settings
        bump = GridShape(shape.tail_focus, max(shape.centre_share, PREFIX_CENTRE_SHARE))
        law = mean_combine(self.prefix_mean(r), ONE, self.chain, cells, tau, (r / T, (T - r) / T), bump)
        _remember(self._factors, r, law)
        return law

    def law(self, full_epochs: int, prefix_steps: int) -> ChainLaw:
        """The law of Π_{e<=E} S_e · S'_r after E whole epochs and r more steps (E + r >= 1).

        A mid-epoch query that did less than ``PREFETCH_COMBINES`` combines of work builds digit
        blocks ahead with the rest (:meth:`prefetch`), so that a training loop's later queries
        find them: the answer is the same either way.
        """
        if prefix_steps == 0:
            return self.epochs(full_epochs)
        start = PAIRS_FORMED[0]
        factor = self.prefix_factor(prefix_steps)
        if full_epochs:
            cells, tau, shape = self._settings
            factor = product_combine(self.epochs(full_epochs), factor, self.chain, cells, tau, shape)
        self._asked = (self._asked + [prefix_steps])[-2:]
        self.prefetch(PREFETCH_COMBINES * combine_pairs(self._settings[0]) - (PAIRS_FORMED[0] - start))
        return factor

    def prefetch(self, pairs: int) -> None:
        """Build missing digit blocks, one combine at a time, while the work stays within ``pairs``.

        First those of the next ``PREFETCH_AHEAD`` prefixes at the last two asked's step (r2 + k·(r2 − r1)),
        then every digit block of a prefix shorter than T, in order. Cost only: each block is the
        law :meth:`digit_block` defines, whenever it is built.
        """
        start = PAIRS_FORMED[0]
        one = combine_pairs(self._settings[0])
        for digit, position in self._wanted():
            while (digit, position) not in self._digits:
                if PAIRS_FORMED[0] - start + one > pairs:
                    return
                self._build_one(digit, position)

    def _wanted(self):
        """The (digit, position) blocks the prefetch builds, most wanted first (duplicates allowed)."""
        if len(self._asked) == 2 and 0 < self._asked[0] < self._asked[1]:
            step = self._asked[1] - self._asked[0]
            for k in range(1, PREFETCH_AHEAD + 1):
                c = self._asked[1] + k * step
                if c >= self.steps:
                    break
                while c:
                    digit, position, low = _lowest_digit(c)
                    if digit & (digit - 1):
                        yield digit, position
                    c -= low
        for position in range((self.steps.bit_length() - 1) // DIGIT_BITS + 1):
            for digit in range(3, 1 << DIGIT_BITS):
                if digit & (digit - 1) and digit << (DIGIT_BITS * position) < self.steps:
                    yield digit, position

    def _build_one(self, digit: int, position: int) -> None:
        """Build the lowest missing block on the way to D(digit, position) (one combine)."""
        rest = digit - (digit & -digit)
        while rest & (rest - 1) and (rest, position) not in self._digits:
            digit, rest = rest, rest - (rest & -rest)
        self.digit_block(digit, position)


def combine_pairs(cells: int) -> int:
    """About the pairs one combine forms: two laws of ``cells`` + 17 atoms (the unit of the prefetch
    budget, counted by :data:`epscert.allocation.cells.PAIRS_FORMED`)."""
    return (cells + 17) ** 2


def _lowest_digit(count: int) -> tuple[int, int, int]:
    """(d, j, d·16^j) of the lowest nonzero base-16 digit of ``count`` >= 1."""
    position = ((count & -count).bit_length() - 1) // DIGIT_BITS
    digit = (count >> (DIGIT_BITS * position)) & ((1 << DIGIT_BITS) - 1)
    return digit, position, digit << (DIGIT_BITS * position)


def _remember(cache: OrderedDict, key: int, law: ChainLaw) -> None:
    cache[key] = law
    cache.move_to_end(key)
    while len(cache) > PREFIX_CACHE:
        cache.popitem(last=False)


class RunLaws:
    """Both chains of a run of ``epochs`` epochs of T steps at noise σ, built lazily and shared.

    The cap c is :func:`epscert.allocation.tails.log_cap` for T and ``epochs``, so every prefix of
    the run is bounded with the same base laws. :class:`~epscert.allocation.AllocationBracket` asks
    for ``LAW_EPOCHS`` (the longest run) whatever its E, so all its runs of one (σ, T) share them.
    """

    def __init__(self, sigma: float, steps: int, epochs: int, cells: int, base_cells: int, tau: float,
                 cap_budget: float, shape: GridShape):
        self.sigma, self.steps, self.epochs = sigma, steps, epochs
        self.log_c = log_cap(sigma, steps, epochs, cap_budget)
        self._args = (cells, base_cells, tau, shape)
        self._chains: dict[str, ChainCache] = {}

    def chain(self, chain: str) -> ChainCache:
        """The :class:`ChainCache` of ``chain`` ("lower" or "upper")."""
        if chain not in ("lower", "upper"):
            raise ValueError(f"chain must be 'lower' or 'upper', got chain={chain!r}")
        if chain not in self._chains:
            cells, base_cells, tau, shape = self._args
            lower, upper, rel_mass, value_rel = base_laws(self.sigma, self.log_c, base_cells, tau)
            base = ChainLaw(lower, rel_mass, value_rel) if chain == "lower" else ChainLaw(upper, rel_mass, 0.0)
            self._chains[chain] = ChainCache(base, self.steps, chain, cells=cells, tau=tau, shape=shape)
        return self._chains[chain]


@lru_cache(maxsize=4)
def run_laws(sigma: float, steps: int, epochs: int, cells: int, base_cells: int, tau: float, cap_budget: float,
             shape: GridShape) -> RunLaws:
    """The :class:`RunLaws` of one run and accuracy settings, shared by all its brackets in a process."""
    return RunLaws(sigma, steps, epochs, cells, base_cells, tau, cap_budget, shape)
