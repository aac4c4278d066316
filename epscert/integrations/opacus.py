"""Opacus with epscert's batches and certificate (extra ``[torch]``).

By name, after ``register()``, or through :func:`make_private`, which also binds the accountant to
the sampler (checks and prefetch handling below):

    eo.register()                       # once: PrivacyEngine(accountant="epscert") from here on
    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=len(ds), batch_size=256, epochs=10)
    engine = opacus.PrivacyEngine(accountant="epscert")
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer,
        data_loader=epscert.integrations.torch.data_loader(ds, bs), noise_multiplier=1.0,
        max_grad_norm=1.0, poisson_sampling=False)
    # or: model, optimizer, loader = eo.make_private(engine, module=model, optimizer=optimizer,
    #         dataset=ds, batch_sampler=bs, noise_multiplier=1.0, max_grad_norm=1.0)
    for epoch in range(10):
        for x, y in loader: ...train...
        engine.get_epsilon(1e-5)        # certified for the steps taken so far, mid-epoch too

``EpscertAccountant`` implements ``opacus.accountants.IAccountant``. What it certifies:

- **The steps.** Opacus's step hook reports each optimizer step with ``sample_rate`` =
  (1/len(loader))·(batches accumulated into the step). epscert's loader serves one epoch per
  iteration (:mod:`epscert.integrations.torch`), so 1/len(loader) = 1/T, the probability that a
  record is in a given step's Balls-and-Bins batch. ``.history`` keeps Opacus's format
  (σ, sample_rate, steps); the run it describes is n = Σ steps steps of T' = 1/sample_rate per epoch.
  σ and the sample rate must stay the same at every step (one certified run).
- **The sampler.** The accountant must see the batches it certifies; it never prints a Balls-and-Bins
  ε for batches that were not Balls-and-Bins. Created by name, it reads the data loader Opacus hands
  to ``make_private`` (or ``make_private_with_epsilon``, whose calibration asks it for ε) when Opacus
  attaches its step hook (:func:`loader_evidence`):
  Opacus's Poisson loader (``poisson_sampling=True``, the default: a ``DPDataLoader`` with a
  ``UniformWithReplacementSampler``) gets Poisson accounting at q = 1/len(loader); a loader over an
  :class:`epscert.BatchSampler` binds the accountant to it (its kind and epochs); any other loader (a
  shuffling or sequential torch ``DataLoader``) is refused when ε is asked, with the reason (its batches
  are neither; use an ``epscert.BatchSampler``, or name the batches with ``sampler=``). ``sampler=``
  names the batches of an unbound accountant explicitly; it is refused where the loader contradicts it
  (Poisson batches named otherwise; torch's shuffling or sequential batches named anything but
  ``deterministic``, the one sampler whose ε bounds them), and warned about where epscert cannot read the
  loader (a custom batch sampler). With no loader in sight (``.history`` set by hand, ``step()`` called
  from a custom loop) the accountant takes the batches to be Balls-and-Bins with T' steps per epoch and
  fresh bins each epoch, and says so with an :class:`UnverifiedSamplerWarning` at every answer.
  :meth:`EpscertAccountant.bind` (done by :func:`make_private`) ties it to an
  :class:`epscert.BatchSampler`: the sampler's kind and epochs are used, the sample rate is checked
  against its T (a loader over all epochs, rate 1/(T·E), is refused), and no step may use a batch
  the sampler has not handed out.
- **The certificate** after n steps is :meth:`epscert.Accountant.get_epsilon` with ``steps_done=n``
  for (σ, T', E): mid-epoch values from the prefix bracket (:mod:`epscert.inverse.prefix`), the same
  number ``epscert.Accountant`` gives for the same run and step count.
- **Swapped in after make_private.** Opacus attaches the step hook of ``engine.accountant`` during
  ``make_private``; an accountant assigned afterwards receives no steps. It never answers 0 for a
  run that trained: with no step recorded, ``get_epsilon`` refuses unless its own hook is attached
  (then no step has been taken) or its bound sampler has handed out no batch. :meth:`attach` hooks it.
- **Gradient accumulation.** k batches in one optimizer step are one release of their union with
  one noise draw: for Balls-and-Bins (and shuffling, deterministic batches) that is the same sampler
  with T/k merged steps per epoch, certified as such when k divides T and every step takes k
  batches. Anything else is refused (k not dividing T, k changing, Poisson batches, whose union
  can hold a record several times). Opacus's BatchMemoryManager splits a batch without accumulating
  (one step per batch, k = 1).
- **Prefetching.** A DataLoader with workers asks for batches ahead of training. The accountant
  counts optimizer steps, never the sampler's position; bound, it also tells the sampler how many
  batches were trained (``released``), so a new iteration or a checkpoint resumes at the first
  untrained batch rather than skipping the prefetched ones (the steps taken stay the first steps of
  the run, the prefix the certificate covers). Unbound, epscert's loader refuses to resume an
  iteration that a prefetching loader abandoned mid-epoch.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

from epscert.accountant import Accountant
from epscert.batching.indices import BatchIndexSampler, EpochView
from epscert.inverse.epsilon_at_delta import analytic_epsilon_rows
from epscert.integrations.torch import data_loader as epscert_data_loader
from epscert.config import CertifyConfig, Method, Sampler, check_float, parse_sampler, show

MECHANISM = "epscert"
#: A sample rate within this relative distance of k/T (or 1/T) counts as that fraction.
RATE_TOLERANCE = 1e-9
#: T assumed to check the Accountant's keyword arguments before T is known (any T >= 2 would do).
_CHECK_STEPS = 1000


class SamplingMismatchWarning(UserWarning):
    """Opacus's Poisson ε is printed for a run whose batches were not Poisson."""


