"""Batch indices for a training loop, one law per sampler that epscert certifies (SPEC §1).

A dataset of n records, batch size b, T = n // b steps per epoch (as in sweep specs; or T given as
``steps_per_epoch`` with T·b <= n), E epochs:

- ``balls_and_bins``: every record is thrown into one of the T batches uniformly at random,
  independently of the others, afresh in each epoch. Batch sizes are Multinomial(n; 1/T, ..., 1/T).
- ``balls_and_bins_persistent``: one such assignment, drawn once and reused by every epoch.
- ``shuffle``: a uniformly random permutation, cut into T consecutive batches of b records,
  reshuffled each epoch (the n - T·b records at the end of the permutation sit the epoch out).
- ``shuffle_persistent``: one permutation reused by every epoch.
- ``poisson``: every record joins every step independently with probability q = 1/T, the rate
  the accountant certifies (the expected batch size n/T is >= b). Batch sizes are Binomial(n, 1/T).
- ``deterministic``: records 0..T·b-1 in order, batch t = [t·b, (t+1)·b), the same every epoch.

Empty batches (Balls-and-Bins, Poisson) are yielded as empty arrays, never skipped: skipping one
would change the mechanism. With ``world_size`` > 1, rank r receives ``global_batch[r::world_size]``,
so the shards are disjoint and their union is the global batch. The draws depend only on
(seed, epoch) (Poisson: (seed, epoch, step)), built by :func:`epscert.rng.stream_generator`, so a
run is reproducible on any machine and a resumed run sees the same batches. Memory is O(n).

Prefetching. A DataLoader with workers asks for batches ahead of training, so ``position`` (batches
handed out) runs ahead of the steps taken. A training integration that counts the steps (the
Opacus accountant, :mod:`epscert.integrations.opacus`) sets ``released``; while it is set, a new
iteration and ``state_dict()`` resume there, so batches that were prefetched but never trained are
served again instead of skipped, and the steps taken stay the first steps of the run (the prefix
that the certificate covers). :class:`EpochView` is one epoch per iteration, for training loops
written ``for epoch ...: for batch in loader``.
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import numpy as np

from epscert.names import Sampler, parse_sampler
from epscert.checks import check_int, show
from epscert.rng import check_seed, stream_generator

#: The spawn-key word that separates batch streams from every Monte Carlo stream.
BATCHING_KEY = int.from_bytes(hashlib.sha256(b"epscert.batching").digest()[:8], "big")
#: Keys of the state dict that must match for a resume to give the same batches.
STATE_IDENTITY = ("sampler", "dataset_size", "batch_size", "steps_per_epoch", "epochs", "seed")


class BatchIndexSampler:
    """Streams int64 index arrays, one per step, for ``epochs`` epochs of ``dataset_size // batch_size``."""

    def __init__(self, sampler: str = "balls_and_bins", *, dataset_size: int, batch_size: int,
                 epochs: int = 1, seed: int = 0, rank: int = 0, world_size: int = 1,
                 steps_per_epoch: int | None = None) -> None:
        self.sampler = parse_sampler(sampler)
        self.dataset_size = check_int("dataset_size", dataset_size, 1)
        self.batch_size = check_int("batch_size", batch_size, 1)
        if self.batch_size > self.dataset_size:
            raise ValueError(f"batch_size must be <= dataset_size={self.dataset_size}, "
                             f"got batch_size={show(batch_size)}")
        self.epochs = check_int("epochs", epochs, 1)
        self.seed = check_seed(seed)
        self.world_size = check_int("world_size", world_size, 1)
        self.rank = check_int("rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(f"rank must be in [0, world_size={self.world_size}), got rank={show(rank)}")
        self.steps_per_epoch = self.dataset_size // self.batch_size
        if steps_per_epoch is not None:  # T given directly (e.g. a JAX Privacy cycle length)
            self.steps_per_epoch = check_int("steps_per_epoch", steps_per_epoch, 1)
            if self.steps_per_epoch * self.batch_size > self.dataset_size:
                raise ValueError(f"steps_per_epoch x batch_size must be <= dataset_size={self.dataset_size}, "
                                 f"got steps_per_epoch={steps_per_epoch}, batch_size={self.batch_size}")
        self.position = 0  # batches handed out so far (global step index of the next one)
        #: batches whose steps training has taken, counted by a training integration (None: not counted)
        self.released: int | None = None

    # -- the run ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.steps_per_epoch * self.epochs

    def resume_position(self) -> int:
        """Where the next iteration starts: ``released`` when counted (module docstring), else ``position``."""
        return self.position if self.released is None else self.released

    def __iter__(self) -> Iterator[np.ndarray]:
        """The batches from the resume position to the end of the run (from the start once done)."""
        self.position = self.resume_position()
        if self.position >= len(self):
            if self.released is not None:
                return  # every step of the run is taken: serving the run again would release more
            self.position = 0
        while self.position < len(self):
            epoch, step = divmod(self.position, self.steps_per_epoch)
            for batch in self.epoch_batches(epoch, first_step=step):
                self.position += 1
                yield batch

    def set_epoch(self, epoch: int) -> None:
        """Move to the first step of ``epoch`` (0-based)."""
        epoch = check_int("epoch", epoch, 0)
        if epoch >= self.epochs:
            raise ValueError(f"epoch must be in [0, epochs={self.epochs}), got epoch={epoch}")
        self.position = epoch * self.steps_per_epoch

    def state_dict(self) -> dict:
        """What a checkpoint needs to resume at the next batch (the identity is checked on load)."""
        return {"sampler": self.sampler.value, "dataset_size": self.dataset_size,
                "batch_size": self.batch_size, "steps_per_epoch": self.steps_per_epoch,
                "epochs": self.epochs, "seed": self.seed,
                "position": self.resume_position()}

    def load_state_dict(self, state: dict) -> None:
        """Resume at ``state['position']``; refuses a state of another run, naming the field."""
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict from state_dict(), got state={show(state)}")
        mine = self.state_dict()
        for key in STATE_IDENTITY:
            if state.get(key) != mine[key]:
                raise ValueError(f"state[{key!r}] must be {mine[key]!r} for this sampler, "
                                 f"got {key}={show(state.get(key))}")
        position = check_int("position", state.get("position"), 0)
        if position > len(self):
            raise ValueError(f"position must be <= {len(self)}, got position={position}")
        self.position = position
        if self.released is not None:
            self.released = position

    # -- one epoch ----------------------------------------------------------------------------
    def epoch_batches(self, epoch: int, first_step: int = 0) -> Iterator[np.ndarray]:
        """This rank's shards of the batches of ``epoch``, from ``first_step`` on."""
        for batch in self.global_batches(epoch, first_step):
            yield batch[self.rank::self.world_size]

    def global_batches(self, epoch: int, first_step: int = 0) -> Iterator[np.ndarray]:
        """The full batches of ``epoch`` (all ranks together), from ``first_step`` on."""
        T, b, n = self.steps_per_epoch, self.batch_size, self.dataset_size
        kind = self.sampler
        if kind is Sampler.POISSON:
            for step in range(first_step, T):
                rng = stream_generator(self.seed, BATCHING_KEY, epoch, step)
                size = int(rng.binomial(n, 1.0 / T))
                chosen = rng.choice(n, size=size, replace=False, shuffle=False)
                yield np.sort(chosen).astype(np.int64, copy=False)
            return
        if kind is Sampler.DETERMINISTIC:
            for step in range(first_step, T):
                yield np.arange(step * b, (step + 1) * b, dtype=np.int64)
            return
        draw_epoch = 0 if kind.is_persistent else epoch
        rng = stream_generator(self.seed, BATCHING_KEY, draw_epoch)
        if kind.base is Sampler.SHUFFLE:
            order = rng.permutation(n).astype(np.int64, copy=False)
            for step in range(first_step, T):
                yield order[step * b:(step + 1) * b]
            return
        bins = rng.integers(0, T, size=n)
        order = np.argsort(bins, kind="stable").astype(np.int64, copy=False)
        edges = np.concatenate([[0], np.cumsum(np.bincount(bins, minlength=T))])
        del bins
        for step in range(first_step, T):
            yield order[edges[step]:edges[step + 1]]

    @property
    def expected_batch_size(self) -> float:
        """E[global batch size]: n/T for Balls-and-Bins and Poisson, b for the fixed-size samplers."""
        if self.sampler.base in (Sampler.BALLS_AND_BINS, Sampler.POISSON):
            return self.dataset_size / self.steps_per_epoch
        return float(self.batch_size)

    def accountant_arguments(self) -> dict:
        """The :class:`epscert.Accountant` arguments that certify exactly this run."""
        return {"sampler": self.sampler.value, "steps": self.steps_per_epoch, "epochs": self.epochs}

    def __repr__(self) -> str:
        return (f"BatchSampler(sampler={self.sampler.value!r}, dataset_size={self.dataset_size}, "
                f"batch_size={self.batch_size}, epochs={self.epochs}, seed={self.seed}, "
                f"rank={self.rank}, world_size={self.world_size})")


class EpochView:
    """One epoch of a :class:`BatchIndexSampler` per iteration: ``len`` is T, not T·E.

    Each iteration serves the rest of the epoch at the sampler's resume position (a whole epoch
    when it starts at an epoch boundary) and advances the sampler, so ``for epoch in range(E):
    for batch in loader`` runs the E epochs of the sampler, each with its own draw. After the
    run's last step an iteration serves nothing (the run is not restarted). With ``prefetch``
    (a DataLoader with workers) an iteration abandoned before its epoch's end may have handed out
    batches that were never trained; unless ``released`` is counted (module docstring), the next
    iteration is refused rather than skipping them.
    """

    def __init__(self, sampler: BatchIndexSampler, prefetch: bool = False) -> None:
        if not isinstance(sampler, BatchIndexSampler):
            raise ValueError(f"sampler must be an epscert.BatchSampler, got sampler={show(sampler)}")
        self.sampler = sampler
        self.prefetch = bool(prefetch)
        self._open = False  # an iteration started and not run to its epoch's end

    def __len__(self) -> int:
        return self.sampler.steps_per_epoch

    def __iter__(self) -> Iterator[np.ndarray]:
        s = self.sampler
        if self._open and self.prefetch and s.released is None:
            raise ValueError(f"the previous iteration stopped at batch {s.position} before the end of its epoch, "
                             f"and a loader with workers prefetches: batches handed out but never trained would be "
                             f"skipped. Count the steps taken (bind an accountant: epscert.integrations.opacus) "
                             f"or finish each epoch, got position={s.position}")
        start = s.resume_position()
        s.position = start
        if start >= len(s):
            return
        epoch, step = divmod(start, s.steps_per_epoch)
        self._open = True
        for batch in s.epoch_batches(epoch, first_step=step):
            s.position += 1
            yield batch
        self._open = False

    def __repr__(self) -> str:
        return f"EpochView({self.sampler!r})"
