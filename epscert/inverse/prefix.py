"""Certificates after the first n steps of a run, mid-epoch included (``steps_done``).

A run is a :class:`~epscert.config.CertifyConfig`: E epochs of T steps. After n = E'·T + r of its
steps (0 <= r < T) the models released so far are the outputs of those n steps, and:

- n = 0: nothing is released; ε = 0 and δ = 0 exactly.
- r = 0: the certificate of E' whole epochs, :func:`epscert.inverse.best.best_certificate` of the
  same configuration with ``epochs=E'`` (what ``Accountant(epochs=E')`` answers).
- 0 < r < T, Balls-and-Bins with fresh bins each epoch, untruncated, inside the bracket's range:
  the prefix bracket's upper side (:mod:`epscert.allocation.prefix`: the likelihood ratio
  Π_{e<=E'} S_e · (1 − r/T + (1/T) Σ_{t<=r} W_t)), computed on the laws of the E' + 1 epoch run
  that contains the prefix, so the answer depends on (σ, T, n) alone. A persistent assignment
  (one bin per record for all cycles): the same prefix bracket in its first cycle (no bin reused
  yet), then :mod:`epscert.allocation.persistent` (the bins of the first r steps at σ/√(E' + 1),
  the others at σ/√E'). The answer is the smaller of it and the whole-epoch certificate of E' + 1
  epochs (both are upper bounds: the first n steps are a post-processing of the E' + 1 epochs'
  releases), so it never exceeds the latter.
- 0 < r < T otherwise (Poisson, shuffling, deterministic batches, truncated batches, outside the
  bracket's range): the certificate of E' + 1 whole epochs, by the same post-processing argument
  (for deterministic batches it is also the exact worst case: the records of the first batch have
  taken part E' + 1 times).

ε(δ) of the prefix bracket is the bisection of :func:`epscert.inverse.search.epsilon_for_delta` on
its (monotone, outward) upper curve per direction, the maximum over the directions asked for, as
for the whole-epoch bracket's rows.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

from epscert.allocation import bracket_for
from epscert.allocation.persistent import persistent_bracket_for
from epscert.inverse.best import Certificate, best_certificate
from epscert.inverse.epsilon_at_delta import check_deltas
from epscert.inverse.search import epsilon_for_delta
from epscert.config import (
    BRACKET_MAX_EPOCHS, BRACKET_MAX_STEPS, BRACKET_MIN_SIGMA, MAX_EPSILON, CertifyConfig, Method, Sampler,
    check_float, check_int,
)
from epscert.results.rows import base_row

#: The ``bound`` column of the prefix bracket's rows.
PREFIX_BOUND = "allocation_prefix_bracket_upper"

#: A whole-epoch certificate: (configuration with the epochs asked for, delta, epsilon) -> Certificate.
WholeCertificate = Callable[..., Certificate]


def check_steps_done(config: CertifyConfig, steps_done: object) -> int:
    """``steps_done`` as an int in [0, T·E] (None: the whole run, T·E)."""
    total = config.steps * config.epochs
    if steps_done is None:
        return total
    n = check_int("steps_done", steps_done, 0)
    if n > total:
        raise ValueError(f"steps_done must be <= steps x epochs = {total} (the run's steps), got steps_done={n}")
    return n


def prefix_bracket(config: CertifyConfig, steps_done: int):
    """The :class:`~epscert.allocation.AllocationBracket` of the first ``steps_done`` steps, or None
    where it does not apply (module docstring; ``steps_done`` is mid-epoch, 0 < r < T)."""
    full, r = divmod(steps_done, config.steps)
    if r == 0 or config.truncated or config.sampler.base is not Sampler.BALLS_AND_BINS:
        return None
    epochs = full + 1
    persistent = config.sampler.is_persistent and full > 0
    smallest = config.sigma / math.sqrt(epochs) if persistent else config.sigma  # σ_a of a reused assignment
    if not (smallest >= BRACKET_MIN_SIGMA and config.steps <= BRACKET_MAX_STEPS and epochs <= BRACKET_MAX_EPOCHS):
        return None
    if persistent:  # the bins of the first r steps seen E' + 1 times, the others E' times
        return persistent_bracket_for(config.sigma, config.steps, full, r)
    return bracket_for(config.sigma, config.steps, epochs, steps_done)


def prefix_epsilon(bracket, delta: float, direction) -> float:
    """Certified upper bound on ε(δ) from the prefix bracket's upper curve (max over directions)."""
    parts = direction.parts()
    return max(epsilon_for_delta(lambda e, d=d: float(bracket.upper([e], d)[0]), delta, "upper") for d in parts)


