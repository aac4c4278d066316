"""Validated parameters of one certification: samplers, methods, directions, configuration.

Everything a run needs is a frozen :class:`CertifyConfig`; its ``__post_init__``
refuses bad input before any work starts, naming the field and the value.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from epscert import support
from epscert.checks import (  # noqa: F401 (re-exported: every layer reads its checks from params)
    MAX_RANKS, check_float, check_int, compress_orders, default_orders, parse_orders, show, underflows,
)
from epscert.rng import check_seed
from epscert.support import BRACKET_MAX_EPOCHS, BRACKET_MAX_STEPS, BRACKET_MIN_SIGMA  # noqa: F401 (re-exported)

#: A single sample may not need more than this (beyond it, use order statistics).
MAX_SAMPLE_BYTES = 2**30
#: Refuse requests beyond this many sampled coordinates in total (~4 core-years at ~13 ns each).
MAX_TOTAL_COORDINATES = 10**16
#: Largest T accepted (10^12 steps: far beyond any training run, still exact in float64).
MAX_STEPS = 10**12
#: Smallest σ accepted (1/σ² must stay finite in float64).
MIN_SIGMA = 1e-100
#: Largest σ accepted: 1/σ² must stay a normal double (σ = 1e200 overflowed in the samplers).
MAX_SIGMA = 1e100
#: Largest ε accepted anywhere (grids, targets): e^ε must stay finite in double precision
#: (e^709 is the last), with room for the sums that carry it; past it formulas gave NaN or 1/0.
MAX_EPSILON = 500.0
#: A dense ε grid is streamed: Monte Carlo sums take at most EPSILONS_PER_PASS values of ε per pass over a
#: block (measured before streaming: a 10,001-value grid asked for a 2.44 GiB allocation, about 0.25 MiB
#: per ε of one pass), so memory no longer grows with the grid. MAX_EPSILONS bounds the rows instead (a
#: few per ε, method and direction, kept in memory as one table).
EPSILONS_PER_PASS = 1000
EPSILON_BLOCK_BYTES = 2.44 * 2**30 / 10_001
MAX_EPSILONS = 20_000
#: Sampling backends (epscert.montecarlo.backends): 'auto' takes JAX when a GPU is visible.
BACKENDS = ("numpy", "jax", "auto")
#: What the JAX backend has kernels for (its check_supported says the same).
JAX_KERNELS = {"balls_and_bins": ("naive", "importance", "order_stats", "importance_order_stats", "conditional",
                                  "conditional_order_stats"),
               "deterministic": ("naive", "importance"),
               "shuffle": ("naive",), "shuffle_persistent": ("naive",), "poisson": ("naive",)}
#: Default loss step of the PLD baselines (the Poisson PLD bracket, the sliced lower bounds).
DEFAULT_PLD_DISCRETIZATION = 1e-4
#: Monte Carlo samples per direction and failure probability beta when none are given: the one source of
#: these defaults for the API (certify, Accountant, Accountant.calibrate) and every CLI command.
DEFAULT_SAMPLES = 100_000
DEFAULT_ERROR_PROB = 0.01
#: Smallest failure probability β accepted: β/2 per direction, log(1/β) and β/|grid| must stay normal
#: doubles (error_prob=5e-324 used to become 0 after the split and fail later, naming a value never typed).
MIN_ERROR_PROB = 1e-300


class Direction(str, enum.Enum):
    """Adjacency direction: REMOVE is D(P||Q), ADD is D(Q||P); BOTH reports the max."""

    REMOVE = "remove"
    ADD = "add"
    BOTH = "both"

    def parts(self) -> tuple["Direction", ...]:
        return (Direction.REMOVE, Direction.ADD) if self is Direction.BOTH else (self,)


class Sampler(str, enum.Enum):
    BALLS_AND_BINS = "balls_and_bins"
    POISSON = "poisson"
    DETERMINISTIC = "deterministic"
    SHUFFLE = "shuffle"  # reshuffled every epoch ("dynamic")
    SHUFFLE_PERSISTENT = "shuffle_persistent"  # one permutation reused
    BALLS_AND_BINS_PERSISTENT = "balls_and_bins_persistent"  # one bin assignment reused

    @property
    def is_persistent(self) -> bool:
        """One assignment reused by every epoch: E epochs at σ are one epoch at σ/√E (SPEC §1)."""
        return self in PERSISTENT_BASE

    @property
    def base(self) -> "Sampler":
        """The one-epoch sampler a persistent sampler reduces to (itself otherwise)."""
        return PERSISTENT_BASE.get(self, self)


class Method(str, enum.Enum):
    NAIVE = "naive"
    IMPORTANCE = "importance"
    ORDER_STATS = "order_stats"
    IMPORTANCE_ORDER_STATS = "importance_order_stats"
    AUTO = "auto"
    EXACT = "exact"
    PLD_UPPER = "pld_upper"
    PLD_LOWER = "pld_lower"
    RDP_UPPER = "rdp_upper"
    CUBE_LOWER_BOUND = "cube_lower_bound"
    CONDITIONAL = "conditional"
    CONDITIONAL_ORDER_STATS = "conditional_order_stats"
    INDEPENDENT_LOWER_BOUND = "independent_lower_bound"
    COMONOTONE_UPPER_BOUND = "comonotone_upper_bound"
    BRACKET_UPPER = "bracket_upper"  # the Balls-and-Bins PLD bracket (epscert.allocation), upper side
    BRACKET_LOWER = "bracket_lower"  # and its lower side
    TILTED = "tilted"  # the matrix mechanism's loss-tilted value estimator (epscert.montecarlo.matrix_loss_tilt)

    @property
    def is_monte_carlo(self) -> bool:
        return self in _MONTE_CARLO

    @property
    def uses_importance(self) -> bool:
        return self in (Method.IMPORTANCE, Method.IMPORTANCE_ORDER_STATS)

    @property
    def uses_order_stats(self) -> bool:
        return self in (Method.ORDER_STATS, Method.IMPORTANCE_ORDER_STATS, Method.CONDITIONAL_ORDER_STATS)

    @property
    def is_conditional(self) -> bool:
        """Conditional Monte Carlo (epscert.montecarlo.conditional): one epoch, ε0-dependent ADD event."""
        return self in (Method.CONDITIONAL, Method.CONDITIONAL_ORDER_STATS)


#: Persistent samplers and the sampler each reduces to. For the Gaussian mechanism the E
#: participations of a record at known positions add up to one participation with noise σ/√E,
#: so E epochs at σ are exactly one epoch of the base sampler at σ/√E.
PERSISTENT_BASE = {
    Sampler.SHUFFLE_PERSISTENT: Sampler.SHUFFLE,
    Sampler.BALLS_AND_BINS_PERSISTENT: Sampler.BALLS_AND_BINS,
}


def parse_sampler(value: object) -> Sampler:
    """A :class:`Sampler` from its name, else ValueError naming ``sampler`` and the value."""
    return _enum(Sampler, "sampler", value)  # type: ignore[return-value]


def persistent_reduction(sampler: object, sigma: float, epochs: int) -> tuple[Sampler, float, int]:
    """(sampler, σ, epochs) to certify: a persistent sampler becomes its base at σ/√E, one epoch."""
    kind = parse_sampler(sampler)
    if not kind.is_persistent:
        return kind, sigma, epochs
    sigma = check_float("sigma", sigma, low=MIN_SIGMA, low_open=False)
    epochs = check_int("epochs", epochs, 1)
    return kind.base, sigma / math.sqrt(epochs), 1


_MONTE_CARLO = frozenset(
    {Method.NAIVE, Method.IMPORTANCE, Method.ORDER_STATS, Method.IMPORTANCE_ORDER_STATS,
     Method.CONDITIONAL, Method.CONDITIONAL_ORDER_STATS, Method.TILTED}
)

#: Which methods each sampler supports: read from the one table of :mod:`epscert.support`
#: (AUTO resolves to one Monte Carlo method).
SUPPORTED_METHODS: dict[Sampler, frozenset[Method]] = {
    s: frozenset({Method.AUTO, *(Method(m) for m in support.methods_for(s.value))}) for s in Sampler
}
#: The persistent variant is certified as one epoch at σ/√E; the conditional estimator is wired for the
#: fresh sampler only (ask for balls_and_bins at σ/√E, epochs=1, to run it on the reduction).
SUPPORTED_METHODS[Sampler.BALLS_AND_BINS_PERSISTENT] = SUPPORTED_METHODS[Sampler.BALLS_AND_BINS] - {
    Method.CONDITIONAL, Method.CONDITIONAL_ORDER_STATS}

#: Methods of the matrix mechanism (a ``strategy`` with ``balls_and_bins_persistent``,
#: :mod:`epscert.montecarlo.samplers.matrix_pair`): Monte Carlo ``naive``, ``importance``,
#: ``conditional`` and ``tilted`` (``auto``), the deterministic bounds of :mod:`epscert.analytic.matrix`, ``exact``
#: for one bin (b = 1) and the Balls-and-Bins bracket (``bracket_upper``/``bracket_lower``) for C = c·I
#: when b divides n. Order statistics need exchangeable coordinates, which correlated modes are not.
#: Read from the one table of :mod:`epscert.support` (mechanism ``bandmf``).
MATRIX_METHODS = frozenset({Method.AUTO, *(Method(m) for m in support.methods_for(support.MATRIX_SAMPLER, "bandmf"))})
#: The JAX backend's matrix-mechanism kernels (:mod:`epscert.montecarlo.backends.jax_matrix`).
JAX_MATRIX_KERNELS = ("naive", "importance", "conditional", "tilted")
#: Largest cycle length b of a matrix mechanism (the b x b Gram matrix: 2 GiB at 16384).
MAX_CYCLE_LENGTH = 16384

#: The bracket methods (Balls-and-Bins only).
BRACKET_METHODS = (Method.BRACKET_UPPER, Method.BRACKET_LOWER)

#: ``auto`` switches Balls-and-Bins to order statistics above this many steps.
AUTO_ORDER_STATS_MIN_STEPS = 2000


def _enum(kind: type[enum.Enum], name: str, value: object) -> enum.Enum:
    """The member named ``value``; names are read case-insensitively, '-' as '_' ('Poisson', 'balls-and-bins')."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value.isascii():
        value = value.strip().lower().replace("-", "_")
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ValueError(f"{name} must be one of {allowed}; got {name}={show(value)}") from None


