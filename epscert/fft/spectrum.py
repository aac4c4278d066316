"""Per-mechanism spectra, their product over a schedule, and what bounds its round-off.

Half swap and FFT (Koskela et al., Lemma 6 / Section 4.3): with D the swap of the two halves
(``numpy.fft.ifftshift``: x_{n/2} = 0 goes to index 0), the circular convolution of the D p_j
is the PLD of the sum of the grid losses, wrapped modulo 2L; its spectrum is the product
Π_j F(D p_j)^{c_j}. Spectra are real-input FFTs (n/2 + 1 coefficients). The product is kept
as a sum of logarithms: log|A| = Σ c_j log|ŷ_j|, arg A = Σ c_j arg ŷ_j (real and imaginary
parts separately, so that a zero coefficient gives 0 and never NaN).

Round-off model (a stated model, not a machine-checked proof; the constants carry a safety
factor). For a probability vector p, each coefficient of the computed FFT is within
τ = ``FFT_ROUNDOFF_UNITS``·u·log2(n)·Σp of the exact one (u = 2^-53; each radix stage adds
at most a few u times the L1 norm of its inputs, and twiddles are accurate to u). With
M_j = |ŷ_j| + τ_j bounding both the exact and computed magnitudes, the telescoping bound
|Π a_j^{c_j} - Π b_j^{c_j}| <= Σ_j c_j |a_j - b_j| M_j^{c_j - 1} Π_{i≠j} M_i^{c_i} gives

    |Ã(ω) - A(ω)| <= E(ω) = e^{Σ c_j log M_j} · Σ_j c_j τ_j / M_j
                            + |Ã(ω)| · ``EXP_ROUNDOFF_UNITS``·u · (1 + Σ_j c_j (1 + |log ŷ_j|)),

the second term being the evaluation error of exp(Σ c_j log ŷ_j).

Chernoff tails (Section 5.1): log E[e^{λ ω̂_j}] of each placed PMF (finite part, a
sub-probability) is computed on a fixed λ grid, exactly up to round-off, by blocks:
Σ_i p_i e^{λ x_i} = Σ_b e^{λ x_b} Σ_r p_{b,r} e^{λ r Δx} (one matrix product).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from epscert.fft.grid import UNIT_ROUNDOFF, Grid, GridPLD

#: Per-radix-stage round-off of the FFT, in units of u (componentwise, relative to ||p||_1).
FFT_ROUNDOFF_UNITS = 8.0
#: Round-off of exp(Σ c log ŷ) relative to |Σ c log ŷ| + 1, in units of u.
EXP_ROUNDOFF_UNITS = 4.0
#: Chernoff λ grid: 2^-8 .. 2^12, four points per octave. Any λ > 0 gives a valid bound.
LAMBDAS = 2.0 ** np.arange(-8.0, 12.0 + 1e-9, 0.25)
#: Added to the log of every Chernoff bound, for the round-off of the log-MGF sums.
CHERNOFF_LOG_SLACK = 1e-6
#: Largest λ·(block width) in the blocked MGF (keeps e^{λ r Δx} far from overflow).
MAX_BLOCK_EXPONENT = 64.0


def _block_size(grid: Grid, lam_max: float) -> int:
    block = 64
    while block > 1 and (grid.size % block or lam_max * block * grid.dx > MAX_BLOCK_EXPONENT):
        block //= 2
    return block


def log_mgf(pld: GridPLD, grid: Grid, lambdas: np.ndarray) -> np.ndarray:
    """log Σ_i pmf_i e^{λ x_i} for each λ (-inf where the finite mass is 0)."""
    lambdas = np.asarray(lambdas, dtype=np.float64)
    block = _block_size(grid, float(np.max(np.abs(lambdas))))
    offsets = grid.dx * np.arange(block)
    starts = grid.points()[::block]
    inner = pld.pmf.reshape(-1, block) @ np.exp(np.outer(offsets, lambdas))
    with np.errstate(divide="ignore"):
        logs = np.log(inner) + np.outer(starts, lambdas)
    return special.logsumexp(logs, axis=0)


@dataclass(frozen=True, eq=False)
class Prepared:
    """One placed mechanism: its spectrum (log-magnitude, phase), MGFs and error inputs."""

    log_abs: np.ndarray  # log|ŷ|
    phase: np.ndarray  # arg ŷ
    abs_log: np.ndarray  # |log ŷ| (inf where ŷ = 0)
    log_m: np.ndarray  # log M = log(|ŷ| + τ)
    tau_over_m: np.ndarray  # τ / M
    log_mgf_pos: np.ndarray  # log E e^{+λ ω̂} on LAMBDAS
    log_mgf_neg: np.ndarray  # log E e^{-λ ω̂} on LAMBDAS
    log_finite: float  # log(1 - inf_mass)
    cdf_error: float


def prepare(pld: GridPLD, grid: Grid) -> Prepared:
    """FFT of the half-swapped PMF and everything the accumulator needs from it."""
    n = grid.size
    y = np.fft.rfft(np.fft.ifftshift(pld.pmf))
    tau = FFT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * math.log2(n) * float(np.sum(pld.pmf)) + 1e-300
    absy = np.abs(y)
    with np.errstate(divide="ignore"):
        log_abs = np.log(absy)
    phase = np.angle(y)
    m = absy + tau
    return Prepared(
        log_abs=log_abs, phase=phase, abs_log=np.hypot(log_abs, phase), log_m=np.log(m),
        tau_over_m=tau / m, log_mgf_pos=log_mgf(pld, grid, LAMBDAS),
        log_mgf_neg=log_mgf(pld, grid, -LAMBDAS),
        log_finite=math.log1p(-pld.inf_mass) if pld.inf_mass < 1.0 else -math.inf,
        cdf_error=pld.cdf_error,
    )


class SpectrumProduct:
    """Running Π_j ŷ_j^{c_j}, its round-off bound E(ω), the summed log-MGFs and ∞ mass."""

    def __init__(self, grid: Grid) -> None:
        half = grid.size // 2 + 1
        self.grid = grid
        self.log_abs = np.zeros(half)
        self.phase = np.zeros(half)
        self.sum_log_m = np.zeros(half)
        self.sum_tau_over_m = np.zeros(half)
        self.sum_abs_log = np.zeros(half)
        self.log_mgf_pos = np.zeros(LAMBDAS.size)
        self.log_mgf_neg = np.zeros(LAMBDAS.size)
        self.log_finite = 0.0
        self.cdf_error = 0.0
        self.factors = 0  # distinct (mechanism, run) factors added
        self.steps = 0

    def add(self, prep: Prepared, count: int) -> None:
        """Multiply in ``count`` copies of one mechanism: O(n)."""
        self.log_abs += count * prep.log_abs
        self.phase += count * prep.phase
        self.sum_log_m += count * prep.log_m
        self.sum_tau_over_m += count * prep.tau_over_m
        self.sum_abs_log += count * (1.0 + prep.abs_log)
        self.log_mgf_pos += count * prep.log_mgf_pos
        self.log_mgf_neg += count * prep.log_mgf_neg
        self.log_finite += count * prep.log_finite
        self.cdf_error += count * prep.cdf_error
        self.factors += 1
        self.steps += count

    def spectrum(self) -> np.ndarray:
        """Ã = e^{log|A|} (cos arg A + i sin arg A)."""
        mag = np.exp(self.log_abs)
        return mag * np.cos(self.phase) + 1j * (mag * np.sin(self.phase))

    def spectrum_error(self, spectrum: np.ndarray) -> np.ndarray:
        """E(ω) >= |Ã(ω) - A(ω)| (module docstring)."""
        absa = np.abs(spectrum)
        with np.errstate(invalid="ignore"):
            evaluation = absa * EXP_ROUNDOFF_UNITS * UNIT_ROUNDOFF * (1.0 + self.sum_abs_log)
        evaluation = np.where(absa > 0.0, evaluation, 0.0)
        return np.exp(self.sum_log_m) * self.sum_tau_over_m + evaluation

    @property
    def inf_mass(self) -> float:
        """Mass at +∞ of the composition: 1 - Π_j (1 - p∞_j)^{c_j}."""
        return -math.expm1(self.log_finite) if self.log_finite > -math.inf else 1.0

    def upper_tail(self) -> float:
        """Pr[S >= L] <= min_λ exp(Σ_j c_j log E e^{λ ω̂_j} - λL) (Chernoff, λ on LAMBDAS)."""
        return _chernoff(self.log_mgf_pos, self.grid.half_width)

    def lower_tail(self) -> float:
        """Pr[S <= -L] <= min_λ exp(Σ_j c_j log E e^{-λ ω̂_j} - λL)."""
        return _chernoff(self.log_mgf_neg, self.grid.half_width)

    def copy(self) -> "SpectrumProduct":
        other = SpectrumProduct.__new__(SpectrumProduct)
        other.__dict__.update({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()})
        return other


def _chernoff(log_mgf_sum: np.ndarray, half_width: float) -> float:
    with np.errstate(invalid="ignore"):
        exponents = log_mgf_sum - LAMBDAS * half_width
    best = float(np.nanmin(exponents)) if np.any(~np.isnan(exponents)) else 0.0
    return min(1.0, math.exp(min(best + CHERNOFF_LOG_SLACK, 0.0)))


def full_sum(half: np.ndarray) -> float:
    """Σ over all n frequencies of a Hermitian-symmetric quantity given on the rfft half (n even)."""
    return float(np.real(half[0]) + np.real(half[-1]) + 2.0 * np.sum(np.real(half[1:-1])))