def _rows(config: CertifyConfig, bracket, quantity: str, target: float, value: float, wall: float) -> list[dict]:
    cfg = dataclasses.replace(config, epochs=bracket.epochs)
    row = base_row(cfg, Method.BRACKET_UPPER, config.direction, value if quantity == "epsilon" else target, wall)
    row.update(guarantee="upper_bound", bound=PREFIX_BOUND, resolution=float(bracket.resolution))
    if quantity == "epsilon":
        row.update(quantity="epsilon_at_delta", target_delta=target, delta=target, epsilon_upper=value)
    else:
        row.update(delta=value, delta_upper=value)
    return [row]


def certificate_after(config: CertifyConfig, steps_done: int | None, *, delta: float | None = None,
                      epsilon: float | None = None, whole: WholeCertificate = best_certificate,
                      prefix: bool = True, **whole_kwargs) -> Certificate:
    """The certified upper bound on ε(``delta``) or δ(``epsilon``) after ``steps_done`` steps of the run.

    Exactly one of ``delta`` and ``epsilon``. ``whole(config, delta=..., epsilon=..., **whole_kwargs)``
    gives whole-epoch certificates (default :func:`~epscert.inverse.best.best_certificate`; the
    :class:`epscert.Accountant` passes a cached one). ``prefix=False`` leaves the prefix bracket out
    (a method other than ``auto``/``bracket_upper`` was asked for). The returned certificate's
    ``steps_done`` is n.
    """
    if (delta is None) == (epsilon is None):
        raise ValueError(f"give exactly one of delta and epsilon, got delta={delta!r}, epsilon={epsilon!r}")
    quantity = "epsilon" if delta is not None else "delta"
    target = check_deltas([delta])[0] if delta is not None else check_float("epsilon", epsilon, low=0.0,
                                                                          low_open=False, high=MAX_EPSILON,
                                                                          high_open=False)
    n = check_steps_done(config, steps_done)
    if n == 0:
        return Certificate(quantity, target, config.sampler.value, 0.0, None, "no_steps", "exact", None,
                           ("no step has been taken: nothing is released, so ε = 0 and δ = 0",), (), steps_done=0)
    full, r = divmod(n, config.steps)
    ask = {"delta": delta} if quantity == "epsilon" else {"epsilon": epsilon}
    cover = whole(dataclasses.replace(config, epochs=full + (r > 0)), **ask, **whole_kwargs)
    cover = dataclasses.replace(cover, steps_done=n)
    if r == 0:
        return cover
    note = (f"after {n} steps ({full} epochs and {r} of {config.steps} steps): the certificate of {full + 1} "
            f"whole epochs holds for them (a prefix of a run is a post-processing of it)")
    # its upper bound holds for the prefix; its lower bound and estimate are the longer run's: dropped
    cover = dataclasses.replace(cover, lower=0.0, lower_method=None, estimate=None)
    bracket = prefix_bracket(config, n) if prefix else None
    if bracket is None:
        return dataclasses.replace(cover, notes=cover.notes + (note,))
    start = time.perf_counter()
    if quantity == "epsilon":
        value = prefix_epsilon(bracket, target, config.direction)
    else:
        value = float(bracket.upper([min(target, 700.0)], config.direction)[0])
    rows = _rows(config, bracket, quantity, target, value, time.perf_counter() - start)
    if not (math.isfinite(value) and (not cover.finite or value <= cover.value)):
        return dataclasses.replace(cover, notes=cover.notes + (note,), rows=cover.rows + tuple(rows))
    return Certificate(quantity, target, config.sampler.value, value, Method.BRACKET_UPPER.value, PREFIX_BOUND,
                       "upper_bound", None, cover.notes, tuple(rows) + cover.rows, steps_done=n)
