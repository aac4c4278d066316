"""Beam PTransforms, DoFns and CombineFns around the epscert core (thin: the maths is in epscert)."""

from transforms.certify import CertifyConfigs, expected_row_count, sort_rows
from transforms.progress import ProgressReporter
from transforms.shards import MergeAccumulatorsFn, RunShardFn
from transforms.sinks import AssembleResults, WritePartFn, WriteResults

__all__ = [
    "AssembleResults", "CertifyConfigs", "MergeAccumulatorsFn", "ProgressReporter", "RunShardFn",
    "WritePartFn", "WriteResults", "expected_row_count", "sort_rows",
]
