"""The ground floor's names: samplers, methods, directions, and the limits every layer reads.

Names only (enums, constants, and the few functions that read a name from user input); the
configuration that uses them, :class:`~epscert.config.CertifyConfig`, sits above the rooms it
configures (:mod:`epscert.config`). Value checks live beside this module in :mod:`epscert.checks`.
"""

from __future__ import annotations

import enum
import math

from epscert import support
from epscert.checks import check_float, check_int, show
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
    TILTED = "tilted"  # the matrix mechanism's loss-tilted value estimator (epscert.matrix.loss_tilt)

    @property
    def is_monte_carlo(self) -> bool:
        return self in MONTE_CARLO_METHODS

    @property
    def uses_importance(self) -> bool:
        return self in (Method.IMPORTANCE, Method.IMPORTANCE_ORDER_STATS)

    @property
    def uses_order_stats(self) -> bool:
        return self in (Method.ORDER_STATS, Method.IMPORTANCE_ORDER_STATS, Method.CONDITIONAL_ORDER_STATS)

    @property
    def mean_is_unbiased(self) -> bool:
        """Whether this Monte Carlo method's sample mean (a row's ``delta``) is an unbiased estimate of δ(ε).

        The order-statistic variants replace each sample's value by a larger one (the bound of its
        order-statistic class, :mod:`epscert.dpsgd.orderstats`), so their mean estimates an *upper
        bound* on δ(ε) and is biased upward by construction: never an estimate of δ, and their values
        have no lower confidence bound. Not a Monte Carlo method: False.
        """
        return self.is_monte_carlo and not self.uses_order_stats

    @property
    def is_conditional(self) -> bool:
        """Conditional Monte Carlo (epscert.dpsgd.conditional): one epoch, ε0-dependent ADD event."""
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
    return parse_enum(Sampler, "sampler", value)  # type: ignore[return-value]


def persistent_reduction(sampler: object, sigma: float, epochs: int) -> tuple[Sampler, float, int]:
    """(sampler, σ, epochs) to certify: a persistent sampler becomes its base at σ/√E, one epoch."""
    kind = parse_sampler(sampler)
    if not kind.is_persistent:
        return kind, sigma, epochs
    sigma = check_float("sigma", sigma, low=MIN_SIGMA, low_open=False)
    epochs = check_int("epochs", epochs, 1)
    return kind.base, sigma / math.sqrt(epochs), 1


MONTE_CARLO_METHODS = frozenset(
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
#: :mod:`epscert.matrix.pair`): Monte Carlo ``naive``, ``importance``,
#: ``conditional`` and ``tilted`` (``auto``), the deterministic bounds of :mod:`epscert.analytic.matrix`, ``exact``
#: for one bin (b = 1) and the Balls-and-Bins bracket (``bracket_upper``/``bracket_lower``) for C = c·I
#: when b divides n. Order statistics need exchangeable coordinates, which correlated modes are not.
#: Read from the one table of :mod:`epscert.support` (mechanism ``bandmf``).
MATRIX_METHODS = frozenset({Method.AUTO, *(Method(m) for m in support.methods_for(support.MATRIX_SAMPLER, "bandmf"))})
#: The JAX backend's matrix-mechanism kernels (:mod:`epscert.matrix.jax_kernels`).
JAX_MATRIX_KERNELS = ("naive", "importance", "conditional", "tilted")
#: Largest cycle length b of a matrix mechanism (the b x b Gram matrix: 2 GiB at 16384).
MAX_CYCLE_LENGTH = 16384

#: The bracket methods (Balls-and-Bins only).
BRACKET_METHODS = (Method.BRACKET_UPPER, Method.BRACKET_LOWER)

#: ``auto`` switches Balls-and-Bins to order statistics above this many steps.
AUTO_ORDER_STATS_MIN_STEPS = 2000


def parse_enum(kind: type[enum.Enum], name: str, value: object) -> enum.Enum:
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