def canonical_method(sampler: Sampler, method: Method) -> Method:
    """``method`` under its current name for ``sampler``: Balls-and-Bins ``pld_upper``/``pld_lower`` are
    the old names of ``bracket_upper``/``bracket_lower`` (:data:`epscert.support.ALIASES`)."""
    return Method(support.canonical_method(sampler.value, method.value))


def bracket_limit(sampler: object, sigma: float, steps: int, epochs: int) -> str | None:
    """None where the Balls-and-Bins PLD bracket applies to (σ, T, E); else the limit that stops it, named.

    A persistent sampler is certified as one epoch at σ/√E (:func:`persistent_reduction`); a sampler that
    is not Balls-and-Bins has no bracket.
    """
    kind = parse_sampler(sampler)
    if kind.base is not Sampler.BALLS_AND_BINS:
        return f"the PLD bracket is for Balls-and-Bins only, got sampler={kind.value!r}"
    note = ""
    if kind.is_persistent:
        _, sigma, epochs = persistent_reduction(kind, sigma, epochs)
        note = " (the persistent sampler's reduction to one epoch at σ/√E)"
    if sigma < BRACKET_MIN_SIGMA:
        return (f"sigma must be >= {BRACKET_MIN_SIGMA} for the Balls-and-Bins PLD bracket (BRACKET_MIN_SIGMA), "
                f"got sigma={show(sigma)}{note}")
    if steps > BRACKET_MAX_STEPS:
        return (f"steps must be <= {BRACKET_MAX_STEPS} for the Balls-and-Bins PLD bracket (BRACKET_MAX_STEPS), "
                f"got steps={show(steps)}")
    if epochs > BRACKET_MAX_EPOCHS:
        return (f"epochs must be <= {BRACKET_MAX_EPOCHS} for the Balls-and-Bins PLD bracket (BRACKET_MAX_EPOCHS), "
                f"got epochs={show(epochs)}")
    return None


