"""Opacus with epscert's batches and certificate (extra ``[torch]``).

    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=len(ds), batch_size=256, epochs=10)
    engine = opacus.PrivacyEngine()
    model, optimizer, loader = make_private(engine, module=model, optimizer=optimizer, dataset=ds,
                                            batch_sampler=bs, noise_multiplier=1.0, max_grad_norm=1.0)
    ...train...
    engine.get_epsilon(1e-5)   # epscert's certificate for the steps taken so far

``EpscertAccountant`` implements ``opacus.accountants.IAccountant``. Opacus must not wrap the loader
in its Poisson loader (``poisson_sampling=False``): the batches are epscert's. The class is built on
first use (module ``__getattr__``), so importing this module does not import opacus.

Partial epochs: the steps of a started epoch are a prefix of that epoch's releases, a post-processing
of the whole epoch, so the certificate for ``ceil(steps / T)`` whole epochs is valid for them.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

from epscert.batching.indices import BatchIndexSampler
from epscert.accountant import Accountant
from epscert.inverse.epsilon_at_delta import analytic_epsilon_rows
from epscert.params import CertifyConfig, Method
from epscert.integrations.torch import data_loader as epscert_data_loader

MECHANISM = "epscert"


class SamplingMismatchWarning(UserWarning):
    """Opacus's Poisson ε is printed for a run whose batches were not Poisson."""


def __getattr__(name: str) -> Any:
    if name == "EpscertAccountant":
        return accountant_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=1)
