"""Helpers of the matrix-mechanism checks (issue 23, item 4)."""

from __future__ import annotations

import math

#: Standard errors allowed between an estimate and an independent value: a false failure needs a
#: 4.5σ deviation of a mean, two-sided probability 6.8e-6 per check (CLT approximation).
Z_CLT = 4.5


def rows_by(table, **match) -> list[dict]:
    """The rows of an epscert table whose columns equal ``match``."""
    return [r for r in table.to_pylist() if all(r[k] == v for k, v in match.items())]


def row(table, **match) -> dict:
    found = rows_by(table, **match)
    assert len(found) == 1, (match, len(found))
    return found[0]


def within_clt(estimate: float, se: float, lower: float, upper: float, z: float = Z_CLT) -> bool:
    """The estimate ± z standard errors meets [lower, upper]."""
    return lower - z * se <= estimate <= upper + z * se


def agree(a: float, se_a: float, b: float, se_b: float, z: float = Z_CLT) -> bool:
    """Two independent estimates differ by at most z standard errors of their difference."""
    return abs(a - b) <= z * math.hypot(se_a, se_b)
