"""The matrix mechanism's part of a configuration's checks: strategy, cycle length, cycles, methods.

:class:`~epscert.config.CertifyConfig` calls :func:`check_matrix_config` from its ``__post_init__`` when
a strategy is given (the configuration sits above the rooms it configures, so it reads their checks;
this room never imports the configuration). Every refusal names the field and the value, before any work.
"""

from __future__ import annotations

import math

import numpy as np

from epscert.checks import show
from epscert.matrix.strategies import Strategy
from epscert.matrix.strategies.gram import unit_gram_diagonal
from epscert.names import (
    BRACKET_MIN_SIGMA, JAX_MATRIX_KERNELS, MATRIX_METHODS, MAX_CYCLE_LENGTH, MAX_EPSILONS, MAX_TOTAL_COORDINATES,
    MIN_SIGMA, Method, Sampler,
)

#: Smallest squared norm G0_jj = ||C x_j||² of a mode that is computed in float64 as it comes (see check_gram).
MIN_GRAM_DIAGONAL = 1e-290
#: Range of every mode's noise multiplier σ_j = σ/||C x_j|| = 1/√G_jj (see check_gram).
MIN_MODE_SIGMA = MIN_SIGMA
MAX_MODE_SIGMA = 1e5


def check_matrix_config(config) -> None:
    """A matrix mechanism (strategy C, Balls-and-Bins of cycle length b = steps over n iterations):
    the sampler, cycle length, epochs, methods and backend, refused before any work."""
    set_ = lambda k, v: object.__setattr__(config, k, v)  # noqa: E731 (frozen dataclass)
    if not isinstance(config.strategy, Strategy):
        raise ValueError(f"strategy must be an epscert.strategies.Strategy (toeplitz_strategy or dense_strategy), "
                         f"got strategy={show(config.strategy)}")
    if config.sampler is not Sampler.BALLS_AND_BINS_PERSISTENT:
        raise ValueError(f"a strategy (matrix mechanism) needs sampler='balls_and_bins_persistent' (one bin per "
                         f"example for every cycle), got sampler={config.sampler.value!r}")
    n, b = config.strategy.iterations, config.steps
    if b > n:
        raise ValueError(f"steps (the cycle length b) must be <= iterations={n}, got steps={b}")
    if b > MAX_CYCLE_LENGTH:
        raise ValueError(f"steps (the cycle length b) must be <= {MAX_CYCLE_LENGTH} for a matrix mechanism, got "
                         f"steps={b}")
    cycles = -(-n // b)
    if config.epochs not in (1, cycles):
        raise ValueError(f"epochs of a matrix mechanism is the number of cycles ceil(iterations/steps) = {cycles}, "
                         f"got epochs={config.epochs}")
    set_("epochs", cycles)
    if config.dataset_size is not None or config.max_batch_size is not None:
        raise ValueError("truncated batches (dataset_size, max_batch_size) are not supported for a matrix "
                         "mechanism")
    if config.orders is not None:
        raise ValueError(f"orders do not apply to a matrix mechanism (correlated modes have no order-statistic "
                         f"bound), got orders={show(config.orders)}")
    for m in config.methods:
        if m not in MATRIX_METHODS:
            allowed = ", ".join(sorted(x.value for x in MATRIX_METHODS))
            raise ValueError(f"method={m.value!r} does not apply to a matrix mechanism; allowed: {allowed}")
        if m is Method.EXACT and b != 1:
            raise ValueError(f"method='exact' needs one bin (steps=1: the Gaussian mechanism), got steps={b}")
        if m in (Method.BRACKET_UPPER, Method.BRACKET_LOWER) and not (config.strategy.is_identity() and n % b == 0):
            raise ValueError(f"method={m.value!r} (the Balls-and-Bins bracket) needs C = c*I and steps dividing "
                             f"iterations, got {config.strategy.describe()} with iterations={n}, steps={b}; use "
                             "independent_lower_bound / comonotone_upper_bound or a Monte Carlo method")
    set_("resolved", tuple(dict.fromkeys(Method.TILTED if m is Method.AUTO else m for m in config.methods)))
    if config.shards > config.samples and any(m.is_monte_carlo for m in config.resolved):
        raise ValueError(f"shards must be <= samples, got shards={config.shards}, samples={config.samples}")
    if config.backend == "jax":
        for m in config.resolved:
            if m.is_monte_carlo and m.value not in JAX_MATRIX_KERNELS:
                raise ValueError(f"backend='jax' has no matrix-mechanism kernel for method={m.value!r}")
        config.check_jax_value_grid()
    if len(config.epsilons) > MAX_EPSILONS:
        raise ValueError(f"epsilons has {len(config.epsilons)} values, limit {MAX_EPSILONS}")
    total = config.samples * b * len(config.direction.parts())
    if any(m.is_monte_carlo for m in config.resolved) and total > MAX_TOTAL_COORDINATES:
        raise ValueError(f"samples={config.samples} x {b} modes is {total:.2e} sampled coordinates (limit "
                         f"{MAX_TOTAL_COORDINATES:.0e}); lower samples")
    # last: the Gram matrix costs O(n x bands) (Toeplitz) or O(n b²) (dense); every other refusal comes first
    check_gram(config.strategy, b, config.sigma)
    brackets = (Method.INDEPENDENT_LOWER_BOUND, Method.BRACKET_UPPER, Method.BRACKET_LOWER)
    if b > 1 and any(m in brackets for m in config.resolved):
        sigma_eff = config.sigma / math.sqrt(float(config.strategy.gram(b).g0.diagonal().min()))
        if sigma_eff < BRACKET_MIN_SIGMA:
            raise ValueError(f"independent_lower_bound / bracket_* use the Balls-and-Bins bracket at sigma_eff = "
                             f"1/sqrt(min_j G_jj) = {sigma_eff:.4g}, below its limit "
                             f"{BRACKET_MIN_SIGMA} (sigma={config.sigma}); use a Monte Carlo method")


def check_gram(strategy: Strategy, cycle_length: int, sigma: float) -> None:
    """Refuse a strategy whose Gram matrix G = G0/σ² (:mod:`epscert.matrix.strategies.gram`) is outside the
    range every matrix method computes in, naming the field and the value. Kept, in float64:

    1. G0 finite. Each entry is a sum of products of entries of C >= 0, so a finite G0 had no partial sum
       overflow; an infinite one (c_col >= about 1e154) would turn into 0 · inf and 1/0 downstream
       (``1/sqrt(v)`` of the deterministic bounds, ``G - diag(G)/2`` of the samplers).
    2. Every G0_jj = ||C x_j||² >= MIN_GRAM_DIAGONAL = 1e-290. A product of two entries below float64's
       normal range (2.2e-308) is rounded with an absolute error <= 2^-1075 (2.5e-324); an entry of G0
       sums at most n x bands <= 10^12 of them, so it is off by <= 2.5e-312, a relative 2.5e-22 of a
       diagonal >= 1e-290 (and of √(G0_jj G0_kk) off the diagonal): far inside the rows' FLOAT_REL = 1e-9.
       A zero diagonal (a mode with zero norm, or c_col <= about 1e-162, whose products all vanish) is
       refused: the estimators divide by v_j = G_jj (the conditional lines G e_j / v_j, the importance
       thresholds (t + v/2 - g)/√v, the kriging G / diag(G)) and the deterministic bounds by √v_j.
    3. Every mode's noise multiplier σ_j = σ/||C x_j|| = 1/√G_jj in [MIN_MODE_SIGMA, MAX_MODE_SIGMA] =
       [1e-100, 1e5], i.e. G_jj in [1e-10, 1e200].
       - σ_j >= 1e-100 (DP-SGD's own floor on σ): what the estimators form from G (the means G e_i + L z,
         x = g - v/2, (t + v/2 - g)/√v, d_k² v_j <= v_k by Cauchy-Schwarz, e^ε and θ(θ - 1)v/2 with θ = 1
         there) stays below about 1e201, far from overflow (1.8e308); every method is checked finite and
         within [0, 1] at this end (tests/matrix/test_gram_range.py).
       - σ_j <= 1e5: the privacy loss L = log((1/b) Σ_k e^{x_k}) is a log of a sum near 1 when every v is
         small: its absolute rounding is a few ulp (~1e-16) while |L| is of order √v = 1/σ_j, so δ near
         ε = 0 carries a relative rounding of about 5e-16 σ_j (measured on C = [1, 0.5], n = 20, b = 4,
         same seed: 5e-8 at σ_j = 1e8, 5e-5 at 1e12; at 1e18 the conditional REMOVE lower bound at ε = 0
         was 1e81 times the true δ(0)). At σ_j <= 1e5 it stays <= 5e-11, inside FLOAT_REL = 1e-9.
       Scaling C by c and σ by c leaves every σ_j, hence the mechanism, unchanged: when 1. or 2. fails
       and the σ_j of C/s with σ/s (s the largest entry of C) are in range, the refusal says to rescale
       c_col (or the matrix) and the noise multiplier together; when they are not, no scale helps and it
       says which mode is out of range.
    """
    b = int(cycle_length)
    g0 = strategy.gram(b).g0
    field = "c_col" if strategy.kind == "toeplitz" else "strategy_matrix"
    diag = np.diagonal(g0)
    finite = bool(np.all(np.isfinite(g0)))
    if finite and float(diag.min()) >= MIN_GRAM_DIAGONAL:
        norms = np.sqrt(diag)  # in [1e-145, 1.4e154]: sigma / norms neither overflows nor underflows
        _check_mode_sigmas(np.log(sigma / norms), sigma, norms, field, b)
        return
    scale, unit = unit_gram_diagonal(strategy, b)
    j = int(np.argmin(unit))
    if not unit[j] >= MIN_GRAM_DIAGONAL:
        hint = " (is c_col[0] = 0? then the columns of the last iterations are empty)" if field == "c_col" else ""
        raise ValueError(f"mode {j} of the strategy (the bin of iterations t = {j} mod cycle_length={b}) has zero "
                         f"norm: ||C x_{j}||² = 0 in float64, C is zero on those iterations{hint}; every mode "
                         f"needs a nonzero norm, got {strategy.describe()}")
    # σ_j of C/s with σ/s (the same mechanism), in logs: σ/s alone may under- or overflow
    log_sigmas = math.log(sigma) - math.log(scale) - 0.5 * np.log(unit)
    with np.errstate(over="ignore", under="ignore"):
        norms = scale * np.sqrt(unit)
    _check_mode_sigmas(log_sigmas, sigma, norms, field, b)
    raise ValueError(f"the Gram matrix of the strategy's modes (G0_jk = <C x_j, C x_k>, kept finite with every "
                     f"G0_jj >= {MIN_GRAM_DIAGONAL:g}) {'underflows' if finite else 'overflows'} float64, got max "
                     f"{field} entry = {scale:.6g}, sigma={sigma}; C/s with sigma/s is the same mechanism: rescale "
                     f"{field} and the noise multiplier together, e.g. divide both by {scale:.3g}")


def _check_mode_sigmas(log_sigmas: np.ndarray, sigma: float, norms: np.ndarray, field: str, b: int) -> None:
    """Every σ_j = e^{log_sigmas[j]} in [MIN_MODE_SIGMA, MAX_MODE_SIGMA] (:func:`check_gram` 3.; the same at
    every scale of C and σ). ``norms`` are ||C x_j|| (inf or 0 where they over- or underflow)."""
    for j, limit, side in ((int(np.argmin(log_sigmas)), MIN_MODE_SIGMA, "below"),
                           (int(np.argmax(log_sigmas)), MAX_MODE_SIGMA, "above")):
        log_s = float(log_sigmas[j])
        if (log_s < math.log(limit)) if side == "below" else (log_s > math.log(limit)):
            raise ValueError(f"the noise multiplier of mode {j} (iterations t = {j} mod cycle_length={b}), "
                             f"sigma/||C x_{j}|| = {_exp_text(log_s)}, is {side} the limit {limit:.0e} of the matrix "
                             f"methods [{MIN_MODE_SIGMA:.0e}, {MAX_MODE_SIGMA:.0e}] (sigma={sigma}, ||C x_{j}|| = "
                             f"{_norm_text(float(norms[j]), log_s, sigma)} from {field}); C/s with sigma/s is the same "
                             f"mechanism, so rescaling {field} and the noise multiplier together does not change it")


def _exp_text(log_value: float) -> str:
    """e^log_value as text, also beyond float64's range ('1.2e-400')."""
    exponent = math.floor(log_value / math.log(10.0))
    mantissa = math.exp(log_value - exponent * math.log(10.0))
    if mantissa >= 9.9995:  # rounding of the mantissa to 4 digits
        mantissa, exponent = mantissa / 10.0, exponent + 1
    return f"{mantissa:.4g}e{exponent:+d}"


def _norm_text(norm: float, log_sigma: float, sigma: float) -> str:
    """||C x_j|| as text: the float, or sigma/σ_j from the logs where it over- or underflowed."""
    if math.isfinite(norm) and norm > 0.0:
        return f"{norm:.4g}"
    return _exp_text(math.log(sigma) - log_sigma)
