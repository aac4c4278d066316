"""The configuration of one certification: :class:`CertifyConfig`, validated on construction.

It sits above what it configures: the names and checks of the ground floor (:mod:`epscert.names`,
:mod:`epscert.checks`), the DP-SGD pairs (:mod:`epscert.dpsgd`) and the matrix mechanism
(:mod:`epscert.matrix`, whose own checks :func:`~epscert.matrix.checks.check_matrix_config` runs).
Everything a run needs is a frozen :class:`CertifyConfig`; its ``__post_init__`` refuses bad input
before any work starts, naming the field and the value. :meth:`CertifyConfig.mc_sampler` hands the
Monte Carlo engine the mechanism's sampler object (:mod:`epscert.config.samplers`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from epscert.checks import check_float, check_int, compress_orders, default_orders, parse_orders, show
from epscert.matrix.checks import check_matrix_config
from epscert.names import (
    AUTO_ORDER_STATS_MIN_STEPS, BACKENDS, BRACKET_METHODS, DEFAULT_ERROR_PROB, DEFAULT_PLD_DISCRETIZATION,
    DEFAULT_SAMPLES, EPSILONS_PER_PASS, JAX_KERNELS, MAX_EPSILON, MAX_EPSILONS, MAX_SAMPLE_BYTES, MAX_SIGMA,
    MAX_STEPS, MAX_TOTAL_COORDINATES, MIN_ERROR_PROB, MIN_SIGMA, SUPPORTED_METHODS, Direction, Method, Sampler,
    bracket_limit, canonical_method, parse_enum, persistent_reduction,
)
from epscert.rng import check_seed


def _stable_hash(payload: dict) -> bytes:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class CertifyConfig:
    """One certification request (SPEC §1–§7). All fields are validated on construction."""

    sampler: Sampler
    sigma: float
    steps: int
    epsilons: tuple[float, ...]
    methods: tuple[Method, ...] = (Method.AUTO,)
    epochs: int = 1
    samples: int = DEFAULT_SAMPLES
    error_prob: float = DEFAULT_ERROR_PROB
    seed: int = 0
    direction: Direction = Direction.BOTH
    orders: str | Sequence[int] | None = None
    shards: int = 1
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION
    dataset_size: int | None = None
    max_batch_size: int | None = None
    #: the batch size b the user gave with ``dataset_size`` n (steps = n // b): kept for the rows, changes no number
    batch_size: int | None = None
    backend: str = "numpy"
    strategy: object = None
    #: a matrix mechanism's block-law and decoupled bounds' seed and sample count where not ``seed`` and ``samples``
    #: (None): an ε(δ) inversion's searches take the run's (:func:`epscert.results.rows.law_seed`, ``law_samples``),
    #: so those bounds are drawn once per run, whatever a search's own sample count
    law_seed: int | None = None
    law_samples: int | None = None
    resolved: tuple[Method, ...] = field(init=False, default=())
    ranks: tuple[int, ...] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("sampler", parse_enum(Sampler, "sampler", self.sampler))
        set_("direction", parse_enum(Direction, "direction", self.direction))
        set_("sigma", check_float("sigma", self.sigma, low=MIN_SIGMA, low_open=False, high=MAX_SIGMA,
                                  high_open=False))
        set_("steps", check_int("steps", self.steps, 1))
        if self.steps > MAX_STEPS:
            raise ValueError(f"steps must be <= {MAX_STEPS}, got steps={show(self.steps)}")
        set_("epochs", check_int("epochs", self.epochs, 1))
        set_("samples", check_int("samples", self.samples, 1))
        set_("shards", check_int("shards", self.shards, 1))
        set_("seed", check_seed(self.seed))
        if self.law_seed is not None:
            set_("law_seed", check_seed(self.law_seed))
        if self.law_samples is not None:
            set_("law_samples", check_int("law_samples", self.law_samples, 1))
        if not isinstance(self.backend, str) or self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got backend={show(self.backend)}")
        set_("error_prob", check_float("error_prob", self.error_prob, low=MIN_ERROR_PROB, low_open=False,
                                       high=1.0, high_open=True))
        set_("pld_discretization", check_float("pld_discretization", self.pld_discretization,
                                               low=0.0, low_open=True, high=1.0))
        set_("epsilons", self._check_epsilons(self.epsilons))
        methods = self.methods
        if isinstance(methods, (str, Method)):
            methods = (methods,)
        if not isinstance(methods, Sequence) or len(methods) == 0:
            raise ValueError(f"method must be a method name or a non-empty list, got method={show(self.methods)}")
        methods = tuple(dict.fromkeys(canonical_method(self.sampler, parse_enum(Method, "method", m)) for m in methods))
        set_("methods", methods)
        if self.strategy is not None:
            check_matrix_config(self)
            return
        for m in methods:
            if m in (Method.INDEPENDENT_LOWER_BOUND, Method.COMONOTONE_UPPER_BOUND):
                raise ValueError(f"method={m.value!r} applies to the matrix mechanism only (give a strategy)")
            if m not in SUPPORTED_METHODS[self.sampler]:
                allowed = ", ".join(sorted(x.value for x in SUPPORTED_METHODS[self.sampler]))
                raise ValueError(
                    f"method={m.value!r} does not apply to sampler={self.sampler.value!r}; allowed: {allowed}"
                )
        set_("resolved", tuple(dict.fromkeys(self._resolve(m) for m in methods)))
        self._check_bracket()
        if self.shards > self.samples and any(m.is_monte_carlo for m in self.resolved):
            raise ValueError(f"shards must be <= samples, got shards={self.shards}, samples={self.samples}")
        self._check_importance()
        self._check_backend()
        self._check_orders()
        self._check_memory()
        self._check_truncation()

    # -- validation helpers -------------------------------------------------------------------
    @staticmethod
    def _check_epsilons(epsilons: object) -> tuple[float, ...]:
        if isinstance(epsilons, np.ndarray) and epsilons.ndim == 0:
            epsilons = (epsilons.item(),)
        if isinstance(epsilons, (int, float, np.number)) and not isinstance(epsilons, bool):
            epsilons = (epsilons,)
        if isinstance(epsilons, (str, Mapping)) or not isinstance(epsilons, Iterable):
            raise ValueError(f"epsilons must be a non-empty list of numbers, got epsilons={show(epsilons)}")
        values = [check_float("epsilon", e, low=0.0, low_open=False, high=MAX_EPSILON, high_open=False)
                  for e in epsilons]
        if not values:
            raise ValueError("epsilons must be a non-empty list of numbers, got epsilons=[]")
        return tuple(sorted(set(values)))

    def _resolve(self, method: Method) -> Method:
        """``auto``: importance (one epoch) or naive, switching to order statistics for large T."""
        if method is not Method.AUTO:
            return method
        if self.sampler.is_persistent:
            return self.reduced()._resolve(method)
        if self.sampler is Sampler.BALLS_AND_BINS:
            large = self.steps >= AUTO_ORDER_STATS_MIN_STEPS
            if self.epochs == 1:
                return Method.IMPORTANCE_ORDER_STATS if large else Method.IMPORTANCE
            return Method.ORDER_STATS if large else Method.NAIVE
        if self.sampler is Sampler.DETERMINISTIC and self.epochs == 1:
            return Method.IMPORTANCE
        return Method.NAIVE

    def _check_bracket(self) -> None:
        """The Balls-and-Bins PLD bracket's range of σ, T and E, refused before any work."""
        if not any(m in BRACKET_METHODS for m in self.methods):
            return
        reason = bracket_limit(self.sampler, self.sigma, self.steps, self.epochs)
        if reason:
            raise ValueError(f"{reason}; use a Monte Carlo method outside it")

    def _check_importance(self) -> None:
        for m in self.methods:
            if (m.uses_importance or m.is_conditional) and self.epochs > 1 and not self.sampler.is_persistent:
                raise ValueError(
                    f"method={m.value!r} needs epochs=1 (importance or conditional sampling for several epochs is an "
                    f"open problem, SPEC §4), got epochs={self.epochs}"
                )

    def _check_backend(self) -> None:
        """backend='jax' has the kernels of JAX_KERNELS only (see epscert.montecarlo.backends)."""
        if self.backend != "jax":
            return
        for m in self.resolved:
            if m.is_monte_carlo and m.value not in JAX_KERNELS.get(self.sampler.value, ()):
                raise ValueError(f"backend='jax' has no kernel for method={m.value!r} with sampler="
                                 f"{self.sampler.value!r}; use backend='numpy' or 'auto'")
        self.check_jax_value_grid()

    def check_jax_value_grid(self) -> None:
        """The JAX value estimators (conditional; a matrix mechanism's importance and conditional) form
        (|ε| × device block) values per block, not streamed in ε passes as the loss kernels are: their
        grid is capped at EPSILONS_PER_PASS (numpy streams any grid within MAX_EPSILONS)."""
        values = [m for m in self.resolved
                  if m.is_conditional or (self.strategy is not None and m in (Method.IMPORTANCE, Method.TILTED))]
        if values and len(self.epsilons) > EPSILONS_PER_PASS:
            raise ValueError(f"backend='jax' takes at most {EPSILONS_PER_PASS} values of epsilon for method="
                             f"{values[0].value!r} (EPSILONS_PER_PASS: its values are formed per block for the "
                             f"whole grid), got {len(self.epsilons)}; use backend='numpy', which streams the grid")

    def _check_orders(self) -> None:
        """Expand ``orders`` into ``ranks``; store ``orders`` as canonical 'start,stop,step' text."""
        wants = any(m.uses_order_stats for m in self.resolved)
        if self.orders is None:
            if wants and self.steps < 2:
                raise ValueError(f"order statistics need steps >= 2, got steps={self.steps}")
            if wants:
                ranks = default_orders(self.steps)
                object.__setattr__(self, "ranks", ranks)
                object.__setattr__(self, "orders", compress_orders(ranks))
            return
        if not wants:
            raise ValueError(f"orders only apply to order-statistic methods, got orders={show(self.orders)} "
                             f"with method={[m.value for m in self.methods]}")
        ranks = parse_orders(self.orders, max_rank=self.steps - 1)
        if ranks[0] != 1:
            raise ValueError(f"orders must start at rank 1, got first order={ranks[0]} (orders={show(self.orders)})")
        diffs = np.diff(np.asarray(ranks, dtype=np.int64))
        if np.any(diffs <= 0):
            bad = int(np.argmax(diffs <= 0))
            raise ValueError(f"orders must be strictly increasing (no duplicates), got rank {ranks[bad]} "
                             f"followed by {ranks[bad + 1]} (orders={show(self.orders)})")
        if ranks[-1] > self.steps - 1:
            raise ValueError(f"orders must be <= steps - 1 = {self.steps - 1}, got largest order={ranks[-1]} "
                             f"(orders={show(self.orders)})")
        object.__setattr__(self, "ranks", ranks)
        object.__setattr__(self, "orders", compress_orders(ranks))

    def _check_truncation(self) -> None:
        """Truncated batches (SPEC §9): n and B together, for the Binomial-batch samplers only. A ``batch_size``
        b (with n: the run's own terms, steps = n // b) is a label that must agree with steps."""
        if self.batch_size is not None:
            if self.dataset_size is None:
                raise ValueError(f"batch_size needs dataset_size (steps = dataset_size // batch_size), got "
                                 f"batch_size={show(self.batch_size)}, dataset_size=None")
            object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, 1))
            object.__setattr__(self, "dataset_size", check_int("dataset_size", self.dataset_size, 1))
            if self.dataset_size // self.batch_size != self.steps:
                raise ValueError(f"steps must be dataset_size // batch_size = {self.dataset_size // self.batch_size}, "
                                 f"got steps={show(self.steps)} with dataset_size={show(self.dataset_size)}, "
                                 f"batch_size={show(self.batch_size)}")
            if self.max_batch_size is None:
                return
        if self.dataset_size is None and self.max_batch_size is None:
            return
        if self.dataset_size is None or self.max_batch_size is None:
            raise ValueError(f"dataset_size and max_batch_size go together, got dataset_size={show(self.dataset_size)}, "
                             f"max_batch_size={show(self.max_batch_size)}")
        if self.sampler not in (Sampler.POISSON, Sampler.BALLS_AND_BINS):
            raise ValueError(f"truncated batches apply to poisson and balls_and_bins (Binomial batch sizes), "
                             f"got sampler={self.sampler.value!r} with max_batch_size={show(self.max_batch_size)}")
        object.__setattr__(self, "dataset_size", check_int("dataset_size", self.dataset_size, 1))
        object.__setattr__(self, "max_batch_size", check_int("max_batch_size", self.max_batch_size, 1))

    def reduced(self) -> "CertifyConfig":
        """The configuration that is certified: a persistent sampler's E epochs at σ are exactly its
        base sampler's one epoch at σ/√E (SPEC §1); any other configuration is itself."""
        if not self.sampler.is_persistent or self.strategy is not None:  # a matrix mechanism is its own pair
            return self
        base, sigma, epochs = persistent_reduction(self.sampler, self.sigma, self.epochs)
        return dataclasses.replace(self, sampler=base, sigma=sigma, epochs=epochs)

    def mc_sampler(self, method: Method):
        """The mechanism's Monte Carlo sampler object for ``method`` (:func:`epscert.config.samplers.sampler_for`):
        what the engine (:mod:`epscert.montecarlo`) is handed; it never imports a mechanism itself."""
        from epscert.config.samplers import sampler_for  # noqa: PLC0415 (samplers reads this module's names)

        return sampler_for(self, method)

    @property
    def truncated(self) -> bool:
        return self.max_batch_size is not None

    def _check_memory(self) -> None:
        """Refuse, before any sampling, a run whose per-sample arrays or total work exceed the caps.

        The width is what the sampler really draws (epscert.config.samplers.loss_sampler):
        deterministic is one Gaussian (one coordinate, E folded into σ), shuffle_persistent one
        epoch of T coordinates (E folded into σ), the others T (or the order-statistic ranks) per epoch.
        """
        if len(self.epsilons) > MAX_EPSILONS:
            raise ValueError(
                f"epsilons has {len(self.epsilons)} values, more than MAX_EPSILONS={MAX_EPSILONS} (the grid is "
                "streamed through the sampler, but its result rows, a few per ε, are held in memory as one table); "
                "split the grid over several runs, or ask for epsilon at a delta (Accountant.get_epsilon, "
                "compare --deltas)")
        for m in self.resolved:
            if not m.is_monte_carlo:
                continue
            width = len(self.ranks) if (m.uses_order_stats and self.ranks) else self.steps
            epochs = 1 if self.sampler.is_persistent else self.epochs
            if self.sampler is Sampler.DETERMINISTIC:
                width, epochs = 1, 1
            per_sample = 8 * width * epochs * 4
            if per_sample > MAX_SAMPLE_BYTES:
                way_out = "use method='order_stats'" if Method.ORDER_STATS in SUPPORTED_METHODS[self.sampler] \
                    else "lower steps or epochs"
                raise ValueError(
                    f"steps={self.steps} x epochs={self.epochs} needs {per_sample / 2**30:.1f} GiB per sample "
                    f"with method={m.value!r} (limit {MAX_SAMPLE_BYTES / 2**30:.0f} GiB); {way_out}"
                )
            total = self.samples * width * epochs * len(self.direction.parts())
            if total > MAX_TOTAL_COORDINATES:
                raise ValueError(
                    f"samples={self.samples} x {width} coordinates x epochs={epochs} is {total:.2e} sampled "
                    f"coordinates (limit {MAX_TOTAL_COORDINATES:.0e}, about 4 core-years); lower samples"
                )

    # -- identities ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "sampler": self.sampler.value, "sigma": self.sigma, "steps": self.steps,
            "epochs": self.epochs, "epsilons": list(self.epsilons),
            "methods": [m.value for m in self.methods], "samples": self.samples,
            "error_prob": self.error_prob, "seed": self.seed, "direction": self.direction.value,
            "orders": self.orders, "shards": self.shards,
            "pld_discretization": self.pld_discretization,
            "dataset_size": self.dataset_size, "max_batch_size": self.max_batch_size,
            # the batch-size label: left out when absent so existing ids stay stable
            **({"batch_size": self.batch_size} if self.batch_size is not None else {}),
            # the backend shapes the stream; left out when 'numpy' so existing ids stay stable
            **({"backend": self.backend} if self.backend != "numpy" else {}),
            **({"strategy": self.strategy.to_dict()} if self.strategy is not None else {}),
            # the bounds' seed where it is not ``seed``: left out when absent so existing ids stay stable
            **({"law_seed": self.law_seed} if self.law_seed is not None else {}),
            **({"law_samples": self.law_samples} if self.law_samples is not None else {}),
        }

    @functools.cached_property
    def config_id(self) -> str:
        """Stable 16-hex-digit hash of every field but ``shards`` (same request -> same id, any machine);
        computed once per object (each row carries it: a 10,001-value grid hashed it per row, quadratically).

        The shard count is left out: the samples are the same for every shard layout (SPEC §10,
        :mod:`epscert.montecarlo.shard`), so it is how the work is split, not what is computed, and
        ``--shards auto`` may pick a different count for a different number of workers.
        """
        payload = self.to_dict()
        del payload["shards"]
        return _stable_hash(payload).hex()[:16]

    def sampling_key(self, method: Method) -> int:
        """Integer key of everything that shapes a method's samples (SPEC §10 ``config_key``).

        Sample count, error probability and shard count are left out: they do not change
        what one block of samples is, only how many blocks are drawn. σ is left out on
        purpose: configurations that differ only in σ draw the same underlying normals and
        uniforms (common random numbers, SPEC §8), which makes σ searches and sweeps smooth.
        Each configuration's own result is unaffected: its samples are still i.i.d.
        """
        if self.strategy is not None:  # the matrix mechanism: its modes' Gram matrix shapes the draws
            payload = {"mechanism": "matrix", "strategy": self.strategy.to_dict(), "steps": self.steps,
                       "method": method.value, "epsilon0": min(self.epsilons)}
            return int.from_bytes(_stable_hash(payload)[:8], "big")
        if self.sampler.is_persistent:  # the same draws as the one-epoch base it reduces to
            return self.reduced().sampling_key(method)
        payload = {
            "sampler": self.sampler.value, "steps": self.steps,
            "epochs": self.epochs, "method": method.value,
            "orders": self.orders if method.uses_order_stats else None,
            "epsilon0": min(self.epsilons) if (method.uses_importance or method.is_conditional) else None,
        }
        return int.from_bytes(_stable_hash(payload)[:8], "big")
