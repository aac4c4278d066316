"""A PyTorch ``DataLoader`` over an :class:`epscert.BatchSampler` that keeps empty batches (extra ``[torch]``).

Balls-and-Bins and Poisson batches can be empty. Skipping one changes the mechanism, so the loader's
collate turns an empty batch into zero-length tensors of the dataset's shapes and dtypes, as Opacus's
own Poisson loader does, and the optimizer still takes its noisy step.
"""

from __future__ import annotations

from typing import Any

from epscert.batching.indices import BatchIndexSampler


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
    """``torch.utils.data.DataLoader(dataset, batch_sampler=batch_sampler)`` with empty-safe collation.

    ``len(dataset)`` must equal ``batch_sampler.dataset_size``. Other keyword arguments (num_workers,
    pin_memory, ...) go to the DataLoader; ``collate_fn`` defaults to :class:`EmptySafeCollate`.
    """
    from torch.utils.data import DataLoader

    if not isinstance(batch_sampler, BatchIndexSampler):
        raise ValueError(f"batch_sampler must be an epscert.BatchSampler, got batch_sampler={batch_sampler!r}")
    if len(dataset) != batch_sampler.dataset_size:
        raise ValueError(f"len(dataset) must equal batch_sampler.dataset_size={batch_sampler.dataset_size}, "
                         f"got len(dataset)={len(dataset)}")
    kwargs.setdefault("collate_fn", EmptySafeCollate(dataset[0]))
    return DataLoader(dataset, batch_sampler=batch_sampler, **kwargs)
