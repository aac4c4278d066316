"""Truncated batches: the δ penalty of capping batch sizes at B (SPEC §9, issue 6).

Training code caps each batch at B records and pads smaller ones. Under Poisson and
Balls-and-Bins sampling a batch has Binomial(n, 1/T) records (n counts the zeroed
record too, so the law is the same on both adjacent datasets). Let

    η = Pr[some batch of the T·E exceeds B] <= T·E · Pr[Bin(n, 1/T) > B]   (union bound)

Coupling: run the truncated mechanism M' and the untruncated M on the same randomness;
their outputs coincide unless some batch is truncated, so for every set S and each of
the two adjacent datasets, |M'(S) - M(S)| <= η. If M is (ε, δ)-DP then
M'(D)(S) - e^ε M'(D')(S) <= M(D)(S) + η - e^ε (M(D')(S) - η) <= δ + (1 + e^ε) η.
So M' is (ε, δ + (1 + e^ε) η)-DP. We use this coupling bound; the tighter penalty stated
in "Scalable DP-SGD" (Chua et al. 2024, Prop. 3.2 / Thm. 3.3) is not used, since this
module carries no written proof of it. η is computed in log space (binom.logsf).
"""

from __future__ import annotations

import math

from scipy import stats

from epscert.checks import check_float, check_int

#: Default fraction of the target δ the penalty may take when sizing B.
DEFAULT_PENALTY_FRACTION = 0.01


def log_truncation_probability(dataset_size: int, steps: int, epochs: int, max_batch_size: int) -> float:
    """log η, η = min(1, T·E·Pr[Bin(n, 1/T) > B])."""
    n = check_int("dataset_size", dataset_size, 1)
    T = check_int("steps", steps, 1)
    E = check_int("epochs", epochs, 1)
    B = check_int("max_batch_size", max_batch_size, 1)
    log_tail = float(stats.binom.logsf(B, n, 1.0 / T))  # Pr[X > B]
    return min(0.0, math.log(T) + math.log(E) + log_tail)


def truncation_penalty(epsilon: float, dataset_size: int, steps: int, epochs: int, max_batch_size: int) -> float:
    """Δ = (1 + e^ε)·η: the δ added by truncation at ε (capped at 1)."""
    eps = check_float("epsilon", epsilon, low=0.0, low_open=False)
    log_eta = log_truncation_probability(dataset_size, steps, epochs, max_batch_size)
    log_pen = log_eta + (eps + math.log1p(math.exp(-eps)))  # log((1 + e^ε) η)
    return 1.0 if log_pen >= 0.0 else math.exp(log_pen)


def config_penalty(config, epsilon: float) -> float:
    """The penalty of a :class:`~epscert.config.CertifyConfig` at ε (0 without truncation)."""
    if not config.truncated:
        return 0.0
    return truncation_penalty(epsilon, config.dataset_size, config.steps, config.epochs, config.max_batch_size)


def smallest_max_batch_size(epsilon: float, target_delta: float, dataset_size: int, steps: int,
                            epochs: int, fraction: float = DEFAULT_PENALTY_FRACTION) -> int:
    """Smallest B with truncation_penalty(ε, ...) <= fraction · target_delta (binary search).

    The penalty is non-increasing in B, and B = n never truncates (penalty 0).
    """
    check_float("target_delta", target_delta, low=0.0, low_open=True, high=1.0)
    check_float("fraction", fraction, low=0.0, low_open=True, high=1.0, high_open=False)
    n = check_int("dataset_size", dataset_size, 1)
    budget = fraction * target_delta
    lo, hi = 1, n  # penalty(hi) = 0 <= budget
    if truncation_penalty(epsilon, n, steps, epochs, lo) <= budget:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if truncation_penalty(epsilon, n, steps, epochs, mid) <= budget:
            hi = mid
        else:
            lo = mid
    return hi
