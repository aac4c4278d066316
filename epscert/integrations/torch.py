"""A PyTorch ``DataLoader`` over an :class:`epscert.BatchSampler` that keeps empty batches (extra ``[torch]``).

Balls-and-Bins and Poisson batches can be empty. Skipping one changes the mechanism, so the loader's
collate turns an empty batch into zero-length tensors of the dataset's shapes and dtypes, as Opacus's
own Poisson loader does, and the optimizer still takes its noisy step.

The loader serves one epoch per iteration (:class:`epscert.batching.indices.EpochView`), so
``len(loader)`` is T and the usual loop ``for epoch in range(E): for batch in loader`` runs the E
epochs of the sampler, each with its own draw. Opacus reads its sample rate as 1/len(loader) = 1/T,
which for Balls-and-Bins is the probability that a record is in a given step's batch.
"""

from __future__ import annotations

from typing import Any

from epscert.batching.indices import BatchIndexSampler, EpochView


class EmptySafeCollate:
    """Default collation; an empty batch becomes zero-length tensors shaped like ``example``."""

    def __init__(self, example: Any) -> None:
        import torch

        def spec(item):
            tensor = torch.as_tensor(item)
            return tuple(tensor.shape), tensor.dtype

        self.is_tuple = isinstance(example, (tuple, list))
        self.specs = [spec(x) for x in example] if self.is_tuple else [spec(example)]

    def __call__(self, batch: list) -> Any:
        import torch
        from torch.utils.data import default_collate

        if len(batch) > 0:
            return default_collate(batch)
        empty = [torch.zeros((0, *shape), dtype=dtype) for shape, dtype in self.specs]
        return empty if self.is_tuple else empty[0]


def data_loader(dataset: Any, batch_sampler: BatchIndexSampler, **kwargs: Any):
    """A ``torch.utils.data.DataLoader`` over one epoch of ``batch_sampler`` per iteration, empty-safe.

    ``len(dataset)`` must equal ``batch_sampler.dataset_size``. Other keyword arguments (num_workers,
    pin_memory, ...) go to the DataLoader; ``collate_fn`` defaults to :class:`EmptySafeCollate`.
    With workers (which prefetch), an iteration stopped before its epoch's end is not resumed
    unless the steps taken are counted (:class:`~epscert.batching.indices.EpochView`).
    """
    from torch.utils.data import DataLoader

    if not isinstance(batch_sampler, BatchIndexSampler):
        raise ValueError(f"batch_sampler must be an epscert.BatchSampler, got batch_sampler={batch_sampler!r}")
    if len(dataset) != batch_sampler.dataset_size:
        raise ValueError(f"len(dataset) must equal batch_sampler.dataset_size={batch_sampler.dataset_size}, "
                         f"got len(dataset)={len(dataset)}")
    kwargs.setdefault("collate_fn", EmptySafeCollate(dataset[0]))
    view = EpochView(batch_sampler, prefetch=int(kwargs.get("num_workers", 0) or 0) > 0)
    return DataLoader(dataset, batch_sampler=view, **kwargs)
