"""The configuration floor: :class:`CertifyConfig` and the plug that hands the engine a mechanism's sampler.

It sits above the rooms it configures (:mod:`epscert.dpsgd`, :mod:`epscert.matrix`) and below the
results and entry points that read it. For convenience it re-exports the ground floor's names and
checks (:mod:`epscert.names`, :mod:`epscert.checks`), so a caller above it imports from one place.
"""

from epscert.checks import (
    MAX_RANKS, check_float, check_int, compress_orders, default_orders, parse_orders, show, underflows,
)
from epscert.config.certify import CertifyConfig
from epscert.names import (
    AUTO_ORDER_STATS_MIN_STEPS, BACKENDS, BRACKET_MAX_EPOCHS, BRACKET_MAX_STEPS, BRACKET_METHODS, BRACKET_MIN_SIGMA,
    DEFAULT_ERROR_PROB, DEFAULT_PLD_DISCRETIZATION, DEFAULT_SAMPLES, EPSILON_BLOCK_BYTES, EPSILONS_PER_PASS,
    JAX_KERNELS, JAX_MATRIX_KERNELS, MATRIX_METHODS, MAX_CYCLE_LENGTH, MAX_EPSILON, MAX_EPSILONS, MAX_SAMPLE_BYTES,
    MAX_SIGMA, MAX_STEPS, MAX_TOTAL_COORDINATES, MIN_ERROR_PROB, MIN_SIGMA, MONTE_CARLO_METHODS, PERSISTENT_BASE,
    SUPPORTED_METHODS, Direction, Method, Sampler, bracket_limit, canonical_method, parse_enum, parse_sampler,
    persistent_reduction, steps_per_epoch,
)

__all__ = [
    "AUTO_ORDER_STATS_MIN_STEPS", "BACKENDS", "BRACKET_MAX_EPOCHS", "BRACKET_MAX_STEPS", "BRACKET_METHODS",
    "BRACKET_MIN_SIGMA", "CertifyConfig", "DEFAULT_ERROR_PROB", "DEFAULT_PLD_DISCRETIZATION", "DEFAULT_SAMPLES",
    "Direction", "EPSILON_BLOCK_BYTES", "EPSILONS_PER_PASS", "JAX_KERNELS", "JAX_MATRIX_KERNELS", "MATRIX_METHODS",
    "MAX_CYCLE_LENGTH", "MAX_EPSILON", "MAX_EPSILONS", "MAX_RANKS", "MAX_SAMPLE_BYTES", "MAX_SIGMA", "MAX_STEPS",
    "MAX_TOTAL_COORDINATES", "MIN_ERROR_PROB", "MIN_SIGMA", "MONTE_CARLO_METHODS", "Method", "PERSISTENT_BASE",
    "SUPPORTED_METHODS", "Sampler", "bracket_limit", "canonical_method", "check_float", "check_int",
    "compress_orders", "default_orders", "parse_enum", "parse_orders", "parse_sampler", "persistent_reduction",
    "show", "steps_per_epoch", "underflows",
]
