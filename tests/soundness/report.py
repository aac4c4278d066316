"""Rows of the coverage table, collected while the coverage tests run (see conftest.py)."""

from __future__ import annotations

ROWS: list[dict] = []

_COLUMNS = ("estimator", "direction", "point", "target", "misses/N", "allowed", "max|z|", "mean z", "sd z",
            "mean z bounds", "sd z bounds")


def add(**row) -> None:
    ROWS.append(row)


def markdown() -> str:
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for row in ROWS:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in _COLUMNS) + " |")
    return "\n".join(lines) + "\n"
