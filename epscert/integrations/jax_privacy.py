"""Accountants for JAX Privacy's batch selection strategies (extra ``[jax]``).

    strategy = BallsInBinsSampling(iterations=2340, cycle_length=234)
    acc = accountant_for(strategy, num_examples=60_000, noise_multiplier=1.0)
    acc.get_epsilon(1e-5)                    # the whole run
    acc.get_epsilon(1e-5, steps_done=1000)   # after the first 1000 iterations (mid-cycle)
    epsilon_after(strategy, 60_000, 1.0, 1e-5, steps=1000)   # the same, in one call

Mid-run: the first n iterations are certified exactly by ``Accountant.get_epsilon(delta, steps_done=n)``
(:mod:`epscert.inverse.prefix`). For ``BallsInBinsSampling`` that is the persistent prefix bracket:
the bins of the first r steps of the cycle in progress have been released once more than the others
(:mod:`epscert.allocation.persistent`); a strategy whose iterations end mid-cycle is certified for
its iterations by :func:`epsilon_after`, while ``accountant_for(...).get_epsilon(delta)`` certifies the
ceil(iterations / T) whole cycles. Poisson (``CyclicPoissonSampling``) mid-cycle and fixed batches take
the cycle in progress whole.

    acc = bandmf_accountant(BallsInBinsSampling(iterations=2000, cycle_length=100), noise_multiplier=3.0,
                            c_col=np.array([1.0, 0.5, 0.25]))
    acc.epsilon_interval(1e-6)   # (certified lower, estimate, certified upper)

- ``BallsInBinsSampling(iterations, cycle_length=T)`` draws ONE bin per example and reuses it every
  cycle: that is ``balls_and_bins_persistent`` with T steps and E = ceil(iterations / T) epochs (a
  partial last cycle is a prefix of a whole one, a post-processing of it), certified as one epoch at σ/√E.
- ``CyclicPoissonSampling`` reduces when cycle_length = 1, there is no truncation and
  1/sampling_prob = T is an integer (Poisson at q = 1/T); or when sampling_prob = 1 with the
  INDEPENDENT partition (that is Balls-and-Bins with one assignment: ``balls_and_bins_persistent``).
  Anything else is refused with the reason.
- BandMF (DP-MF with a banded Toeplitz C, ``jax_privacy.experimental.monte_carlo``'s convention):
  :func:`bandmf_accountant` takes the ``BallsInBinsSampling`` strategy, the noise multiplier and
  ``c_col`` and returns the epscert Accountant of the matrix mechanism for exactly that run
  (:mod:`epscert.matrix.strategies`: y = C x + σ z, σ relative to the clip norm, C not normalised).
- ``FixedBatchSampling`` reduces only for full batches (batch_size = num_examples, without
  replacement): every example in every step, ``deterministic`` with T = 1. Smaller fixed-size batches
  are refused: under zero-out adjacency the other records' sum depends on whether the target is in
  the batch, which gives a shuffle-like pair that epscert does not certify.
"""

from __future__ import annotations

import math
from typing import Any

from epscert.accountant import Accountant
from epscert.accountant import BatchSampler
from epscert.config.mechanism import read_c_col
from epscert.matrix.strategies import toeplitz_strategy
from epscert.config import check_int

#: |1/sampling_prob - T| below this counts as the integer T.
RATE_TOLERANCE = 1e-9