def steps_per_epoch(dataset_size: object, batch_size: object) -> int:
    """T = n // b: the full batches of one epoch (a last, partial batch is dropped, ``drop_last=True``).

    Dropping the partial batch keeps every batch at b records; b > n is refused.
    """
    n = check_int("dataset_size", dataset_size, 1)
    b = check_int("batch_size", batch_size, 1)
    if b > n:
        raise ValueError(f"batch_size must be <= dataset_size, got batch_size={b}, dataset_size={n}")
    return n // b


def _stable_hash(payload: dict) -> bytes:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class CertifyConfig:
    """One certification request (SPEC §1–§7). All fields are validated on construction."""

    sampler: Sampler
    sigma: float
    steps: int
    epsilons: tuple[float, ...]
    methods: tuple[Method, ...] = (Method.AUTO,)
    epochs: int = 1
    samples: int = DEFAULT_SAMPLES
    error_prob: float = DEFAULT_ERROR_PROB
    seed: int = 0
    direction: Direction = Direction.BOTH
    orders: str | Sequence[int] | None = None
    shards: int = 1
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION
    dataset_size: int | None = None
    max_batch_size: int | None = None
    backend: str = "numpy"
    strategy: object = None
    resolved: tuple[Method, ...] = field(init=False, default=())
    ranks: tuple[int, ...] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("sampler", _enum(Sampler, "sampler", self.sampler))
        set_("direction", _enum(Direction, "direction", self.direction))
        set_("sigma", check_float("sigma", self.sigma, low=MIN_SIGMA, low_open=False, high=MAX_SIGMA,
                                  high_open=False))
        set_("steps", check_int("steps", self.steps, 1))
        if self.steps > MAX_STEPS:
            raise ValueError(f"steps must be <= {MAX_STEPS}, got steps={show(self.steps)}")
        set_("epochs", check_int("epochs", self.epochs, 1))
        set_("samples", check_int("samples", self.samples, 1))
        set_("shards", check_int("shards", self.shards, 1))
        set_("seed", check_seed(self.seed))
        if not isinstance(self.backend, str) or self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got backend={show(self.backend)}")
        set_("error_prob", check_float("error_prob", self.error_prob, low=MIN_ERROR_PROB, low_open=False,
                                       high=1.0, high_open=True))
        set_("pld_discretization", check_float("pld_discretization", self.pld_discretization,
                                               low=0.0, low_open=True, high=1.0))
        set_("epsilons", self._check_epsilons(self.epsilons))
        methods = self.methods
        if isinstance(methods, (str, Method)):
            methods = (methods,)
        if not isinstance(methods, Sequence) or len(methods) == 0:
            raise ValueError(f"method must be a method name or a non-empty list, got method={show(self.methods)}")
        methods = tuple(dict.fromkeys(canonical_method(self.sampler, _enum(Method, "method", m)) for m in methods))
        set_("methods", methods)
        if self.strategy is not None:
            self._check_strategy()
            return
        for m in methods:
            if m in (Method.INDEPENDENT_LOWER_BOUND, Method.COMONOTONE_UPPER_BOUND):
                raise ValueError(f"method={m.value!r} applies to the matrix mechanism only (give a strategy)")
            if m not in SUPPORTED_METHODS[self.sampler]:
                allowed = ", ".join(sorted(x.value for x in SUPPORTED_METHODS[self.sampler]))
                raise ValueError(
                    f"method={m.value!r} does not apply to sampler={self.sampler.value!r}; allowed: {allowed}"
                )
        set_("resolved", tuple(dict.fromkeys(self._resolve(m) for m in methods)))
        self._check_bracket()
        if self.shards > self.samples and any(m.is_monte_carlo for m in self.resolved):
            raise ValueError(f"shards must be <= samples, got shards={self.shards}, samples={self.samples}")
        self._check_importance()
        self._check_backend()
        self._check_orders()
        self._check_memory()
        self._check_truncation()

    # -- validation helpers -------------------------------------------------------------------
    @staticmethod
    def _check_epsilons(epsilons: object) -> tuple[float, ...]:
        if isinstance(epsilons, np.ndarray) and epsilons.ndim == 0:
            epsilons = (epsilons.item(),)
        if isinstance(epsilons, (int, float, np.number)) and not isinstance(epsilons, bool):
            epsilons = (epsilons,)
        if isinstance(epsilons, (str, Mapping)) or not isinstance(epsilons, Iterable):
            raise ValueError(f"epsilons must be a non-empty list of numbers, got epsilons={show(epsilons)}")
        values = [check_float("epsilon", e, low=0.0, low_open=False, high=MAX_EPSILON, high_open=False)
                  for e in epsilons]
        if not values:
            raise ValueError("epsilons must be a non-empty list of numbers, got epsilons=[]")
        return tuple(sorted(set(values)))

    def _resolve(self, method: Method) -> Method:
        """``auto``: importance (one epoch) or naive, switching to order statistics for large T."""
        if method is not Method.AUTO:
            return method
        if self.sampler.is_persistent:
            return self.reduced()._resolve(method)
        if self.sampler is Sampler.BALLS_AND_BINS:
            large = self.steps >= AUTO_ORDER_STATS_MIN_STEPS
            if self.epochs == 1:
                return Method.IMPORTANCE_ORDER_STATS if large else Method.IMPORTANCE
            return Method.ORDER_STATS if large else Method.NAIVE
        if self.sampler is Sampler.DETERMINISTIC and self.epochs == 1:
            return Method.IMPORTANCE
        return Method.NAIVE

    def _check_bracket(self) -> None:
        """The Balls-and-Bins PLD bracket's range of σ, T and E, refused before any work."""
        if not any(m in BRACKET_METHODS for m in self.methods):
            return
        reason = bracket_limit(self.sampler, self.sigma, self.steps, self.epochs)
        if reason:
            raise ValueError(f"{reason}; use a Monte Carlo method outside it")

    def _check_importance(self) -> None:
        for m in self.methods:
            if (m.uses_importance or m.is_conditional) and self.epochs > 1 and not self.sampler.is_persistent:
                raise ValueError(
                    f"method={m.value!r} needs epochs=1 (importance or conditional sampling for several epochs is an "
                    f"open problem, SPEC §4), got epochs={self.epochs}"
                )

    def _check_backend(self) -> None:
        """backend='jax' has the kernels of JAX_KERNELS only (see epscert.montecarlo.backends)."""
        if self.backend != "jax":
            return
        for m in self.resolved:
            if m.is_monte_carlo and m.value not in JAX_KERNELS.get(self.sampler.value, ()):
                raise ValueError(f"backend='jax' has no kernel for method={m.value!r} with sampler="
                                 f"{self.sampler.value!r}; use backend='numpy' or 'auto'")
        self._check_jax_value_grid()

    def _check_jax_value_grid(self) -> None:
        """The JAX value estimators (conditional; a matrix mechanism's importance and conditional) form
        (|ε| × device block) values per block, not streamed in ε passes as the loss kernels are: their
        grid is capped at EPSILONS_PER_PASS (numpy streams any grid within MAX_EPSILONS)."""
        values = [m for m in self.resolved
                  if m.is_conditional or (self.strategy is not None and m in (Method.IMPORTANCE, Method.TILTED))]
        if values and len(self.epsilons) > EPSILONS_PER_PASS:
            raise ValueError(f"backend='jax' takes at most {EPSILONS_PER_PASS} values of epsilon for method="
                             f"{values[0].value!r} (EPSILONS_PER_PASS: its values are formed per block for the "
                             f"whole grid), got {len(self.epsilons)}; use backend='numpy', which streams the grid")

    def _check_orders(self) -> None:
        """Expand ``orders`` into ``ranks``; store ``orders`` as canonical 'start,stop,step' text."""
        wants = any(m.uses_order_stats for m in self.resolved)
        if self.orders is None:
            if wants and self.steps < 2:
                raise ValueError(f"order statistics need steps >= 2, got steps={self.steps}")
            if wants:
                ranks = default_orders(self.steps)
                object.__setattr__(self, "ranks", ranks)
                object.__setattr__(self, "orders", compress_orders(ranks))
            return
        if not wants:
            raise ValueError(f"orders only apply to order-statistic methods, got orders={show(self.orders)} "
                             f"with method={[m.value for m in self.methods]}")
        ranks = parse_orders(self.orders, max_rank=self.steps - 1)
        if ranks[0] != 1:
            raise ValueError(f"orders must start at rank 1, got first order={ranks[0]} (orders={show(self.orders)})")
        diffs = np.diff(np.asarray(ranks, dtype=np.int64))
        if np.any(diffs <= 0):
            bad = int(np.argmax(diffs <= 0))
            raise ValueError(f"orders must be strictly increasing (no duplicates), got rank {ranks[bad]} "
                             f"followed by {ranks[bad + 1]} (orders={show(self.orders)})")
        if ranks[-1] > self.steps - 1:
            raise ValueError(f"orders must be <= steps - 1 = {self.steps - 1}, got largest order={ranks[-1]} "
                             f"(orders={show(self.orders)})")
        object.__setattr__(self, "ranks", ranks)
        object.__setattr__(self, "orders", compress_orders(ranks))

    def _check_truncation(self) -> None:
        """Truncated batches (SPEC §9): n and B together, for the Binomial-batch samplers only."""
        if self.dataset_size is None and self.max_batch_size is None:
            return
        if self.dataset_size is None or self.max_batch_size is None:
            raise ValueError(f"dataset_size and max_batch_size go together, got dataset_size={show(self.dataset_size)}, "
                             f"max_batch_size={show(self.max_batch_size)}")
        if self.sampler not in (Sampler.POISSON, Sampler.BALLS_AND_BINS):
            raise ValueError(f"truncated batches apply to poisson and balls_and_bins (Binomial batch sizes), "
                             f"got sampler={self.sampler.value!r} with max_batch_size={show(self.max_batch_size)}")
        object.__setattr__(self, "dataset_size", check_int("dataset_size", self.dataset_size, 1))
        object.__setattr__(self, "max_batch_size", check_int("max_batch_size", self.max_batch_size, 1))

    def _check_strategy(self) -> None:
        """A matrix mechanism (strategy C, Balls-and-Bins of cycle length b = steps over n iterations):
        the sampler, cycle length, epochs, methods and backend, refused before any work."""
        from epscert.strategies import Strategy

        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        if not isinstance(self.strategy, Strategy):
            raise ValueError(f"strategy must be an epscert.strategies.Strategy (toeplitz_strategy or dense_strategy), "
                             f"got strategy={show(self.strategy)}")
        if self.sampler is not Sampler.BALLS_AND_BINS_PERSISTENT:
            raise ValueError(f"a strategy (matrix mechanism) needs sampler='balls_and_bins_persistent' (one bin per "
                             f"example for every cycle), got sampler={self.sampler.value!r}")
        n, b = self.strategy.iterations, self.steps
        if b > n:
            raise ValueError(f"steps (the cycle length b) must be <= iterations={n}, got steps={b}")
        if b > MAX_CYCLE_LENGTH:
            raise ValueError(f"steps (the cycle length b) must be <= {MAX_CYCLE_LENGTH} for a matrix mechanism, got "
                             f"steps={b}")
        cycles = -(-n // b)
        if self.epochs not in (1, cycles):
            raise ValueError(f"epochs of a matrix mechanism is the number of cycles ceil(iterations/steps) = {cycles}, "
                             f"got epochs={self.epochs}")
        set_("epochs", cycles)
        if self.dataset_size is not None or self.max_batch_size is not None:
            raise ValueError("truncated batches (dataset_size, max_batch_size) are not supported for a matrix "
                             "mechanism")
        if self.orders is not None:
            raise ValueError(f"orders do not apply to a matrix mechanism (correlated modes have no order-statistic "
                             f"bound), got orders={show(self.orders)}")
        for m in self.methods:
            if m not in MATRIX_METHODS:
                allowed = ", ".join(sorted(x.value for x in MATRIX_METHODS))
                raise ValueError(f"method={m.value!r} does not apply to a matrix mechanism; allowed: {allowed}")
            if m is Method.EXACT and b != 1:
                raise ValueError(f"method='exact' needs one bin (steps=1: the Gaussian mechanism), got steps={b}")
            if m in (Method.BRACKET_UPPER, Method.BRACKET_LOWER) and not (self.strategy.is_identity() and n % b == 0):
                raise ValueError(f"method={m.value!r} (the Balls-and-Bins bracket) needs C = c*I and steps dividing "
                                 f"iterations, got {self.strategy.describe()} with iterations={n}, steps={b}; use "
                                 "independent_lower_bound / comonotone_upper_bound or a Monte Carlo method")
        set_("resolved", tuple(dict.fromkeys(Method.TILTED if m is Method.AUTO else m for m in self.methods)))
        if self.shards > self.samples and any(m.is_monte_carlo for m in self.resolved):
            raise ValueError(f"shards must be <= samples, got shards={self.shards}, samples={self.samples}")
        brackets = (Method.INDEPENDENT_LOWER_BOUND, Method.BRACKET_UPPER, Method.BRACKET_LOWER)
        if b > 1 and any(m in brackets for m in self.resolved):
            v_min = float(self.strategy.gram(b).g0.diagonal().min()) / self.sigma**2
            if not v_min > 0.0:
                raise ValueError("a mode of this strategy has zero norm (is c_col[0] = 0?): the Balls-and-Bins "
                                 "bracket of independent_lower_bound / bracket_* does not apply")
            if 1.0 / math.sqrt(v_min) < BRACKET_MIN_SIGMA:
                raise ValueError(f"independent_lower_bound / bracket_* use the Balls-and-Bins bracket at sigma_eff = "
                                 f"1/sqrt(min_j G_jj) = {1.0 / math.sqrt(v_min):.4g}, below its limit "
                                 f"{BRACKET_MIN_SIGMA} (sigma={self.sigma}); use a Monte Carlo method")
        if self.backend == "jax":
            for m in self.resolved:
                if m.is_monte_carlo and m.value not in JAX_MATRIX_KERNELS:
                    raise ValueError(f"backend='jax' has no matrix-mechanism kernel for method={m.value!r}")
            self._check_jax_value_grid()
        if len(self.epsilons) > MAX_EPSILONS:
            raise ValueError(f"epsilons has {len(self.epsilons)} values, limit {MAX_EPSILONS}")
        total = self.samples * b * len(self.direction.parts())
        if any(m.is_monte_carlo for m in self.resolved) and total > MAX_TOTAL_COORDINATES:
            raise ValueError(f"samples={self.samples} x {b} modes is {total:.2e} sampled coordinates (limit "
                             f"{MAX_TOTAL_COORDINATES:.0e}); lower samples")

    @property
    def is_matrix(self) -> bool:
        """Whether this is a matrix mechanism (a strategy C) rather than DP-SGD."""
        return self.strategy is not None

    def reduced(self) -> "CertifyConfig":
        """The configuration that is certified: a persistent sampler's E epochs at σ are exactly its
        base sampler's one epoch at σ/√E (SPEC §1); any other configuration is itself."""
        if not self.sampler.is_persistent or self.strategy is not None:  # a matrix mechanism is its own pair
            return self
        base, sigma, epochs = persistent_reduction(self.sampler, self.sigma, self.epochs)
        return dataclasses.replace(self, sampler=base, sigma=sigma, epochs=epochs)

    @property
    def truncated(self) -> bool:
        return self.max_batch_size is not None

    def _check_memory(self) -> None:
        """Refuse, before any sampling, a run whose per-sample arrays or total work exceed the caps.

        The width is what the sampler really draws (epscert.montecarlo.samplers.loss_sampler):
        deterministic is one Gaussian (one coordinate, E folded into σ), shuffle_persistent one
        epoch of T coordinates (E folded into σ), the others T (or the order-statistic ranks) per epoch.
        """
        if len(self.epsilons) > MAX_EPSILONS:
            raise ValueError(
                f"epsilons has {len(self.epsilons)} values, more than MAX_EPSILONS={MAX_EPSILONS} (the grid is "
                "streamed through the sampler, but its result rows, a few per ε, are held in memory as one table); "
                "split the grid over several runs, or ask for epsilon at a delta (Accountant.get_epsilon, "
                "compare --deltas)")
        for m in self.resolved:
            if not m.is_monte_carlo:
                continue
            width = len(self.ranks) if (m.uses_order_stats and self.ranks) else self.steps
            epochs = 1 if self.sampler.is_persistent else self.epochs
            if self.sampler is Sampler.DETERMINISTIC:
                width, epochs = 1, 1
            per_sample = 8 * width * epochs * 4
            if per_sample > MAX_SAMPLE_BYTES:
                way_out = "use method='order_stats'" if Method.ORDER_STATS in SUPPORTED_METHODS[self.sampler] \
                    else "lower steps or epochs"
                raise ValueError(
                    f"steps={self.steps} x epochs={self.epochs} needs {per_sample / 2**30:.1f} GiB per sample "
                    f"with method={m.value!r} (limit {MAX_SAMPLE_BYTES / 2**30:.0f} GiB); {way_out}"
                )
            total = self.samples * width * epochs * len(self.direction.parts())
            if total > MAX_TOTAL_COORDINATES:
                raise ValueError(
                    f"samples={self.samples} x {width} coordinates x epochs={epochs} is {total:.2e} sampled "
                    f"coordinates (limit {MAX_TOTAL_COORDINATES:.0e}, about 4 core-years); lower samples"
                )

    # -- identities ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "sampler": self.sampler.value, "sigma": self.sigma, "steps": self.steps,
            "epochs": self.epochs, "epsilons": list(self.epsilons),
            "methods": [m.value for m in self.methods], "samples": self.samples,
            "error_prob": self.error_prob, "seed": self.seed, "direction": self.direction.value,
            "orders": self.orders, "shards": self.shards,
            "pld_discretization": self.pld_discretization,
            "dataset_size": self.dataset_size, "max_batch_size": self.max_batch_size,
            # the backend shapes the stream; left out when 'numpy' so existing ids stay stable
            **({"backend": self.backend} if self.backend != "numpy" else {}),
            **({"strategy": self.strategy.to_dict()} if self.strategy is not None else {}),
        }

    @functools.cached_property
    def config_id(self) -> str:
        """Stable 16-hex-digit hash of every field but ``shards`` (same request -> same id, any machine);
        computed once per object (each row carries it: a 10,001-value grid hashed it per row, quadratically).

        The shard count is left out: the samples are the same for every shard layout (SPEC §10,
        :mod:`epscert.montecarlo.shard`), so it is how the work is split, not what is computed, and
        ``--shards auto`` may pick a different count for a different number of workers.
        """
        payload = self.to_dict()
        del payload["shards"]
        return _stable_hash(payload).hex()[:16]

    def sampling_key(self, method: Method) -> int:
        """Integer key of everything that shapes a method's samples (SPEC §10 ``config_key``).

        Sample count, error probability and shard count are left out: they do not change
        what one block of samples is, only how many blocks are drawn. σ is left out on
        purpose: configurations that differ only in σ draw the same underlying normals and
        uniforms (common random numbers, SPEC §8), which makes σ searches and sweeps smooth.
        Each configuration's own result is unaffected: its samples are still i.i.d.
        """
        if self.strategy is not None:  # the matrix mechanism: its modes' Gram matrix shapes the draws
            payload = {"mechanism": "matrix", "strategy": self.strategy.to_dict(), "steps": self.steps,
                       "method": method.value, "epsilon0": min(self.epsilons)}
            return int.from_bytes(_stable_hash(payload)[:8], "big")
        if self.sampler.is_persistent:  # the same draws as the one-epoch base it reduces to
            return self.reduced().sampling_key(method)
        payload = {
            "sampler": self.sampler.value, "steps": self.steps,
            "epochs": self.epochs, "method": method.value,
            "orders": self.orders if method.uses_order_stats else None,
            "epsilon0": min(self.epsilons) if (method.uses_importance or method.is_conditional) else None,
        }
        return int.from_bytes(_stable_hash(payload)[:8], "big")
