"""An accountant object in the style of dp_accounting and Opacus.

    acc = epscert.Accountant(noise_multiplier=0.8, steps=1000, epochs=2)
    acc.get_delta(8.0)      # certified upper bound on δ(8)
    acc.get_epsilon(1e-5)   # certified upper bound on ε(1e-5)
    epscert.Accountant.calibrate(target_epsilon=8, target_delta=1e-5, steps=1000)

Every number it returns holds with probability >= 1 - error_prob (Monte Carlo) or is an
analytic bound; ``last_table`` keeps the full rows (mean, UCB, standard error) behind it.
"""

from __future__ import annotations

import dataclasses
import math

import pyarrow as pa

from epscert.results.tables import certify_config
from epscert.inverse.calibrate import Calibration, calibrate_sigma, check_certifiable
from epscert.inverse.epsilon_at_delta import mc_epsilon_rows, analytic_epsilon_rows, check_deltas
from epscert.params import DEFAULT_ERROR_PROB, DEFAULT_SAMPLES, MAX_EPSILON, CertifyConfig, Method, check_float
from epscert.schema import to_table

#: Analytic methods whose value is an upper bound usable as a certificate for both questions,
#: δ(ε) and ε(δ) (rdp_upper has no ε(δ) here: pld_upper answers both, and tighter).
_UPPER_ANALYTIC = (Method.EXACT, Method.PLD_UPPER)


class Accountant:
    """Certified privacy accounting for one training run's batch sampler."""

    def __init__(self, noise_multiplier: float, steps: int, epochs: int = 1,
                 sampler: str = "balls_and_bins", method: str = "auto", samples: int = DEFAULT_SAMPLES,
                 error_prob: float = DEFAULT_ERROR_PROB, seed: int = 0, direction: str = "both",
                 orders: str | None = None, dataset_size: int | None = None,
                 max_batch_size: int | None = None) -> None:
        self.config = CertifyConfig(
            sampler=sampler, sigma=noise_multiplier, steps=steps, epochs=epochs, epsilons=(1.0,),
            methods=(method,), samples=samples, error_prob=error_prob, seed=seed, direction=direction,
            orders=orders, dataset_size=dataset_size, max_batch_size=max_batch_size,
        )
        self.method = self.config.resolved[0]
        check_certifiable(self.config, self.method)
        if not self.method.is_monte_carlo and self.method not in _UPPER_ANALYTIC:
            raise ValueError(f"method must give an upper bound on both δ(ε) and ε(δ) (Monte Carlo, exact or pld_upper), "
                             f"got method={method!r}")
        self.last_table: pa.Table | None = None

    def get_delta(self, epsilon: float) -> float:
        """Certified upper bound on δ(ε) (both directions, truncation penalty included)."""
        cfg = dataclasses.replace(self.config, epsilons=(epsilon,))
        self.last_table = certify_config(cfg)
        rows = [r for r in self.last_table.to_pylist() if r["direction"] == cfg.direction.value
                or r["direction"] == "both"]
        return max(r["delta_upper"] for r in rows)

    def get_epsilon(self, delta: float) -> float:
        """Certified upper bound on ε(δ) (inf if no ε up to 64 can be certified with this budget)."""
        check_deltas([delta])
        if self.method.is_monte_carlo:
            rows = mc_epsilon_rows(self.config, self.method, [delta])
        else:
            rows = analytic_epsilon_rows(self.config, self.method, [delta])
        self.last_table = to_table(rows)
        value = rows[0]["epsilon_upper"]
        return math.inf if value is None else value

    @staticmethod
    def calibrate(target_epsilon: float, target_delta: float, steps: int, epochs: int = 1,
                  sampler: str = "balls_and_bins", method: str = "auto", samples: int = DEFAULT_SAMPLES,
                  error_prob: float = DEFAULT_ERROR_PROB, seed: int = 0, **kwargs) -> Calibration:
        """Smallest noise multiplier whose certified ε(target_delta) <= target_epsilon.

        The returned :class:`~epscert.inverse.calibrate.Calibration` holds the σ, the fresh-seed
        certificate and the Poisson σ for the same target.
        """
        target_epsilon = check_float("target_epsilon", target_epsilon, low=0.0, low_open=False, high=MAX_EPSILON,
                                     high_open=False)
        config = CertifyConfig(sampler=sampler, sigma=1.0, steps=steps, epochs=epochs, epsilons=(target_epsilon,),
                               methods=(method,), samples=samples, error_prob=error_prob, seed=seed, **kwargs)
        return calibrate_sigma(config, target_epsilon, target_delta)
