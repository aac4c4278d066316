"""An accountant object in the style of dp_accounting and Opacus.

    acc = epscert.Accountant(noise_multiplier=0.8, steps=1000, epochs=2)
    acc = epscert.Accountant(noise_multiplier=1.0, dataset_size=60000, batch_size=256, epochs=10)
    acc.get_delta(8.0)      # certified upper bound on δ(8)
    acc.get_epsilon(1e-5)   # certified upper bound on ε(1e-5)
    epscert.Accountant.calibrate(target_epsilon=8, target_delta=1e-5, steps=1000)

Every number it returns holds with probability >= 1 - error_prob (Monte Carlo) or is an
analytic bound; ``last_table`` keeps the full rows (mean, UCB, standard error) behind it.
With ``method='auto'`` (the default) the answer is the tightest certified candidate of
:func:`epscert.inverse.best.best_certificate` (PLD for Poisson, exact for deterministic, Monte
Carlo or deterministic domination for Balls-and-Bins and shuffling); ``last_certificate`` says
which method gave it. Where nothing finite can be certified, ``get_epsilon`` returns inf and
warns (:class:`NotCertifiedWarning`) with the reason and the samples a finite answer needs.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import pyarrow as pa

from epscert.results.tables import certify_config
from epscert.inverse.calibrate import Calibration, calibrate_sigma, check_certifiable
from epscert.inverse.epsilon_at_delta import mc_epsilon_rows, analytic_epsilon_rows, check_deltas
from epscert.inverse.best import Certificate, best_certificate
from epscert.params import (DEFAULT_ERROR_PROB, DEFAULT_SAMPLES, MAX_EPSILON, CertifyConfig, Method, check_float,
                            steps_per_epoch)
from epscert.progress import Callback
from epscert.schema import to_table

#: Analytic methods whose value is an upper bound usable as a certificate for both questions,
#: δ(ε) and ε(δ) (rdp_upper has no ε(δ) here: pld_upper answers both, and tighter).
_UPPER_ANALYTIC = (Method.EXACT, Method.PLD_UPPER, Method.BRACKET_UPPER)


class NotCertifiedWarning(UserWarning):
    """No candidate method certified a finite value; the message says why and what would."""


def resolve_steps(steps: int | None, dataset_size: int | None, batch_size: int | None) -> int:
    """``steps``, or ``dataset_size // batch_size`` (:func:`epscert.params.steps_per_epoch`); not both."""
    if batch_size is not None:
        if steps is not None:
            raise ValueError(f"give either steps or dataset_size and batch_size, not both, got steps={steps!r}, "
                             f"batch_size={batch_size!r}")
        if dataset_size is None:
            raise ValueError(f"batch_size needs dataset_size (steps = dataset_size // batch_size), "
                             f"got batch_size={batch_size!r}, dataset_size=None")
        return steps_per_epoch(dataset_size, batch_size)
    if steps is None:
        raise ValueError("give steps, or dataset_size and batch_size (steps = dataset_size // batch_size), "
                         "got steps=None, batch_size=None")
    return steps