class UnverifiedSamplerWarning(UserWarning):
    """An EpscertAccountant answered without seeing the loader: its ε assumes the batches it names."""


#: Opacus's entry points whose ``data_loader`` (and ``poisson_sampling``) the accountant reads.
OPACUS_ENTRY_POINTS = ("make_private", "make_private_with_epsilon")
#: Frames searched above the accountant for one of them (Opacus calls the hook factory directly from
#: make_private; its calibration reaches get_epsilon through get_noise_multiplier: a few frames).
EVIDENCE_DEPTH = 12


def loader_evidence(depth: int = EVIDENCE_DEPTH) -> tuple[str, Any] | None:
    """What the batches of the Opacus call that is running are, read from its ``data_loader``.

    Looks up the call stack (at most ``depth`` frames) for Opacus's ``PrivacyEngine.make_private`` or
    ``make_private_with_epsilon`` and classifies its loader: ``("poisson", loader)`` for Opacus's Poisson
    loader (``poisson_sampling=True``, a ``DPDataLoader`` or a ``UniformWithReplacementSampler``),
    ``("epscert", batch_sampler)`` for a loader over an :class:`epscert.BatchSampler`, ``("torch", loader)`` for
    torch's shuffling or sequential batches, ``("other", loader)`` for any other loader; None when no such
    call is running (the caller is not Opacus).
    """
    import sys

    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return None
        code, module = frame.f_code, frame.f_globals.get("__name__", "")
        if code.co_name in OPACUS_ENTRY_POINTS and module.startswith("opacus."):
            loader = frame.f_locals.get("data_loader")
            if loader is None:
                return None
            return classify_loader(loader, bool(frame.f_locals.get("poisson_sampling", False)))
        frame = frame.f_back
    return None


def classify_loader(loader: Any, poisson_sampling: bool = False) -> tuple[str, Any]:
    """('poisson' | 'epscert' | 'torch' | 'other', what) for a torch DataLoader (see :func:`loader_evidence`)."""
    from opacus.data_loader import DPDataLoader
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    batch_sampler = getattr(loader, "batch_sampler", None)
    if poisson_sampling or isinstance(loader, DPDataLoader) or isinstance(batch_sampler, UniformWithReplacementSampler):
        return "poisson", loader
    if isinstance(batch_sampler, EpochView):  # epscert.integrations.torch.data_loader: one epoch per iteration
        batch_sampler = batch_sampler.sampler
    if isinstance(batch_sampler, BatchIndexSampler):
        return "epscert", batch_sampler
    from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

    if type(batch_sampler) is BatchSampler and type(getattr(loader, "sampler", None)) in (RandomSampler,
                                                                                         SequentialSampler):
        return "torch", loader  # torch's own shuffling or sequential batches: neither Balls-and-Bins nor Poisson
    return "other", loader