def accountant_class() -> type:
    """``EpscertAccountant``, a subclass of ``opacus.accountants.IAccountant`` (built once, lazily)."""
    from opacus.accountants.accountant import IAccountant

    class EpscertAccountant(IAccountant):
        """Opacus accountant that certifies the steps taken with an :class:`epscert.BatchSampler`.

        ``get_epsilon(delta)`` is epscert's certified upper bound for ``ceil(steps / T)`` whole epochs
        of the sampler (holding with probability >= 1 - error_prob for Monte Carlo methods). Further
        keyword arguments (method, samples, error_prob, seed) go to :class:`epscert.Accountant`.

        After k < T steps of epoch e, the ε is that of e whole epochs: the models released so far are
        a function of the whole run's releases (its prefix), and post-processing cannot raise ε, so
        the certificate of e whole epochs holds for them. ``last_certificate`` is the
        :class:`~epscert.inverse.best.Certificate` behind the last ε returned (None unless
        ``method='auto'``).
        """

        def __init__(self, batch_sampler: BatchIndexSampler, noise_multiplier: float, **accountant_kwargs):
            if not isinstance(batch_sampler, BatchIndexSampler):
                raise ValueError(f"batch_sampler must be an epscert.BatchSampler, got batch_sampler={batch_sampler!r}")
            self.history: list = []  # Opacus's (noise_multiplier, sample_rate, steps) records
            self.batch_sampler = batch_sampler
            self.noise_multiplier = float(noise_multiplier)
            self.accountant_kwargs = accountant_kwargs
            self.steps = 0
            self.epsilons: dict[tuple[int, float], float] = {}
            self.certificates: dict[tuple[int, float], Any] = {}
            self.last_certificate = None
            self.epscert_accountant(1)  # validates σ and the kwargs before any training

        def epscert_accountant(self, epochs: int):
            """The :class:`epscert.Accountant` of the first ``epochs`` epochs of the sampler's run."""
            args = dict(self.batch_sampler.accountant_arguments(), epochs=epochs)
            return Accountant(noise_multiplier=self.noise_multiplier, **args, **self.accountant_kwargs)

        def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
            if not math.isclose(noise_multiplier, self.noise_multiplier, rel_tol=1e-12):
                raise ValueError(f"noise_multiplier must stay {self.noise_multiplier} for this accountant, "
                                 f"got noise_multiplier={noise_multiplier}")
            if self.steps >= len(self.batch_sampler):
                raise ValueError(f"steps must be <= len(batch_sampler)={len(self.batch_sampler)}: the run "
                                 f"has no more certified batches, got step {self.steps + 1}")
            self.steps += 1
            if self.history and self.history[-1][:2] == (noise_multiplier, sample_rate):
                self.history[-1] = (noise_multiplier, sample_rate, self.history[-1][2] + 1)
            else:
                self.history.append((noise_multiplier, sample_rate, 1))

        @property
        def epochs_started(self) -> int:
            return -(-self.steps // self.batch_sampler.steps_per_epoch)

        def get_epsilon(self, delta: float, *args, **kwargs) -> float:
            """Certified ε(δ) for the steps so far (0 before the first step)."""
            epochs = self.epochs_started
            if epochs == 0:
                return 0.0
            key = (epochs, float(delta))
            if key not in self.epsilons:
                accountant = self.epscert_accountant(epochs)
                self.epsilons[key] = accountant.get_epsilon(delta)
                self.certificates[key] = accountant.last_certificate
            self.last_certificate = self.certificates[key]
            return self.epsilons[key]

        def __len__(self) -> int:
            return self.steps

        @classmethod
        def mechanism(cls) -> str:
            return MECHANISM

        def state_dict(self, destination=None):
            out = super().state_dict(destination)
            out["steps"] = self.steps
            out["noise_multiplier"] = self.noise_multiplier
            out["batch_sampler"] = self.batch_sampler.state_dict()
            return out

        def load_state_dict(self, state_dict) -> None:
            super().load_state_dict(state_dict)
            mine = self.batch_sampler.state_dict()
            theirs = dict(state_dict.get("batch_sampler", {}), position=mine["position"])
            if theirs != mine:
                raise ValueError(f"state_dict['batch_sampler'] must describe this run {mine}, got {theirs}")
            if state_dict.get("noise_multiplier") != self.noise_multiplier:
                raise ValueError(f"noise_multiplier must be {self.noise_multiplier}, "
                                 f"got noise_multiplier={state_dict.get('noise_multiplier')}")
            self.steps = int(state_dict["steps"])

    return EpscertAccountant


def make_private(privacy_engine: Any, *, module: Any, optimizer: Any, dataset: Any,
                 batch_sampler: BatchIndexSampler, noise_multiplier: float, max_grad_norm: float,
                 accountant_kwargs: dict | None = None, **kwargs: Any):
    """``privacy_engine.make_private`` with epscert's batches and accountant.

    Installs an ``EpscertAccountant`` on the engine, builds the empty-safe loader over ``batch_sampler``,
    calls Opacus with ``poisson_sampling=False`` and sets the optimizer's expected batch size to the
    sampler's (Opacus would infer it from ``len(loader)``, which counts all epochs).
    Returns (module, optimizer, data_loader) like Opacus.
    """
    if kwargs.get("poisson_sampling", False):
        raise ValueError("poisson_sampling must be False: the batches come from batch_sampler, "
                         "got poisson_sampling=True")
    kwargs["poisson_sampling"] = False
    privacy_engine.accountant = accountant_class()(batch_sampler, noise_multiplier, **(accountant_kwargs or {}))
    loader = epscert_data_loader(dataset, batch_sampler)
    module, optimizer, loader = privacy_engine.make_private(
        module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm, **kwargs)
    optimizer.expected_batch_size = batch_sampler.expected_batch_size / batch_sampler.world_size
    return module, optimizer, loader


def make_private_with_epsilon(privacy_engine: Any, *, module: Any, optimizer: Any, dataset: Any,
                              batch_sampler: BatchIndexSampler, target_epsilon: float, target_delta: float,
                              max_grad_norm: float, accountant_kwargs: dict | None = None, **kwargs: Any):
    """Like Opacus's ``make_private_with_epsilon``: σ from epscert's calibration for the whole run.

    The σ is the smallest one whose certificate (a fresh-seed run, see
    :func:`epscert.Accountant.calibrate`) meets (target_epsilon, target_delta) for all of the
    sampler's epochs. Refuses if no σ up to the search bracket is certified.
    """
    args = batch_sampler.accountant_arguments()
    calibration = Accountant.calibrate(target_epsilon=target_epsilon, target_delta=target_delta,
                                       **args, **(accountant_kwargs or {}))
    if not calibration.certified or not math.isfinite(calibration.sigma):
        raise ValueError(f"no noise multiplier certifies target_epsilon={target_epsilon} at "
                         f"target_delta={target_delta} for {batch_sampler!r}")
    return make_private(privacy_engine, module=module, optimizer=optimizer, dataset=dataset,
                        batch_sampler=batch_sampler, noise_multiplier=calibration.sigma,
                        max_grad_norm=max_grad_norm, accountant_kwargs=accountant_kwargs, **kwargs)


def check_sampling(privacy_engine: Any, optimizer: Any, data_loader: Any, delta: float) -> dict:
    """Guard against the known trap: Opacus's Poisson ε printed for a shuffling loader.

    If the engine's accountant is Opacus's own and the loader is not Opacus's Poisson loader but a
    shuffling one (``poisson_sampling=False`` with ``shuffle=True``), warns loudly
    (:class:`SamplingMismatchWarning`) and reports the shuffle lower bound on ε (cube bound of
    "How Private are DP-SGD Implementations?", SPEC §7, for the whole epochs completed; a valid
    lower bound for dynamic shuffling): the true ε is at least that, whatever Opacus prints.
    Returns {"opacus_epsilon", "shuffle_epsilon_lower", "mismatch"}.
    """
    from opacus.data_loader import DPDataLoader
    from torch.utils.data import RandomSampler

    history = getattr(privacy_engine.accountant, "history", [])
    steps_taken = sum(int(h[2]) for h in history)  # Opacus's len() counts merged history entries
    opacus_eps = privacy_engine.accountant.get_epsilon(delta) if steps_taken else 0.0
    out = {"opacus_epsilon": opacus_eps, "shuffle_epsilon_lower": None, "mismatch": False}
    if privacy_engine.accountant.mechanism() == MECHANISM or isinstance(data_loader, DPDataLoader):
        return out
    if not isinstance(getattr(data_loader, "sampler", None), RandomSampler):
        return out
    out["mismatch"] = True
    steps_per_epoch = len(data_loader)
    epochs = steps_taken // steps_per_epoch
    if epochs >= 1:
        config = CertifyConfig(sampler="shuffle", sigma=optimizer.noise_multiplier, steps=steps_per_epoch,
                               epochs=epochs, epsilons=(1.0,), methods=(Method.CUBE_LOWER_BOUND,))
        out["shuffle_epsilon_lower"] = analytic_epsilon_rows(config, Method.CUBE_LOWER_BOUND, [delta])[0][
            "epsilon_lower"]
    warnings.warn(
        f"Opacus reports ε={opacus_eps:.4g} at δ={delta:g} for Poisson sampling, but this loader shuffles "
        f"(poisson_sampling=False): that ε does not apply to this run. The shuffle lower bound is "
        f"ε >= {out['shuffle_epsilon_lower']} ({epochs} whole epochs); use epscert.BatchSampler with "
        f"epscert.integrations.opacus.make_private for a certificate that matches the batches.",
        SamplingMismatchWarning, stacklevel=2)
    return out
