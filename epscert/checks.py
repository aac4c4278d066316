"""Checks of user values for error messages, and order-statistic rank lists: the ground floor, beside
:mod:`epscert.names` (:mod:`epscert.config` re-exports both for the floors above it).

Every check raises ``ValueError`` naming the field and the value as typed (bounded by :func:`show`).
"""

from __future__ import annotations

import math
import reprlib
from typing import Iterable, Sequence

import numpy as np

#: At most this many order-statistic ranks (R ~ 150 is typical; more is a typo, not a plan).
MAX_RANKS = 1_000_000


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 3, 6, 6, 80, 80


def show(value: object) -> str:
    """A bounded repr for error messages (a user value may be huge or deeply nested)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    return _REPR.repr(value)


def check_int(name: str, value: object, minimum: int) -> int:
    """An integer >= minimum; integral floats are accepted, fractions and bools are not."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {name}={show(value)}")
    if isinstance(value, (int, np.integer)):
        out = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        out = int(value)
    else:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {name}={show(value)}")
    if out < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {name}={show(value)}")
    return out


def check_float(name: str, value: object, *, low: float, low_open: bool,
                high: float = math.inf, high_open: bool = True) -> float:
    """A finite float in the given interval, else ValueError naming the field.

    Text must be ASCII: Python's float() also reads full-width and other Unicode digits, which
    a user never means to type as a number.
    """
    if isinstance(value, str) and not value.isascii():
        raise ValueError(f"{name} must be a number written in ASCII digits, got {name}={show(value)}")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number, got {name}={show(value)}") from None
    if isinstance(value, bool) or not math.isfinite(out):
        raise ValueError(f"{name} must be a finite number, got {name}={show(value)}")
    if out == 0.0 and underflows(value):
        raise ValueError(f"{name}={show(value)} underflows to 0 in double precision (the smallest positive "
                         f"double is about 5e-324); {name} must be in {'(' if low_open else '['}{low}, {high}"
                         f"{')' if high_open else ']'}")
    bad_low = out <= low if low_open else out < low
    bad_high = out >= high if high_open else out > high
    if bad_low or bad_high:
        lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}, got {name}={show(value)}")
    return out


def underflows(text: object) -> bool:
    """Whether ``text`` is a number written with a nonzero digit that float() turns into 0 ('1e-400')."""
    if not isinstance(text, str):
        return False
    mantissa = text.strip().lower().split("e", 1)[0]
    return any(c in "123456789" for c in mantissa)


def parse_orders(orders: object, max_rank: int | None = None) -> tuple[int, ...]:
    """Expand (start, stop, step) triples into ranks, e.g. "1,100,1,100,500,10".

    Accepts a comma-separated string, a flat sequence of ints (length a multiple of
    3) or a sequence of 3-tuples. The union of ``arange(start, stop, step)`` is
    returned in the given order; validation (increasing, starts at 1, below T)
    happens in :class:`CertifyConfig`.
    """
    if isinstance(orders, str):
        parts = [p.strip() for p in orders.split(",") if p.strip()]
        try:
            flat = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"orders must be integers 'start,stop,step,...', got orders={show(orders)}") from None
    elif isinstance(orders, Iterable):
        flat = []
        for item in orders:  # type: ignore[union-attr]
            if isinstance(item, (tuple, list)):
                flat.extend(item)
            else:
                flat.append(item)
        flat = [check_int("orders", v, -(2**62)) for v in flat]
    else:
        raise ValueError(f"orders must be (start, stop, step) triples, got orders={show(orders)}")
    if not flat or len(flat) % 3:
        raise ValueError(f"orders must be a non-empty list of (start, stop, step) triples, got orders={show(orders)}")
    ranks: list[int] = []
    for start, stop, step in zip(flat[0::3], flat[1::3], flat[2::3]):
        if step < 1 or stop <= start:
            raise ValueError(
                f"orders triple must have stop > start and step >= 1, got orders=({start}, {stop}, {step})"
            )
        last = start + ((stop - 1 - start) // step) * step
        count = len(ranks) + len(range(start, stop, step))
        if count > MAX_RANKS:
            raise ValueError(f"orders expands to {count} ranks, more than the limit {MAX_RANKS} "
                             f"(orders={show(orders)})")
        if max_rank is not None and last > max_rank:  # refuse before expanding a huge range
            raise ValueError(f"orders must be <= steps - 1 = {max_rank}, got largest order={last} "
                             f"(orders={show(orders)})")
        ranks.extend(range(start, stop, step))
    return tuple(ranks)


def default_orders(steps: int) -> tuple[int, ...]:
    """Ranks used when order statistics are requested without ``orders``.

    All ranks 1..T-1 when T <= 151 (the bound is then exact); otherwise ranks
    1..100 and 50 geometrically spaced ranks up to T-1 (about 150 ranks, the
    R the benchmarks use).
    """
    if steps - 1 <= 150:
        return tuple(range(1, steps))
    head = list(range(1, 101))
    tail = np.unique(np.round(np.geomspace(101, steps - 1, 50)).astype(np.int64))
    return tuple(head + [int(v) for v in tail if v > 100])


def compress_orders(ranks: Sequence[int]) -> str:
    """Inverse of :func:`parse_orders`: ranks as 'start,stop,step' triples of constant step."""
    out: list[str] = []
    i = 0
    while i < len(ranks):
        if i + 1 == len(ranks):
            out.append(f"{ranks[i]},{ranks[i] + 1},1")
            break
        step = ranks[i + 1] - ranks[i]
        j = i + 1
        while j + 1 < len(ranks) and ranks[j + 1] - ranks[j] == step:
            j += 1
        out.append(f"{ranks[i]},{ranks[j] + 1},{step}")
        i = j + 1
    return ",".join(out)
