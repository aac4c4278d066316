"""RDP baseline of Poisson subsampling (SPEC §7): dp_accounting's RDP accountant, its δ(ε) over a whole ε
grid in one array pass, and ε(δ). Upper bounds on both directions, outward by :data:`RDP_RELATIVE`, never
below the float underflow floor (an upper bound of 0 for a Gaussian mechanism would be false).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math

import numpy as np

from epscert.analytic.resolution import UNDERFLOW_FLOOR

#: Relative allowance on RDP δ (log-space arithmetic over a few dozen orders).
RDP_RELATIVE = 1e-9


#: dp_accounting's RDP accountant logs this (through absl) for every order it drops; dropping an order
#: only removes a candidate from the minimum over orders, so the bound stays valid and the line is noise.
RDP_CONVERGENCE_NOISE = "_compute_log_a_frac failed to converge"


class _DropRdpNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(RDP_CONVERGENCE_NOISE)


@contextlib.contextmanager
def quiet_rdp():
    """Drop only dp_accounting's order-convergence warning while the RDP accountant runs."""
    logger, drop = logging.getLogger("absl"), _DropRdpNoise()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


@functools.lru_cache(maxsize=32)
def rdp_accountant(sigma: float, steps: int, epochs: int):
    """dp_accounting's RDP accountant of T·E Poisson-subsampled Gaussian steps (cached). dp_accounting is
    imported here, not at module load: it takes about a second (scipy.signal, its calibration module), paid
    by every Beam worker that starts, while only RDP questions need it."""
    import dp_accounting  # noqa: PLC0415

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(1.0 / steps, dp_accounting.GaussianDpEvent(sigma)),
        steps * epochs,
    )
    accountant = dp_accounting.rdp.RdpAccountant()
    with quiet_rdp():
        accountant.compose(event)
    return accountant


@functools.lru_cache(maxsize=32)
def rdp_terms(sigma: float, steps: int, epochs: int) -> tuple[np.ndarray, ...]:
    """Per order α of the accountant: (α, its RDP r_α, the KL term log δ_KL, log(1 - 1/α)), with
    log(1 - 1/α) = NaN where α <= 1.01 (no conversion at that order) and the KL term
    0.5·log(1 - e^{-r}) (-inf where r <= 0): the ε-free parts of δ(ε) (:func:`poisson_rdp_delta`)."""
    accountant = rdp_accountant(sigma, steps, epochs)
    orders = np.asarray(accountant.orders, dtype=np.float64)
    rdp = np.asarray(accountant.rdp, dtype=np.float64)
    if orders.size == 0 or np.any(orders < 1.0):
        raise ValueError(f"RDP orders must be >= 1, got orders={orders.tolist()}")
    kl = np.asarray([-math.inf if r <= 0.0 else 0.5 * math.log1p(-math.exp(-r)) for r in rdp.tolist()])
    log_a = np.asarray([math.log(a) for a in orders.tolist()])
    l1 = np.asarray([math.log1p(-1.0 / a) if a > 1.01 else math.nan for a in orders.tolist()])
    return orders, rdp, kl, l1, log_a


#: ε values per vectorised block of :func:`poisson_rdp_delta` (a (block, orders) array: a few MB).
RDP_EPSILON_BLOCK = 4096


def poisson_rdp_delta(sigma: float, steps: int, epochs: int, epsilons) -> np.ndarray:
    """RDP upper bound on δ_P(ε) (both directions), outward by :data:`RDP_RELATIVE`, never 0.

    δ(ε) = min(1, e^{min_α log δ_α(ε)}), log δ_α(ε) = min(0.5·log(1 - e^{-r_α}),
    (α - 1)(r_α - ε + log(1 - 1/α)) - log α) (the second for α > 1.01 only): the conversion of
    Canonne, Kamath and Steinke (2020, Proposition 12), the same formula dp_accounting's ``get_delta``
    evaluates one ε at a time. Here it is one array pass over a whole grid (a dense grid used to cost
    2 ms per ε): the ε-free terms are computed once per order with the same scalar functions
    (:func:`rdp_terms`), the ε-dependent part uses only -, + and × in the same order (IEEE-exact, so
    each value equals the scalar one bit for bit), a NaN term (r = ∞ - ∞) is skipped as ``min`` skips
    it, and the final exponential is the scalar ``math.exp``. Negative RDP values (dp_accounting warns
    and answers δ = 0 there) never occur for the Poisson Gaussian (r_α >= 0); they are treated as it does.
    """
    orders, rdp, kl, l1, log_a = rdp_terms(float(sigma), int(steps), int(epochs))
    kl = np.where(rdp < 0.0, -math.inf, kl)
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    if eps.size and not eps.min() >= 0.0:
        raise ValueError(f"epsilon must be >= 0 for the RDP conversion, got epsilon={float(eps.min())!r}")
    out = np.empty(eps.size, dtype=np.float64)
    usable = orders > 1.01
    for start in range(0, eps.size, RDP_EPSILON_BLOCK):
        e = eps[start:start + RDP_EPSILON_BLOCK, None]
        with np.errstate(invalid="ignore"):
            bound = (orders - 1.0) * ((rdp - e) + l1) - log_a
        logd = np.where(usable & (bound < kl), bound, kl)  # min(logdelta, bound): NaN keeps logdelta
        best = np.min(logd, axis=1)
        out[start:start + e.shape[0]] = [min(math.exp(v), 1.0) for v in best.tolist()]
    return np.clip(out * (1.0 + RDP_RELATIVE), UNDERFLOW_FLOOR, 1.0)


def poisson_rdp_epsilon(sigma: float, steps: int, epochs: int, target: float) -> float:
    """RDP upper bound on ε_P(target) (both directions): dp_accounting's conversion at δ/(1 + RDP_RELATIVE)."""
    accountant = rdp_accountant(float(sigma), int(steps), int(epochs))
    with quiet_rdp():
        return float(accountant.get_epsilon(target / (1.0 + RDP_RELATIVE)))
