"""Result tables on disk: atomic single files, per-configuration parts, and their assembly.

Every file is written whole under a temporary name and renamed into place (``os.replace``
locally, Beam's FileSystems elsewhere), so a reader sees either no file or a complete one.
Rows are sorted by (config_id, method, direction, epsilon) before writing, so the Parquet
bytes depend only on the rows (``wall_seconds`` aside).
"""

from __future__ import annotations

import os
import uuid
from typing import Iterable, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from epscert.config import CertifyConfig
from epscert.schema import RESULTS_SCHEMA, to_table
from transforms.certify import as_table, expected_row_count, pack_rows, sort_rows, sort_table
from transforms.shards import NAMESPACE

RESULTS_NAME = "results"
PARTS_DIR = "parts"
PART_SUFFIX = ".parquet"


def is_local(path: str) -> bool:
    """True for a plain filesystem path (no ``scheme://``)."""
    return FileSystems.get_scheme(path) is None


def join(base: str, *names: str) -> str:
    """Path join; URIs (gs://, s3://, hdfs://...) always use '/'."""
    return os.path.join(base, *names) if is_local(base) else "/".join([base.rstrip("/"), *names])


def table_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table.combine_chunks(), sink)
    return sink.getvalue().to_pybytes()


def rows_table(rows: Iterable[dict]) -> pa.Table:
    """Sorted rows as a table in :data:`epscert.schema.RESULTS_SCHEMA`."""
    return to_table(sort_rows(rows))


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary sibling and a rename (all or nothing)."""
    if is_local(path):
        directory, name = os.path.split(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    directory, name = path.rsplit("/", 1)
    tmp = f"{directory}/.{name}.tmp-{uuid.uuid4().hex}"
    with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write(data)
    FileSystems.rename([tmp], [path])


def read_table(path: str) -> pa.Table:
    if is_local(path):
        return pq.read_table(path)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return pq.read_table(pa.BufferReader(handle.read()))


def exists(path: str) -> bool:
    return os.path.exists(path) if is_local(path) else FileSystems.exists(path)


def write_rows(rows: Iterable[dict], path: str) -> int:
    """Write rows (sorted) as one Parquet file, atomically; returns the row count."""
    table = rows_table(rows)
    write_atomic(path, table_bytes(table))
    return table.num_rows


def write_row_sets(sets: Iterable[tuple[str, object]], path: str) -> int:
    """Write (config_id, packed rows) sets (:func:`transforms.certify.pack_rows`) as one Parquet file, sorted
    (:func:`transforms.certify.sort_table`) and atomic; returns the row count. The rows stay in columns
    from the packing to the file (issue 35 item 5: no dict per row on the way)."""
    tables = [as_table(rows) for _, rows in sets]
    table = sort_table(pa.concat_tables(tables)) if tables else RESULTS_SCHEMA.empty_table()
    write_atomic(path, table_bytes(table))
    return table.num_rows


# -- per-configuration parts (sweeps) -----------------------------------------------------------

def part_path(output_dir: str, config_id: str) -> str:
    return join(output_dir, PARTS_DIR, config_id + PART_SUFFIX)


def read_part(output_dir: str, config: CertifyConfig) -> pa.Table | None:
    """The stored rows of ``config`` if its part is present and complete, else None.

    Complete means: results schema, every row of this configuration, the expected row
    count and the configuration's resolved methods. A part that fails any check (or does
    not parse) counts as missing and is recomputed.
    """
    path = part_path(output_dir, config.config_id)
    if not exists(path):
        return None
    try:
        table = read_table(path)
    except (pa.ArrowInvalid, OSError):
        return None
    if not table.schema.equals(RESULTS_SCHEMA) or table.num_rows != expected_row_count(config):
        return None
    if set(table.column("config_id").to_pylist()) != {config.config_id}:
        return None
    if set(table.column("method").to_pylist()) != {m.value for m in config.resolved}:
        return None
    return table


@beam.typehints.with_input_types(tuple[str, list[dict]])
@beam.typehints.with_output_types(str)
class WritePartFn(beam.DoFn):
    """Writes one configuration's rows to ``DIR/parts/<config_id>.parquet`` (atomic); emits the id."""

    def __init__(self, output_dir: str) -> None:
        self._output_dir = output_dir

    def setup(self) -> None:
        self._parts_written = Metrics.counter(NAMESPACE, "parts_written")

    def process(self, item: tuple[str, list[dict]]):
        config_id, rows = item
        write_atomic(part_path(self._output_dir, config_id), table_bytes(rows_table(rows)))
        self._parts_written.inc()
        yield config_id


def results_paths(output_dir: str, shards: int = 1) -> list[str]:
    """``DIR/results.parquet``, or ``DIR/results-0000i-of-0000n.parquet`` for ``shards > 1``."""
    if shards == 1:
        return [join(output_dir, RESULTS_NAME + PART_SUFFIX)]
    return [join(output_dir, f"{RESULTS_NAME}-{i:05d}-of-{shards:05d}{PART_SUFFIX}") for i in range(shards)]


def assemble_chunk(index: int, output_dir: str, configs: Sequence[CertifyConfig], shards: int) -> int:
    """Write results file ``index`` of ``shards`` from the parts of its slice of ``configs``.

    ``configs`` are split into ``shards`` contiguous runs in config_id order, so the files
    concatenated in order are sorted. Returns the row count written.
    """
    ordered = sorted(configs, key=lambda c: c.config_id)
    base, extra = divmod(len(ordered), shards)
    start = index * base + min(index, extra)
    chunk = ordered[start:start + base + (1 if index < extra else 0)]
    tables = []
    for config in chunk:
        table = read_part(output_dir, config)
        if table is None:
            raise RuntimeError(f"part of configuration {config.config_id} is missing or incomplete "
                               f"in {join(output_dir, PARTS_DIR)}")
        tables.append(table)
    # Each part is sorted and config ids are distinct: concatenating in id order keeps the sort.
    table = pa.concat_tables(tables) if tables else RESULTS_SCHEMA.empty_table()
    write_atomic(results_paths(output_dir, shards)[index], table_bytes(table))
    return table.num_rows


class AssembleResults(beam.PTransform):
    """After every part is written, assemble ``DIR/results.parquet`` (or ``shards`` files).

    The input (the ids of the parts this run wrote) only orders the step after the writes;
    the assembly reads the parts of all ``configs``, including those of earlier runs.
    """

    def __init__(self, output_dir: str, configs: Sequence[CertifyConfig], shards: int = 1,
                 label: str | None = None) -> None:
        super().__init__(label)
        self._output_dir = output_dir
        self._configs = list(configs)
        self._shards = shards

    def expand(self, written):
        shards = self._shards
        return (
            written
            | "CountWritten" >> beam.combiners.Count.Globally()
            | "ResultFiles" >> beam.FlatMap(lambda _: range(shards))
            | "SpreadResultFiles" >> beam.Reshuffle()
            | "WriteResultFiles" >> beam.Map(assemble_chunk, self._output_dir, self._configs, shards)
        )


class WriteResults(beam.PTransform):
    """PCollection[(config_id, rows)] -> one Parquet file at ``path`` (sorted, atomic)."""

    def __init__(self, path: str, label: str | None = None) -> None:
        super().__init__(label)
        self._path = path

    def expand(self, row_sets):
        path = self._path
        return (
            row_sets
            | "PackRowSets" >> beam.Map(pack_rows)  # one object per row set for the runner's state cache
            | "CollectRows" >> beam.combiners.ToList()
            | "WriteParquet" >> beam.Map(write_row_sets, path)
        )