class Accountant:
    """Certified privacy accounting for one training run's batch sampler.

    The run is ``steps`` per epoch, or ``dataset_size`` and ``batch_size`` (steps =
    dataset_size // batch_size, the full batches of an epoch). ``dataset_size`` with
    ``max_batch_size`` asks for truncated batches. ``progress`` receives
    :class:`epscert.progress.ProgressUpdate` s of long computations (None: silent).
    """

    def __init__(self, noise_multiplier: float, steps: int | None = None, epochs: int = 1,
                 sampler: str = "balls_and_bins", method: str = "auto", samples: int = DEFAULT_SAMPLES,
                 error_prob: float = DEFAULT_ERROR_PROB, seed: int = 0, direction: str = "both",
                 orders: str | None = None, dataset_size: int | None = None,
                 max_batch_size: int | None = None, batch_size: int | None = None,
                 progress: Callback | None = None) -> None:
        steps = resolve_steps(steps, dataset_size, batch_size)
        self.config = CertifyConfig(
            sampler=sampler, sigma=noise_multiplier, steps=steps, epochs=epochs, epsilons=(1.0,),
            methods=(method,), samples=samples, error_prob=error_prob, seed=seed, direction=direction,
            orders=orders, dataset_size=dataset_size if max_batch_size is not None or batch_size is None else None,
            max_batch_size=max_batch_size,
        )
        self.auto = Method(self.config.methods[0]) is Method.AUTO
        self.method = self.config.resolved[0]
        if not self.auto:
            check_certifiable(self.config, self.method)
        if not self.auto and not self.method.is_monte_carlo and self.method not in _UPPER_ANALYTIC:
            raise ValueError(f"method must give an upper bound on both δ(ε) and ε(δ) (Monte Carlo, exact, pld_upper or bracket_upper), "
                             f"got method={method!r}")
        self.progress = progress
        self.last_table: pa.Table | None = None
        self.last_certificate: Certificate | None = None

    def _best(self, **target: float) -> float:
        cert = best_certificate(self.config, progress=self.progress, **target)
        self.last_certificate = cert
        self.last_table = to_table(list(cert.rows))
        if not cert.finite:
            warnings.warn(cert.summary(), NotCertifiedWarning, stacklevel=3)
        return cert.value

    def get_delta(self, epsilon: float) -> float:
        """Certified upper bound on δ(ε) (both directions, truncation penalty included)."""
        if self.auto:
            return self._best(epsilon=epsilon)
        cfg = dataclasses.replace(self.config, epsilons=(epsilon,))
        self.last_table = certify_config(cfg)
        rows = [r for r in self.last_table.to_pylist() if r["direction"] == cfg.direction.value
                or r["direction"] == "both"]
        return max(r["delta_upper"] for r in rows)

    def get_epsilon(self, delta: float) -> float:
        """Certified upper bound on ε(δ); inf, with a :class:`NotCertifiedWarning` saying why, if none."""
        check_deltas([delta])
        if self.auto:
            return self._best(delta=delta)
        if self.method.is_monte_carlo:
            rows = mc_epsilon_rows(self.config, self.method, [delta], progress=self.progress)
        else:
            rows = analytic_epsilon_rows(self.config, self.method, [delta])
        self.last_table = to_table(rows)
        value = rows[0]["epsilon_upper"]
        if value is None or not math.isfinite(value):
            note = rows[0]["method"]
            warnings.warn(f"method={note!r} certifies no finite ε at delta={delta:g}; "
                          "method='auto' tries every certified method", NotCertifiedWarning, stacklevel=2)
            return math.inf
        return value

    @staticmethod
    def calibrate(target_epsilon: float, target_delta: float, steps: int | None = None, epochs: int = 1,
                  sampler: str = "balls_and_bins", method: str = "auto", samples: int = DEFAULT_SAMPLES,
                  error_prob: float = DEFAULT_ERROR_PROB, seed: int = 0, progress: Callback | None = None,
                  dataset_size: int | None = None, batch_size: int | None = None, max_batch_size: int | None = None,
                  **kwargs) -> Calibration:
        """Smallest noise multiplier whose certified ε(target_delta) <= target_epsilon.

        The run is ``steps`` per epoch, or ``dataset_size`` and ``batch_size`` (steps = dataset_size //
        batch_size, as in the constructor and ``epscert epsilon``/``calibrate``); ``dataset_size`` with
        ``max_batch_size`` asks for truncated batches. The returned
        :class:`~epscert.inverse.calibrate.Calibration` holds the σ (on the bracket: within 0.1% of the
        optimum, checked on both sides), the certificate rows and the Poisson σ for the same target.
        """
        target_epsilon = check_float("target_epsilon", target_epsilon, low=0.0, low_open=False, high=MAX_EPSILON,
                                     high_open=False)
        steps = resolve_steps(steps, dataset_size, batch_size)
        truncation = dict(dataset_size=dataset_size, max_batch_size=max_batch_size) \
            if max_batch_size is not None or batch_size is None else {}
        config = CertifyConfig(sampler=sampler, sigma=1.0, steps=steps, epochs=epochs, epsilons=(target_epsilon,),
                               methods=(method,), samples=samples, error_prob=error_prob, seed=seed,
                               **truncation, **kwargs)
        return calibrate_sigma(config, target_epsilon, target_delta, progress=progress)
