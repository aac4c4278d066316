"""Batch index generators, one per certified sampler (numpy only); see :mod:`.indices`."""

from epscert.batching.indices import BatchIndexSampler

__all__ = ["BatchIndexSampler"]