def sampler_for(strategy: Any, num_examples: int, seed: int = 0) -> BatchSampler:
    """The :class:`epscert.BatchSampler` whose batches have the law of ``strategy``'s (when it reduces)."""
    sampler, steps, epochs = reduction(strategy, num_examples)
    return BatchSampler(sampler=sampler, dataset_size=num_examples, batch_size=max(1, num_examples // steps),
                        steps_per_epoch=steps, epochs=epochs, seed=seed)


def accountant_for(strategy: Any, num_examples: int, noise_multiplier: float, **kwargs: Any) -> Accountant:
    """The :class:`epscert.Accountant` certifying ``strategy``'s run; keyword arguments go to it."""
    sampler, steps, epochs = reduction(strategy, num_examples)
    return Accountant(noise_multiplier=noise_multiplier, steps=steps, epochs=epochs, sampler=sampler, **kwargs)


def bandmf_accountant(strategy: Any, noise_multiplier: float, c_col: Any, **kwargs: Any) -> Accountant:
    """The :class:`epscert.Accountant` of a JAX Privacy BandMF run with Balls-and-Bins batches.

    ``strategy`` is ``BallsInBinsSampling(iterations=n, cycle_length=b)``; ``noise_multiplier`` σ
    and ``c_col`` (the nonzero entries of the first column of the banded lower-triangular Toeplitz
    C) are what ``jax_privacy.experimental.monte_carlo.sample_generation.get_privacy_loss_sample``
    takes: the run releases y = C x + σ z with σ relative to the clip norm and C as given (no
    normalisation; entries past n are cut, as JAX Privacy cuts them). Keyword arguments (samples,
    seed, error_prob, method, direction, progress) go to the Accountant.
    """
    from jax_privacy import batch_selection as bsel

    if not isinstance(strategy, bsel.BallsInBinsSampling):
        raise ValueError(f"strategy must be BallsInBinsSampling (the Balls-and-Bins batches of BandMF that epscert "
                         f"certifies), got strategy={type(strategy).__name__}")
    for name in ("steps", "cycle_length", "strategy", "sampler", "epochs"):
        if name in kwargs:
            raise ValueError(f"{name} comes from the JAX Privacy strategy, got {name}={kwargs[name]!r}")
    iterations, cycle = int(strategy.iterations), int(strategy.cycle_length)
    if cycle > iterations:
        raise ValueError(f"strategy.cycle_length must be <= iterations={iterations} (bins past the last iteration "
                         f"never take part), got cycle_length={cycle}")
    matrix = toeplitz_strategy(read_c_col(c_col), iterations)
    return Accountant(noise_multiplier=noise_multiplier, strategy=matrix, cycle_length=cycle, **kwargs)


def epsilon_after(strategy: Any, num_examples: int, noise_multiplier: float, delta: float,
                  steps: int | None = None, **kwargs: Any) -> float:
    """Certified ε(δ) after the first ``steps`` iterations of ``strategy`` (default: all of them).

    :func:`accountant_for`'s :class:`epscert.Accountant` with ``steps_done=steps``: a run that ends
    mid-cycle, or a training loop asking as it goes, is certified for the iterations taken. A loop
    that asks often should keep one ``accountant_for(...)`` and call ``get_epsilon(delta, steps_done=)``
    (its whole-cycle certificates are computed once).
    """
    iterations = int(strategy.iterations)
    n = iterations if steps is None else check_int("steps", steps, 0)
    if n > iterations:
        raise ValueError(f"steps must be <= strategy.iterations={iterations}, got steps={n}")
    return accountant_for(strategy, num_examples, noise_multiplier, **kwargs).get_epsilon(delta, steps_done=n)


def reduction(strategy: Any, num_examples: int) -> tuple[str, int, int]:
    """(epscert sampler, steps per epoch T, epochs E) of a JAX Privacy strategy, or ValueError why not."""
    from jax_privacy import batch_selection as bsel

    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
        raise ValueError(f"num_examples must be an integer >= 1, got num_examples={num_examples!r}")
    iterations = int(strategy.iterations)
    if iterations < 1:
        raise ValueError(f"strategy.iterations must be >= 1, got iterations={iterations}")
    if isinstance(strategy, bsel.BallsInBinsSampling):
        T = int(strategy.cycle_length)
        return "balls_and_bins_persistent", T, math.ceil(iterations / T)
    if isinstance(strategy, bsel.CyclicPoissonSampling):
        p, k = float(strategy.sampling_prob), int(strategy.cycle_length)
        if strategy.truncated_batch_size is not None:
            raise ValueError(f"CyclicPoissonSampling with truncated_batch_size={strategy.truncated_batch_size} "
                             f"does not reduce: truncation is not certified through this adapter")
        if k == 1:
            if not 0.0 < p <= 1.0 or abs(1.0 / p - round(1.0 / p)) > RATE_TOLERANCE:
                raise ValueError(f"CyclicPoissonSampling needs sampling_prob = 1/T for an integer T (epscert's "
                                 f"Poisson rate), got sampling_prob={p}")
            T = round(1.0 / p)
            return "poisson", T, math.ceil(iterations / T)
        if p == 1.0 and strategy.partition_type == bsel.PartitionType.INDEPENDENT:
            return "balls_and_bins_persistent", k, math.ceil(iterations / k)
        raise ValueError(f"CyclicPoissonSampling with cycle_length={k}, sampling_prob={p}, "
                         f"partition_type={strategy.partition_type.name} does not reduce to a certified sampler "
                         f"(only cycle_length=1, or sampling_prob=1 with the INDEPENDENT partition)")
    if isinstance(strategy, bsel.FixedBatchSampling):
        if strategy.batch_size == num_examples and not strategy.replace:
            return "deterministic", 1, iterations
        raise ValueError(f"FixedBatchSampling with batch_size={strategy.batch_size} < num_examples={num_examples} "
                         f"does not reduce: fixed-size random batches under zero-out adjacency give a "
                         f"shuffle-like pair that epscert does not certify")
    raise ValueError(f"strategy must be BallsInBinsSampling, CyclicPoissonSampling or FixedBatchSampling, "
                     f"got strategy={type(strategy).__name__}")