def describe_loader(loader: Any) -> str:
    """'DataLoader(sampler=RandomSampler, batch_size=8)' for refusals."""
    sampler = getattr(loader, "sampler", None)
    return (f"{type(loader).__name__}(sampler={type(sampler).__name__}, "
            f"batch_size={getattr(loader, 'batch_size', None)})")


def __getattr__(name: str) -> Any:
    if name == "EpscertAccountant":
        return accountant_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> type:
    """Registers ``EpscertAccountant`` in Opacus's accountant registry as ``"epscert"`` (idempotent).

    Then ``opacus.PrivacyEngine(accountant="epscert")`` creates one, and Opacus's own
    ``make_private_with_epsilon`` can calibrate σ with it (it sets ``.history`` and asks for ε).
    Refuses if the name is taken by another accountant. Returns the class.
    """
    from opacus.accountants import registry

    cls = accountant_class()
    try:
        registry.register_accountant(MECHANISM, cls)
    except ValueError:
        if not isinstance(registry.create_accountant(MECHANISM), cls):
            raise ValueError(f"the Opacus accountant name {MECHANISM!r} is registered for another class, "
                             f"got {type(registry.create_accountant(MECHANISM)).__name__}") from None
    return cls


@functools.lru_cache(maxsize=1)
def accountant_class() -> type:
    """``EpscertAccountant``, a subclass of ``opacus.accountants.IAccountant`` (built once, lazily)."""
    from opacus.accountants.accountant import IAccountant

    class EpscertAccountant(IAccountant):
        """Opacus accountant certifying the steps taken with the batches it sees (module docstring).

        ``EpscertAccountant()`` (what ``PrivacyEngine(accountant="epscert")`` creates) takes σ and T
        from the steps and the batches from Opacus's loader; ``EpscertAccountant(batch_sampler,
        noise_multiplier)`` is bound to an :class:`epscert.BatchSampler` from the start. ``sampler`` names
        the batches of an unbound accountant (None: read from the loader, Balls-and-Bins with a warning
        where no loader is seen). Further keyword arguments (method, samples,
        error_prob, seed) go to :class:`epscert.Accountant`. ``last_certificate`` is the
        :class:`~epscert.inverse.best.Certificate` behind the last ε returned. See the module
        docstring for what is certified and refused.
        """

        def __init__(self, batch_sampler: BatchIndexSampler | None = None, noise_multiplier: float | None = None,
                     *, sampler: str | None = None, **accountant_kwargs):
            self.history: list = []  # Opacus's (noise_multiplier, sample_rate, steps) records
            self.batch_sampler: BatchIndexSampler | None = None
            self.sampler = parse_sampler("balls_and_bins" if sampler is None else sampler)
            # where the sampler comes from: 'explicit' (sampler=), 'bound' (bind), 'loader' (an epscert loader seen
            # by a calibration), 'opacus_poisson' (Opacus's Poisson loader seen), 'other_loader' (a loader that
            # is neither: refused), 'named_unverified' (sampler= with a loader epscert cannot read: warned),
            # 'assumed' (none seen: warned)
            self.sampler_source = "assumed" if sampler is None else "explicit"
            self.loader_description: str | None = None
            self.noise_multiplier = None if noise_multiplier is None else check_float(
                "noise_multiplier", noise_multiplier, low=0.0, low_open=True)
            self.accountant_kwargs = dict(accountant_kwargs)
            self.hook_rate: float | None = None  # base sample rate of this accountant's attached step hook
            self.last_certificate = None
            self._answers: dict[tuple, tuple[float, Any]] = {}
            self._accountants: dict[tuple, Accountant] = {}
            if batch_sampler is not None:
                self.bind(batch_sampler)
            # the Accountant's arguments are checked before any training (T is a placeholder if unbound)
            steps = self.batch_sampler.steps_per_epoch if self.batch_sampler is not None else _CHECK_STEPS
            Accountant(noise_multiplier=self.noise_multiplier or 1.0, steps=steps, epochs=1,
                       sampler=self.sampler.value, **self.accountant_kwargs)

        # -- binding and hooks -------------------------------------------------------------------
        def bind(self, batch_sampler: BatchIndexSampler) -> None:
            """Ties the accountant to the sampler whose batches are trained (module docstring)."""
            if not isinstance(batch_sampler, BatchIndexSampler):
                raise ValueError(f"batch_sampler must be an epscert.BatchSampler, got batch_sampler={show(batch_sampler)}")
            old = self.batch_sampler, self.sampler, self.sampler_source
            self.batch_sampler, self.sampler, self.sampler_source = batch_sampler, batch_sampler.sampler, "bound"
            try:
                steps = self._check_history()[2]  # the steps so far must fit this sampler's run
            except ValueError:
                self.batch_sampler, self.sampler, self.sampler_source = old
                raise
            # batches trained so far: k per step recorded (a fresh run: where the sampler stands)
            batch_sampler.released = steps * self._merged()[0] if steps else batch_sampler.resume_position()
            self._answers.clear()

        def see_loader(self, evidence: tuple[str, Any] | None, bind: bool = True) -> None:
            """Take the batches from Opacus's loader (:func:`loader_evidence`; None: nothing seen).

            ``bind=False`` (Opacus's calibration asking a throw-away accountant for ε): an epscert loader's
            sampler kind is adopted without binding, so the sampler's position is left untouched.
            """
            if evidence is None or self.batch_sampler is not None:
                return
            kind, what = evidence
            if kind == "epscert" and not bind:
                self.sampler, self.sampler_source = what.sampler, "loader"
                self._answers.clear()
            elif kind == "epscert":
                self.bind(what)
            elif kind == "poisson":
                if self.sampler_source == "explicit" and self.sampler is not Sampler.POISSON:
                    raise ValueError(f"the data loader's batches are Poisson (Opacus's DPDataLoader, "
                                     f"poisson_sampling=True), but this accountant was created with "
                                     f"sampler={self.sampler.value!r}: pass poisson_sampling=False with an "
                                     f"epscert.BatchSampler loader, or sampler='poisson'")
                self.sampler, self.sampler_source = Sampler.POISSON, "opacus_poisson"
                self._answers.clear()
            elif kind == "torch" and self.sampler_source == "explicit" and self.sampler is not Sampler.DETERMINISTIC:
                # shuffled batches are a mixture of fixed assignments, so only the deterministic sampler's ε
                # bounds them (joint convexity); any other name would print an ε that need not hold
                raise ValueError(f"the data loader's batches are torch's {describe_loader(what)} (shuffled or "
                                 f"in order, poisson_sampling=False), but this accountant was created with "
                                 f"sampler={self.sampler.value!r}, whose ε does not hold for them: use an "
                                 "epscert.BatchSampler loader, Opacus's Poisson loader, or sampler='deterministic' "
                                 "(an upper bound for shuffled batches)")
            elif kind == "other" and self.sampler_source == "explicit":
                self.sampler_source, self.loader_description = "named_unverified", describe_loader(what)
                self._answers.clear()
            elif self.sampler_source != "explicit":
                self.sampler_source, self.loader_description = "other_loader", describe_loader(what)
                self._answers.clear()

        def get_optimizer_hook_fn(self, sample_rate: float):
            """The step hook Opacus attaches in ``make_private`` (``sample_rate`` = 1/len(loader))."""
            rate = check_float("sample_rate", sample_rate, low=0.0, low_open=True, high=1.0, high_open=False)
            self.see_loader(loader_evidence())
            if self.batch_sampler is not None:
                self._steps_per_release(rate)  # a loader over all epochs is refused here, before training
            self.hook_rate = rate

            def hook_fn(optim) -> None:
                self.step(noise_multiplier=optim.noise_multiplier, sample_rate=rate * optim.accumulated_iterations)

            return hook_fn

        def attach(self, optimizer, sample_rate: float | None = None) -> None:
            """Hooks this accountant to an Opacus ``DPOptimizer`` (replacing the hook it had).

            ``sample_rate``: 1/len(loader); default 1/T of the bound sampler.
            """
            bs = self.batch_sampler
            if bs is not None and bs.position > (bs.released or 0):
                raise ValueError(f"the sampler has handed out {bs.position} batches and this accountant counted "
                                 f"{bs.released or 0}: steps were taken without it, and counting from here would "
                                 f"leave them out; attach it before training, got position={bs.position}")
            if sample_rate is None:
                if self.batch_sampler is None:
                    raise ValueError("sample_rate is needed for an unbound accountant (1/len(loader)), "
                                     "got sample_rate=None")
                sample_rate = 1.0 / self.batch_sampler.steps_per_epoch
            optimizer.attach_step_hook(self.get_optimizer_hook_fn(sample_rate))

        # -- the steps ---------------------------------------------------------------------------
        def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
            sigma = check_float("noise_multiplier", noise_multiplier, low=0.0, low_open=True)
            rate = check_float("sample_rate", sample_rate, low=0.0, low_open=True, high=1.0, high_open=False)
            if self.noise_multiplier is not None and not math.isclose(sigma, self.noise_multiplier, rel_tol=1e-12):
                raise ValueError(f"noise_multiplier must stay {self.noise_multiplier} for this accountant (one "
                                 f"certified run), got noise_multiplier={noise_multiplier}")
            if self.history and not math.isclose(rate, self.history[-1][1], rel_tol=RATE_TOLERANCE):
                raise ValueError(f"sample_rate must stay {self.history[-1][1]} (the same batches, and the same "
                                 f"gradient accumulation, at every step), got sample_rate={sample_rate}")
            merged, steps = self._steps_per_release(rate)
            bs = self.batch_sampler
            if bs is not None:
                done = len(self)
                if done >= steps * bs.epochs:
                    raise ValueError(f"steps must be <= {steps * bs.epochs} for {bs!r}: the run has no more "
                                     f"certified batches, got step {done + 1}")
                released = (bs.released or 0) + merged
                if released > bs.position:
                    raise ValueError(f"step {done + 1} takes batches up to {released}, but the sampler has handed "
                                     f"out {bs.position}: the optimizer's loader is not over this sampler, "
                                     f"got position={bs.position}")
                bs.released = released
            self.noise_multiplier = sigma
            if self.history and self.history[-1][:2] == (sigma, rate):
                self.history[-1] = (sigma, rate, self.history[-1][2] + 1)
            else:
                self.history.append((sigma, rate, 1))

        def _steps_per_release(self, rate: float) -> tuple[int, int]:
            """(k batches per step, T' = steps per epoch of the releases) for a sample rate."""
            bs = self.batch_sampler
            if bs is None:
                T = round(1.0 / rate)
                if T < 1 or abs(1.0 / rate - T) > RATE_TOLERANCE * T:
                    raise ValueError(f"sample_rate must be 1/T for an integer T (T steps per epoch, or T·k/k with "
                                     f"k accumulated batches per step), got sample_rate={rate}")
                return 1, T
            T = bs.steps_per_epoch
            k = round(rate * T)
            if k < 1 or abs(rate * T - k) > RATE_TOLERANCE * max(1.0, rate * T):
                raise ValueError(f"sample_rate must be k/T with T={T} steps per epoch of {bs!r} and k >= 1 batches "
                                 f"per optimizer step, got sample_rate={rate} (1/{1.0 / rate:.6g}); Opacus reads "
                                 f"1/len(loader), and a loader over all epochs has len T·E: use "
                                 f"epscert.integrations.torch.data_loader (one epoch per iteration) or make_private")
            if k > 1 and (T % k or bs.sampler.base is Sampler.POISSON):
                why = (f"k={k} must divide T={T}, so that the merged batches are the T/k steps of an epoch"
                       if T % k else "Poisson batches merged by accumulation can hold a record several times")
                raise ValueError(f"gradient accumulation of {k} batches per step is not certified: {why}; "
                                 f"got sample_rate={rate}")
            return k, T // k

        def _merged(self) -> tuple[int, int]:
            return self._steps_per_release(self.history[0][1])

        def _check_history(self) -> tuple[float | None, float | None, int]:
            """(σ, sample rate, steps) of the history: one σ and one rate (Opacus may set it directly)."""
            if not self.history:
                return self.noise_multiplier, None, 0
            sigmas = [float(h[0]) for h in self.history]
            rates = [float(h[1]) for h in self.history]
            if any(not math.isclose(x, sigmas[0], rel_tol=1e-12) for x in sigmas) or any(
                    not math.isclose(x, rates[0], rel_tol=RATE_TOLERANCE) for x in rates):
                raise ValueError(f"history must hold one noise_multiplier and one sample_rate (one certified run), "
                                 f"got history={self.history}")
            steps = sum(int(h[2]) for h in self.history)
            self._steps_per_release(rates[0])
            bs = self.batch_sampler
            if bs is not None and steps > self._merged()[1] * bs.epochs:
                raise ValueError(f"history has {steps} steps, more than the {self._merged()[1] * bs.epochs} of "
                                 f"{bs!r}, got history={self.history}")
            return sigmas[0], rates[0], steps

        def __len__(self) -> int:
            return sum(int(h[2]) for h in self.history)

        # -- the certificate ---------------------------------------------------------------------
        def epscert_accountant(self) -> Accountant:
            """The :class:`epscert.Accountant` of the run the steps belong to (module docstring)."""
            sigma, rate, steps = self._check_history()
            if steps == 0:
                raise ValueError("no step has been recorded: the run is not known yet, got len(accountant)=0")
            _, per_epoch = self._merged()
            epochs = self.batch_sampler.epochs if self.batch_sampler is not None else -(-steps // per_epoch)
            key = (sigma, per_epoch, epochs, self.sampler)
            if key not in self._accountants:
                self._accountants[key] = Accountant(noise_multiplier=sigma, steps=per_epoch, epochs=epochs,
                                                    sampler=self.sampler.value, **self.accountant_kwargs)
            return self._accountants[key]

        def get_epsilon(self, delta: float, *args, **kwargs) -> float:
            """Certified ε(δ) for the steps taken so far (module docstring)."""
            steps = len(self)
            if steps == 0:
                bs = self.batch_sampler
                if self.hook_rate is None and (bs is None or bs.position > 0):
                    handed = f"the sampler has handed out {bs.position} batches but " if bs is not None else ""
                    raise ValueError(
                        f"{handed}no optimizer step has reached this accountant and no step hook of it is attached: "
                        "Opacus attaches the hook of engine.accountant during make_private, so an accountant "
                        "assigned afterwards counts nothing. Assign it before make_private, use "
                        "epscert.integrations.opacus.make_private, or call accountant.attach(optimizer); "
                        "got len(accountant)=0")
                return 0.0
            if self.sampler_source == "assumed":
                self.see_loader(loader_evidence(), bind=False)  # Opacus's calibration: get_noise_multiplier
            if self.sampler_source == "other_loader":
                raise ValueError(
                    f"the data loader's batches are neither Balls-and-Bins nor Poisson, got "
                    f"{self.loader_description} (poisson_sampling=False): epscert certifies the batches of an "
                    "epscert.BatchSampler (epscert.integrations.torch.data_loader) or Opacus's Poisson loader "
                    "(poisson_sampling=True); name other batches with EpscertAccountant(sampler=...)")
            if self.sampler_source == "named_unverified":
                warnings.warn(
                    f"the data loader {self.loader_description} is not one epscert can read; the ε assumes the "
                    f"{self.sampler.value} batches this accountant was created with (sampler=...)",
                    UnverifiedSamplerWarning, stacklevel=2)
            if self.sampler_source == "assumed":
                warnings.warn(
                    f"this epscert accountant has seen no data loader (Opacus's make_private attaches it to one); "
                    f"the ε assumes {self.sampler.value} batches with {self._merged()[1]} steps per epoch. Bind it to "
                    "the epscert.BatchSampler that makes the batches, or name them with sampler=...",
                    UnverifiedSamplerWarning, stacklevel=2)
            sigma, rate, _ = self._check_history()
            key = (sigma, rate, steps, float(delta), self.sampler)  # Opacus's calibration sets .history per σ
            if key not in self._answers:
                accountant = self.epscert_accountant()
                self._answers[key] = (accountant.get_epsilon(delta, steps_done=steps), accountant.last_certificate)
            eps, self.last_certificate = self._answers[key]
            return eps

        @classmethod
        def mechanism(cls) -> str:
            return MECHANISM

        def state_dict(self, destination=None):
            out = super().state_dict(destination)
            out["noise_multiplier"] = self.noise_multiplier
            out["sampler"] = self.sampler.value
            if self.batch_sampler is not None:
                out["batch_sampler"] = self.batch_sampler.state_dict()
            return out

        def load_state_dict(self, state_dict) -> None:
            bs = self.batch_sampler
            if bs is not None:
                mine = bs.state_dict()
                theirs = dict(state_dict.get("batch_sampler") or {})
                if dict(theirs, position=mine["position"]) != mine:
                    raise ValueError(f"state_dict['batch_sampler'] must describe this run {mine}, got {theirs}")
            sigma = state_dict.get("noise_multiplier")
            if self.noise_multiplier is not None and sigma != self.noise_multiplier:
                raise ValueError(f"noise_multiplier must be {self.noise_multiplier}, got noise_multiplier={sigma}")
            if bs is None and state_dict.get("sampler", self.sampler.value) != self.sampler.value:
                raise ValueError(f"sampler must be {self.sampler.value!r}, got sampler={state_dict.get('sampler')!r}")
            old = self.history, self.noise_multiplier
            super().load_state_dict(state_dict)
            self.noise_multiplier = sigma
            try:
                self._check_history()
            except ValueError:
                self.history, self.noise_multiplier = old
                raise
            self._answers.clear()
            if bs is not None:
                bs.load_state_dict(theirs)
                bs.released = bs.position

    return EpscertAccountant


def make_private(privacy_engine: Any, *, module: Any, optimizer: Any, dataset: Any,
                 batch_sampler: BatchIndexSampler, noise_multiplier: float, max_grad_norm: float,
                 accountant_kwargs: dict | None = None, loader_kwargs: dict | None = None, **kwargs: Any):
    """``privacy_engine.make_private`` with epscert's batches and a bound accountant.

    Installs an ``EpscertAccountant`` bound to ``batch_sampler`` on the engine *before* Opacus
    attaches its step hook, builds the empty-safe loader over ``batch_sampler`` (one epoch per
    iteration; ``loader_kwargs`` such as num_workers go to the DataLoader), calls Opacus with
    ``poisson_sampling=False`` and sets the optimizer's expected batch size to the sampler's n/T
    (Opacus rounds it down to an integer). Returns what Opacus returns ((module, optimizer,
    data_loader), or with the criterion for ghost clipping).
    """
    if kwargs.get("poisson_sampling", False):
        raise ValueError("poisson_sampling must be False: the batches come from batch_sampler, "
                         "got poisson_sampling=True")
    kwargs["poisson_sampling"] = False
    privacy_engine.accountant = accountant_class()(batch_sampler, noise_multiplier, **(accountant_kwargs or {}))
    loader = epscert_data_loader(dataset, batch_sampler, **(loader_kwargs or {}))
    out = privacy_engine.make_private(module=module, optimizer=optimizer, data_loader=loader,
                                      noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, **kwargs)
    out[1].expected_batch_size = batch_sampler.expected_batch_size / batch_sampler.world_size
    return out


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
    """Guard against the known trap: Opacus's Poisson ε printed for batches that are not Poisson.

    If the engine's accountant is Opacus's own and the loader is over an :class:`epscert.BatchSampler`,
    warns (:class:`SamplingMismatchWarning`): Opacus's Poisson ε is not the ε of those batches. If the
    loader is not Opacus's Poisson loader but a shuffling one (``poisson_sampling=False`` with ``shuffle=True``), warns loudly
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
    kind, what = classify_loader(data_loader)
    if kind == "epscert":  # epscert's batches (Balls-and-Bins, shuffle, ...) under Opacus's Poisson accountant
        out["mismatch"] = True
        warnings.warn(
            f"Opacus reports ε={opacus_eps:.4g} at δ={delta:g} for Poisson sampling, but the batches come from "
            f"{what!r}: that ε does not apply to this run (it can be smaller than the right one). Use "
            f"PrivacyEngine(accountant='epscert') or epscert.integrations.opacus.make_private for a certificate "
            f"that matches the batches.", SamplingMismatchWarning, stacklevel=2)
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
