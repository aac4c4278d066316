"""Local sinks for people: a results table on stdout, or one JSON object per row.

The table shows the reported rows (direction 'both', the max over the two directions, where a
method has it); JSON lines and the Parquet file have every row.
"""

from __future__ import annotations

import decimal
import json
import math
import sys
from typing import Iterable, TextIO

from epscert.inverse.best import outward_text

#: Columns of the human-readable table (the Parquet file has them all).
TABLE_COLUMNS = ("sampler", "sigma", "steps", "epochs", "method", "direction", "epsilon", "delta_lower", "delta", "delta_upper",
                 "std_error", "samples", "guarantee")
#: Columns shown beside them for a matrix mechanism (its steps are the cycle length, its epochs the cycles).
MATRIX_COLUMNS = ("strategy", "iterations")
FORMATS = ("table", "json")
#: Table order of the directions: the reported 'both' first, then its parts.
DIRECTION_ORDER = {"both": 0, "remove": 1, "add": 2}
#: Columns that hold a bound, and its side (True: an upper bound, False: a lower one). Their cells are rounded away
#: from the side they bound (:func:`~epscert.inverse.best.outward_text`), so a printed upper bound is never below the
#: certified one and a printed lower bound never above it; the other numbers (estimates, settings) to the nearest.
BOUND_COLUMNS = {"delta_upper": True, "delta_lower": False}
#: Significant digits of a table cell.
DIGITS = 6


def _cell(value: object, up: bool | None = None) -> str:
    """One table cell: '-' for None; a float to :data:`DIGITS` significant digits, rounded up (``up`` True), down
    (False) or to the nearest (None)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if up is not None:
            return bound_text(value, up, DIGITS, 1e-4)
        return f"{value:.6g}" if value == 0 or 1e-4 <= abs(value) < 1e6 else f"{value:.4e}"
    return str(value)


def bound_text(value: float, up: bool, digits: int, small: float) -> str:
    """:func:`~epscert.inverse.best.outward_text` (``digits`` significant digits, rounded away from the side the value
    bounds), written in scientific notation with a two-digit exponent (as Python writes it) where 0 < |value| <
    ``small`` or |value| >= 10^6, like the table's other cells. Only the notation changes: the digits are the outward
    ones, read back exactly by :class:`decimal.Decimal`."""
    text = outward_text(value, up=up, digits=digits)
    if not math.isfinite(value) or value == 0 or small <= abs(value) < 1e6:
        return text
    # the text has at most ``digits`` significant digits, so this notation rounds nothing
    mantissa, _, exponent = f"{decimal.Decimal(text):.{digits - 1}e}".partition("e")
    return f"{mantissa}e{int(exponent):+03d}"


def display_order(rows: Iterable[dict], main_ids: set[str]) -> list[dict]:
    """Rows grouped for comparison: per direction and ε, the certified rows before the baselines."""
    return sorted(rows, key=lambda r: (DIRECTION_ORDER.get(r["direction"], len(DIRECTION_ORDER)), r["epsilon"],
                                       r["config_id"] not in main_ids, r["sampler"], r["method"]))


def reported_rows(rows: Iterable[dict]) -> list[dict]:
    """Per (configuration, method): only the 'both' rows where there are any (the reported max)."""
    rows = list(rows)
    with_both = {(r["config_id"], r["method"]) for r in rows if r["direction"] == "both"}
    return [r for r in rows if r["direction"] == "both" or (r["config_id"], r["method"]) not in with_both]


def table_columns(rows: list[dict]) -> tuple[str, ...]:
    """:data:`TABLE_COLUMNS`, with :data:`MATRIX_COLUMNS` after the sampler when a row is a matrix mechanism."""
    if not any(row.get("strategy") for row in rows):
        return TABLE_COLUMNS
    at = TABLE_COLUMNS.index("sampler") + 1
    return TABLE_COLUMNS[:at] + MATRIX_COLUMNS + TABLE_COLUMNS[at:]


def print_table(rows: list[dict], stream: TextIO) -> None:
    """A fixed-width table of :func:`table_columns`, one line per row."""
    columns = table_columns(rows)
    cells = [[_cell(row.get(c), BOUND_COLUMNS.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), file=stream)
    print("  ".join("-" * w for w in widths), file=stream)
    for line in cells:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip(), file=stream)


def _json_value(value: object) -> object:
    """JSON has no inf or NaN: those floats are written as the strings 'inf', '-inf', 'nan'."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def print_json(rows: Iterable[dict], stream: TextIO) -> None:
    """One JSON object per row (every column of the results schema), in file order; strict JSON."""
    for row in rows:
        print(json.dumps({k: _json_value(v) for k, v in row.items()}, allow_nan=False), file=stream)


