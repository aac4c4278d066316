"""An accountant object in the style of dp_accounting and Opacus, and ``epscert.BatchSampler`` beside it.

    acc = epscert.Accountant(noise_multiplier=0.8, steps=1000, epochs=2)
    acc = epscert.Accountant(noise_multiplier=1.0, dataset_size=60000, batch_size=256, epochs=10)
    acc.get_delta(8.0)      # certified upper bound on δ(8)
    acc.get_epsilon(1e-5)   # certified upper bound on ε(1e-5)
    acc.get_epsilon(1e-5, steps_done=1500)   # after the first 1500 of the 2000 steps (mid-epoch)
    acc.epsilon_interval(1e-5)  # (certified lower, estimate, certified upper) on ε(1e-5)
    epscert.Accountant.calibrate(target_epsilon=8, target_delta=1e-5, steps=1000)

    # a matrix mechanism (DP-FTRL / BandMF) with Balls-and-Bins batches of cycle length b
    st = epscert.matrix.strategies.toeplitz_strategy(c_col=[1.0, 0.5, 0.25], iterations=2000)
    acc = epscert.Accountant(noise_multiplier=3.0, strategy=st, cycle_length=100)

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
from epscert.inverse.best import (Certificate, Interval, best_certificate, certificate_name, lower_and_estimate,
                                  matrix_lower_rows, with_other_side, with_unbiased_side)
from epscert.inverse.prefix import certificate_after
from epscert.config.mechanism import mechanism_settings
from epscert.config import (
    BRACKET_METHODS, DEFAULT_ERROR_PROB, DEFAULT_SAMPLES, MAX_EPSILON, CertifyConfig, Method, check_float, check_int,
    steps_per_epoch,
)
from epscert.batching.indices import BatchIndexSampler
from epscert.progress import Callback
from epscert.schema import to_table
from epscert.matrix import prefix as prefix_math
from epscert.matrix.strategies import Strategy, toeplitz_strategy

#: Analytic methods whose value is an upper bound usable as a certificate for both questions,
#: δ(ε) and ε(δ) (rdp_upper has no ε(δ) here: pld_upper answers both, and tighter).
_UPPER_ANALYTIC = (Method.EXACT, Method.PLD_UPPER, Method.BRACKET_UPPER, Method.COMONOTONE_UPPER_BOUND)


class NotCertifiedWarning(UserWarning):
    """No candidate method certified a finite value; the message says why and what would."""


def resolve_steps(steps: int | None, dataset_size: int | None, batch_size: int | None) -> int:
    """``steps``, or ``dataset_size // batch_size`` (:func:`epscert.names.steps_per_epoch`); not both."""
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

    A matrix mechanism (DP-FTRL / BandMF): ``strategy`` (:func:`epscert.matrix.strategies.toeplitz_strategy`
    or :func:`~epscert.matrix.strategies.dense_strategy`) and ``cycle_length`` b (an alias of ``steps``); the
    sampler is then ``balls_and_bins_persistent`` (:func:`epscert.config.mechanism.mechanism_settings`) and
    ``method='auto'`` takes the tightest of the matrix candidates
    (:data:`epscert.inverse.best.MATRIX_CANDIDATES`).
    """

    def __init__(self, noise_multiplier: float, steps: int | None = None, epochs: int = 1,
                 sampler: str | None = None, method: str = "auto", samples: int = DEFAULT_SAMPLES,
                 error_prob: float = DEFAULT_ERROR_PROB, seed: int = 0, direction: str = "both",
                 orders: str | None = None, dataset_size: int | None = None,
                 max_batch_size: int | None = None, batch_size: int | None = None,
                 progress: Callback | None = None, strategy: Strategy | None = None,
                 cycle_length: int | None = None) -> None:
        if cycle_length is None and (strategy is None or steps is not None or batch_size is not None):
            steps = resolve_steps(steps, dataset_size, batch_size)
        elif cycle_length is not None and batch_size is not None:
            raise ValueError(f"give either cycle_length or dataset_size and batch_size, not both, got "
                             f"cycle_length={cycle_length!r}, batch_size={batch_size!r}")
        sampler, steps = mechanism_settings(strategy, sampler=sampler, steps=steps, cycle_length=cycle_length)
        self.config = CertifyConfig(
            sampler=sampler, sigma=noise_multiplier, steps=steps, epochs=epochs, epsilons=(1.0,),
            methods=(method,), samples=samples, error_prob=error_prob, seed=seed, direction=direction,
            orders=orders, dataset_size=dataset_size if max_batch_size is not None or batch_size is None else None,
            max_batch_size=max_batch_size, strategy=strategy,
        )
        self.auto = Method(self.config.methods[0]) is Method.AUTO
        self.method = self.config.resolved[0]
        if not self.auto:
            check_certifiable(self.config, self.method)
        if not self.auto and not self.method.is_monte_carlo and self.method not in _UPPER_ANALYTIC:
            raise ValueError(f"method must give an upper bound on both δ(ε) and ε(δ) (Monte Carlo, exact, pld_upper, "
                             f"bracket_upper or comonotone_upper_bound), got method={method!r}")
        self.progress = progress
        self.last_table: pa.Table | None = None
        self.last_certificate: Certificate | None = None
        self._certificates: dict[tuple, Certificate] = {}
        #: Monte Carlo passes already drawn for this run (epsilon_at_delta.sampled): ε at a second δ reuses the
        #: passes it shares with the first (the coarse search), each answer the one a fresh accountant gives
        self._passes: dict = {}
        self._matrix_answers: dict[tuple, dict[int, float]] = {}  # (quantity, target) -> {k: value given}
        # the prefix bracket answers mid-epoch questions for method auto and bracket_upper (pld_upper)
        self._prefix = self.auto or self.method is Method.BRACKET_UPPER

    def get_delta(self, epsilon: float, steps_done: int | None = None) -> float:
        """Certified upper bound on δ(ε) (both directions, truncation penalty included).

        ``steps_done``: the bound for the first ``steps_done`` steps of the run (default: all
        T·E; mid-epoch values from the prefix bracket, :mod:`epscert.inverse.prefix`).
        """
        return self._answer(self._after(steps_done, epsilon=epsilon))

    def get_epsilon(self, delta: float, steps_done: int | None = None) -> float:
        """Certified upper bound on ε(δ); inf, with a :class:`NotCertifiedWarning` saying why, if none.

        ``steps_done``: the bound for the first ``steps_done`` steps of the run (default: all
        T·E). A training loop asks after every logging interval; mid-epoch answers come from the
        prefix bracket (:mod:`epscert.inverse.prefix`, Balls-and-Bins) and never exceed the
        answer for the epoch in progress completed.
        """
        check_deltas([delta])
        return self._answer(self._after(steps_done, delta=delta))

    def _after(self, steps_done: int | None, **ask) -> Certificate:
        """The certificate after ``steps_done`` steps (DP-SGD: :func:`~epscert.inverse.prefix.certificate_after`;
        a matrix mechanism: :meth:`_matrix_after`)."""
        if self.config.strategy is not None and steps_done is not None:
            return self._matrix_after(steps_done, **ask)
        return certificate_after(self.config, steps_done, whole=self._whole, prefix=self._prefix,
                                 progress=self.progress, **ask)

    def _matrix_after(self, steps_done: int, **ask) -> Certificate:
        """A matrix mechanism after its first k iterations, kept monotone in k (:meth:`_monotone_in_k`).

        With C lower-triangular, the first k outputs are y_{1..k} = C[:k, :k] x_{1..k} + σ z_{1..k}, a
        post-processing of the whole output: the whole run's certificate holds for them. A Toeplitz C
        truncated to k rows is the Toeplitz strategy of the same c_col over k iterations, so when b <= k
        the truncated mechanism (its own pair, ceil(k/b) cycles) is certified instead, which is tighter;
        when k < b, only the first k bins have taken part: the pair is the k-bin pair of C_k mixed with
        pure noise, certified through P''s certificate at δ·b/k (:mod:`epscert.matrix.prefix`).
        A dense C takes the whole run's certificate, with a note.
        """
        strategy = self.config.strategy
        k = check_int("steps_done", steps_done, 0)
        if k > strategy.iterations:
            raise ValueError(f"steps_done must be <= the strategy's iterations={strategy.iterations}, got "
                             f"steps_done={k}")
        if k == 0:
            return certificate_after(self.config, 0, **ask)
        return self._monotone_in_k(k, self._matrix_prefix(k, **ask), **ask)

    def _matrix_prefix(self, k: int, **ask) -> Certificate:
        strategy = self.config.strategy
        if k == strategy.iterations:
            return dataclasses.replace(self._whole(self.config, progress=self.progress, **ask), steps_done=k)
        b = self.config.steps
        # the truncated mechanism, where the method asked for applies to it (the bracket needs b | k)
        if strategy.kind == "toeplitz" and b <= k and (self.auto or self.method not in BRACKET_METHODS or k % b == 0):
            cut = toeplitz_strategy(strategy.c_col, k)
            config = dataclasses.replace(self.config, strategy=cut, epochs=-(-k // b))
            return dataclasses.replace(self._whole(config, progress=self.progress, **ask), steps_done=k)
        if strategy.kind == "toeplitz" and k < b:
            try:
                return self._below_one_cycle(k, **ask)
            except ValueError:  # the method asked for does not apply to the k-bin run: the next whole cycle
                pass
        whole_cycles = min(strategy.iterations, -(-k // b) * b)
        if strategy.kind == "toeplitz" and whole_cycles < strategy.iterations:
            # the bracket asked by name, b not dividing k: the first k outputs are a post-processing of the
            # first ceil(k/b)·b, whose truncated mechanism the bracket does certify (tighter than the whole run)
            cut = toeplitz_strategy(strategy.c_col, whole_cycles)
            config = dataclasses.replace(self.config, strategy=cut, epochs=whole_cycles // b)
            cert = self._whole(config, progress=self.progress, **ask)
            note = (f"after {k} of {strategy.iterations} iterations: the certificate of the first {whole_cycles} "
                    f"(whole cycles) holds (the first k outputs are a post-processing of them)")
            return dataclasses.replace(cert, steps_done=k, notes=cert.notes + (note,), lower=0.0, lower_method=None,
                                       estimate=None)
        cert = self._whole(self.config, progress=self.progress, **ask)
        note = (f"after {k} of {strategy.iterations} iterations: the whole run's certificate holds (the first k "
                f"outputs are a post-processing of all of them)")
        # the whole run's lower bound and estimate are not the first k iterations': dropped
        return dataclasses.replace(cert, steps_done=k, notes=cert.notes + (note,), lower=0.0, lower_method=None,
                                   estimate=None)

    def _below_one_cycle(self, k: int, *, delta: float | None = None, epsilon: float | None = None) -> Certificate:
        """k < b: the k-bin pair of C_k (cycle length k, one participation) subsampled at q = k/b
        (:mod:`epscert.matrix.prefix`: ε' = log(1 + q(e^{ε*} - 1)) from P''s ε* at δ/q; δ' = q δ* at
        the REMOVE preimage of ε'). The lower side and estimate of P' do not carry over: dropped."""
        strategy, b = self.config.strategy, self.config.steps
        q = k / b
        config = dataclasses.replace(self.config, strategy=toeplitz_strategy(strategy.c_col, k), steps=k, epochs=1)
        how = (f"after {k} of {strategy.iterations} iterations (k < b = {b}): only the first {k} bins have taken "
               f"part, so the pair is the {k}-bin pair of C_{k} with probability q = {k}/{b} and pure noise "
               f"otherwise; its certificate is that of the {k}-bin run through the subsampling identity")
        if delta is not None:
            inner = prefix_math.inner_delta(delta, q)
            if inner is None:  # δ >= q >= the total variation of the mixture
                cert, target, value = self._whole(config, progress=self.progress, delta=delta), delta, 0.0
                how += f"; δ = {delta:g} >= q, the total variation's bound: ε = 0"
            else:
                cert, target = self._whole(config, progress=self.progress, delta=inner), delta
                value = prefix_math.amplified_epsilon(cert.value, q)
                how += f": ε = log(1 + q(e^ε* - 1)) with ε* = {cert.value:.6g} at δ/q = {inner:g}"
        else:
            inner_eps = prefix_math.inner_epsilon(epsilon, q)
            cert, target = self._whole(config, progress=self.progress, epsilon=inner_eps), epsilon
            value = prefix_math.amplified_delta(cert.value, q)
            how += f": δ = q δ* with δ* = {cert.value:.6g} at ε* = {inner_eps:.6g}"
        return dataclasses.replace(cert, sampler=certificate_name(self.config), target=target, value=value,
                                   steps_done=k, notes=cert.notes + (how,), lower=0.0, lower_method=None,
                                   estimate=None)

    def _monotone_in_k(self, k: int, cert: Certificate, *, delta: float | None = None,
                       epsilon: float | None = None) -> Certificate:
        """Answers after k iterations never fall as k grows, for one (δ) or (ε) asked.

        The first k outputs are a post-processing of the first k' > k, so the true ε(δ) and δ(ε) are
        non-decreasing in k. Hence the smallest upper bound already given at some k' >= k also bounds
        step k (min), and raising a bound keeps it a bound (max with those given at k'' < k): the
        reported sequence is monotone and every value is still certified (at the error probability of
        the certificates it came from).
        """
        key = ("epsilon", delta) if delta is not None else ("delta", epsilon)
        given = self._matrix_answers.setdefault(key, {})
        value = cert.value
        later = [v for kk, v in given.items() if kk >= k]
        earlier = [v for kk, v in given.items() if kk < k]
        notes = cert.notes
        if later and min(later) < value:
            value = min(later)
            notes += ("lowered to the bound already certified for more iterations (the first k outputs are a "
                      "post-processing of them)",)
        if earlier and max(earlier) > value:
            value = max(earlier)
            notes += ("raised to the bound already given for fewer iterations, so that answers never fall as the "
                      "run goes on (a larger upper bound is still an upper bound)",)
        given[k] = value
        if value == cert.value:
            return cert
        lower = min(cert.lower, value)
        estimate = cert.estimate if cert.estimate is not None and lower <= cert.estimate <= value else None
        return dataclasses.replace(cert, value=value, notes=notes, lower=lower, estimate=estimate)

    def _answer(self, cert: Certificate) -> float:
        self.last_certificate = cert
        self.last_table = to_table(list(cert.rows))
        if not cert.finite:
            if self.auto:
                message = cert.summary()
            else:
                message = (f"method={self.method.value!r} certifies no finite ε at delta={cert.target:g}; "
                           "method='auto' tries every certified method")
            warnings.warn(message, NotCertifiedWarning, stacklevel=3)
        return cert.value

    def _whole(self, config: CertifyConfig, *, delta: float | None = None, epsilon: float | None = None,
               progress: Callback | None = None) -> Certificate:
        """The certificate of ``config.epochs`` whole epochs, computed once per (epochs, target).

        The answer does not depend on the call's history: Monte Carlo runs use the fixed seed.
        """
        key = (config.epochs, config.strategy, delta, epsilon)  # a truncated strategy has its own
        if key not in self._certificates:
            if self.auto:
                cert = best_certificate(config, delta=delta, epsilon=epsilon, progress=progress, passes=self._passes)
            else:
                cert = self._method_certificate(config, delta, epsilon, progress)
            self._certificates[key] = cert
        return self._certificates[key]

    def _method_certificate(self, config: CertifyConfig, delta: float | None, epsilon: float | None,
                            progress: Callback | None) -> Certificate:
        """The certificate of the one method asked for (``method`` other than ``auto``); for a matrix
        mechanism its deterministic lower bounds join the rows, so the two-sided answer has a lower side
        when the method has none (naive, comonotone)."""
        method = self.method
        if delta is not None:
            if method.is_monte_carlo:
                rows = mc_epsilon_rows(config, method, [delta], progress=progress, passes=self._passes)
            else:
                rows = analytic_epsilon_rows(config, method, [delta])
            value = rows[0]["epsilon_upper"]
            value = math.inf if value is None or not math.isfinite(value) else value
            quantity, target, pick = "epsilon", delta, rows[0]
        else:
            cfg = dataclasses.replace(config, epsilons=(epsilon,))
            rows = certify_config(cfg).to_pylist()
            mine = [r for r in rows if r["direction"] == cfg.direction.value or r["direction"] == "both"]
            pick = max(mine, key=lambda r: r["delta_upper"])
            quantity, target, value = "delta", epsilon, pick["delta_upper"]
        beta = pick["error_prob"] if method.is_monte_carlo else None
        # a matrix mechanism's deterministic lower bounds hold surely: the two-sided answer takes them too
        rows = list(rows) + matrix_lower_rows(config, quantity, target)
        lower, lower_method, estimate = lower_and_estimate(rows, quantity, config.direction.value)
        return Certificate(quantity, target, certificate_name(config), value, method.value, pick["bound"],
                           pick["guarantee"], beta, (), tuple(rows), lower=lower, lower_method=lower_method,
                           estimate=estimate)

    def epsilon_interval(self, delta: float) -> Interval:
        """(certified lower bound, estimate, certified upper bound) on ε(δ).

        ``upper`` is :meth:`get_epsilon`; ``lower`` the largest certified lower bound among the
        same candidates (Monte Carlo LCBs, and a matrix mechanism's deterministic lower bounds;
        0 when none); ``estimate`` the Monte Carlo point estimate (None when no Monte Carlo ran).
        Each side holds with probability >= 1 - error_prob, both at once >= 1 - 2 error_prob.
        """
        upper = self.get_epsilon(delta)
        return self._interval(upper, "epsilon")

    def delta_interval(self, epsilon: float) -> Interval:
        """(certified lower bound, estimate, certified upper bound) on δ(ε) (see :meth:`epsilon_interval`)."""
        upper = self.get_delta(epsilon)
        return self._interval(upper, "delta")

    def _interval(self, upper: float, quantity: str) -> Interval:
        """The last certificate's two sides (its ``lower`` is 0 where nothing lower is certified, e.g. mid-run)."""
        cert = self.last_certificate
        if self.auto:
            cert = with_other_side(self.config, cert)  # the bracket's lower side
        # an order-statistic run's mean is an upper bound's mean: the estimate and a lower side from an unbiased one
        cert = with_unbiased_side(self.config, cert, self.progress)
        if cert is not self.last_certificate:
            self.last_certificate, self.last_table = cert, to_table(list(cert.rows))
        return Interval(cert.lower, cert.estimate, upper)

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


class BatchSampler(BatchIndexSampler):
    """Batch indices of one certified sampler (:class:`~epscert.batching.indices.BatchIndexSampler`)."""

    def accountant(self, noise_multiplier: float, epochs: int | None = None, **kwargs) -> Accountant:
        """The :class:`epscert.Accountant` of this sampler run for ``epochs`` (default: all) epochs.

        Further keyword arguments (method, samples, error_prob, seed, ...) go to the Accountant.
        """
        args = self.accountant_arguments()
        if epochs is not None:
            args["epochs"] = epochs
        return Accountant(noise_multiplier=noise_multiplier, **args, **kwargs)
