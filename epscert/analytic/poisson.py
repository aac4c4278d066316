"""Poisson subsampling baselines through dp_accounting (SPEC §7).

T·E compositions of the Poisson-subsampled Gaussian with q = 1/T:
- PLD with ``pessimistic_estimate=True`` is an upper bound on δ(ε), ``False`` a lower
  bound (up to dp_accounting's floating-point error), per direction;
- RDP (upper bound, the max over both directions by construction).

Resolution (issue 12). PLD values carry the written error budget of
:mod:`epscert.analytic.resolution` (one FFT power of T·E compositions: the truncated mass 1e-15
plus the floating-point allowance, about 1e-10 for T·E = 10^3 and 2e-9 for T·E = 10^4 at the
default discretisation). :func:`poisson_pld_bounds` returns outward values: an upper bound is
value(1 + rel) + abs and never below the resolution (there it is the resolution, or RDP if that
is smaller, since both are valid upper bounds); a lower bound is value(1 - rel) - abs and 0
below the resolution. RDP: computed by dp_accounting in closed form over its orders, relative
allowance :data:`RDP_RELATIVE`, and never below the float underflow floor (an upper bound of 0
for a Gaussian mechanism would be false).
"""

from __future__ import annotations

import contextlib
import functools
import logging

import dp_accounting
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from epscert.analytic.resolution import UNDERFLOW_FLOOR, Resolution, composition_resolution
from epscert.params import Direction

#: Relative allowance on RDP δ (log-space arithmetic over a few dozen orders).
RDP_RELATIVE = 1e-9


@functools.lru_cache(maxsize=8)
def single_pld(sigma: float, steps: int, discretization: float,
               pessimistic: bool) -> pld_lib.PrivacyLossDistribution:
    """PLD of one Poisson-subsampled Gaussian step with q = 1/T (cached, shared: do not mutate)."""
    return pld_lib.from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=1.0, sampling_prob=1.0 / steps,
        pessimistic_estimate=pessimistic, value_discretization_interval=discretization,
        use_connect_dots=pessimistic,  # connect-the-dots is pessimistic-only
    )


@functools.lru_cache(maxsize=8)
def composed_pld(sigma: float, steps: int, epochs: int, discretization: float,
                 pessimistic: bool) -> pld_lib.PrivacyLossDistribution:
    """PLD of T·E Poisson-subsampled Gaussian steps with q = 1/T.

    Cached: one certification asks for the same PLD several times. The returned object is
    shared, so callers must not mutate it (dp_accounting's queries do not).
    """
    return single_pld(sigma, steps, discretization, pessimistic).self_compose(steps * epochs)


@functools.lru_cache(maxsize=32)
def pld_resolution(sigma: float, steps: int, epochs: int, discretization: float, pessimistic: bool,
                   direction: Direction) -> Resolution:
    """Resolution of one direction's composed PMF (:mod:`epscert.analytic.resolution`)."""
    single, composed = single_pld(sigma, steps, discretization, pessimistic), composed_pld(
        sigma, steps, epochs, discretization, pessimistic)
    pick = (lambda p: p._pmf_remove) if direction is Direction.REMOVE else (lambda p: p._pmf_add)  # noqa: SLF001
    return composition_resolution(pick(single), pick(composed), steps * epochs)


def pmf_delta(pmf, epsilon: float, pessimistic: bool) -> float:
    """δ(ε) of one direction's PMF; optimistic values lose the spurious infinity mass.

    dp_accounting moves the tail mass it truncates while composing (1e-15 per composition by
    default) to infinity, which is pessimistic: right for an upper bound, too high for a lower
    one. The Poisson-subsampled Gaussian has no infinite losses, so the whole infinity mass of an
    optimistic composition is that artefact and is subtracted (keeping a lower bound a lower bound).
    """
    value = float(pmf.get_delta_for_epsilon(epsilon))
    return value if pessimistic else max(0.0, value - float(pmf._infinity_mass))  # noqa: SLF001


def poisson_pld_delta(sigma: float, steps: int, epochs: int, epsilons, direction: Direction,
                      discretization: float, pessimistic: bool) -> np.ndarray:
    """δ_P(ε) for one direction (REMOVE: mixture vs Gaussian) or BOTH (the max)."""
    pld = composed_pld(float(sigma), int(steps), int(epochs), float(discretization), bool(pessimistic))
    eps = [float(e) for e in np.atleast_1d(epsilons)]
    # dp_accounting keeps the two directions as two PMFs; '_pmf_remove' is the REMOVE one.
    pmfs = [pld._pmf_remove if d is Direction.REMOVE else pld._pmf_add for d in direction.parts()]  # noqa: SLF001
    return np.asarray([max(pmf_delta(pmf, e, pessimistic) for pmf in pmfs) for e in eps], dtype=np.float64)


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


def poisson_pld_bounds(sigma: float, steps: int, epochs: int, epsilons, direction: Direction,
                       discretization: float, pessimistic: bool) -> tuple[np.ndarray, float]:
    """(outward δ values, resolution) of the PLD upper (pessimistic) or lower bound.

    Per direction the value is made outward with that direction's resolution (module docstring);
    BOTH is the max over directions and reports the larger resolution. Upper values below the
    resolution become min(resolution, RDP) (RDP bounds both directions at once).
    """
    args = (float(sigma), int(steps), int(epochs), float(discretization), bool(pessimistic))
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    out, raws, res = [], [], 0.0
    for part in direction.parts():
        raw = poisson_pld_delta(sigma, steps, epochs, eps, part, discretization, pessimistic)
        r = pld_resolution(*args, part)
        res = max(res, r.floor)
        raws.append(raw)
        out.append(r.upper(raw) if pessimistic else r.lower(raw))
    vals = np.max(out, axis=0)
    if pessimistic:
        at_floor = np.max(raws, axis=0) < res
        if at_floor.any():
            vals = np.where(at_floor, np.minimum(vals, poisson_rdp_delta(sigma, steps, epochs, eps)), vals)
    return vals, res


def poisson_rdp_delta(sigma: float, steps: int, epochs: int, epsilons) -> np.ndarray:
    """RDP upper bound on δ_P(ε) (both directions), outward by :data:`RDP_RELATIVE`, never 0."""
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(1.0 / steps, dp_accounting.GaussianDpEvent(sigma)),
        steps * epochs,
    )
    accountant = dp_accounting.rdp.RdpAccountant()
    with quiet_rdp():
        accountant.compose(event)
        vals = np.asarray([accountant.get_delta(float(e)) for e in np.atleast_1d(epsilons)], dtype=np.float64)
    return np.clip(vals * (1.0 + RDP_RELATIVE), UNDERFLOW_FLOOR, 1.0)