def upper_mean_note(rows: Iterable[dict]) -> str | None:
    """The line that says what ``delta`` is on order-statistic rows (None when there are none): the mean of
    raised values, an upper bound's mean, biased upward by construction, never an estimate of δ
    (``epscert.config.Method.mean_is_unbiased``)."""
    from epscert.config import Method  # the numerical core's names (ground floor)

    known = {m.value for m in Method}
    names = sorted(name for name in {r["method"] for r in rows}  # each method once, not once per row
                   if name in known and Method(name).is_monte_carlo and not Method(name).mean_is_unbiased)
    if not names:
        return None
    return (f"epscert: on {', '.join(names)} rows, delta is the mean of raised (order-statistic) values: an upper "
            "bound's mean, biased upward, not an estimate of δ; delta_upper is the certificate, and naive, "
            "importance or conditional give an unbiased estimate with a lower bound (delta_lower)")


#: Rows turned into dicts at a time when a table is printed as JSON lines (memory stays one batch's).
JSON_BATCH_ROWS = 4096


def reported_table(table):
    """:func:`reported_rows` on an Arrow table, in columns (a dense grid's per-direction rows never become dicts)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    both = pc.fill_null(pc.equal(table.column("direction"), "both"), False)
    key = pc.binary_join_element_wise(table.column("config_id"), table.column("method"), "\x00")
    with_both = pc.unique(pc.filter(key, both))
    keep = pc.or_(both, pc.invert(pc.is_in(key, value_set=with_both)))
    return table.filter(keep)


def print_table_file(table, fmt: str, stream: TextIO, main_ids: set[str] | None = None) -> None:
    """:func:`print_rows` of a results table read from its file, without a dict per row it does not print:
    the table format turns only the reported rows into dicts, JSON lines go out batch by batch."""
    if fmt == "json":
        for batch in table.to_batches(max_chunksize=JSON_BATCH_ROWS):
            print_json(batch.to_pylist(), stream)
    elif fmt == "table":
        shown = reported_table(table)
        print_table(display_order(shown.to_pylist(), main_ids or set()), stream)
        if shown.num_rows < table.num_rows:
            print(f"epscert: {table.num_rows - shown.num_rows} per-direction rows not shown (they are in the Parquet "
                  "file and in --format json)", file=sys.stderr)
        note = upper_mean_note({"method": m} for m in table.column("method").unique().to_pylist())
        if note:
            print(note, file=sys.stderr)
    else:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got format={fmt!r}")


def print_rows(rows: list[dict], fmt: str, stream: TextIO, main_ids: set[str] | None = None) -> None:
    if fmt == "json":
        print_json(rows, stream)
    elif fmt == "table":
        shown = reported_rows(rows)
        print_table(display_order(shown, main_ids or set()), stream)
        if len(shown) < len(rows):
            print(f"epscert: {len(rows) - len(shown)} per-direction rows not shown (they are in the Parquet "
                  "file and in --format json)", file=sys.stderr)
        note = upper_mean_note(rows)
        if note:
            print(note, file=sys.stderr)
    else:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got format={fmt!r}")
