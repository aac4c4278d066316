"""Hypothesis fuzzing of ``epscert.certify`` with small work sizes.

Every request either returns a valid table or raises a *clear* ValueError (one that names a
field and its value, ``field=value``). Never another exception, never a NaN, never a numpy
RuntimeWarning (overflow, invalid value, divide by zero): those are turned into errors.
"""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import epscert

SAMPLERS = ("balls_and_bins", "poisson", "deterministic", "shuffle", "shuffle_persistent")
MC_METHODS = ("naive", "importance", "order_stats", "importance_order_stats", "auto")
ANALYTIC = ("exact", "pld_upper", "pld_lower", "rdp_upper", "cube_lower_bound")
#: Float tolerance for delta <= delta_upper and delta_lower <= delta.
ORDER_TOL = 1e-12

SUPPORTED = {
    "balls_and_bins": ("naive", "importance", "order_stats", "importance_order_stats", "auto", "cube_lower_bound"),
    "deterministic": ("naive", "importance", "auto", "exact"),
    "poisson": ("naive", "auto", "pld_upper", "pld_lower", "rdp_upper"),
    "shuffle": ("naive", "auto", "cube_lower_bound"),
    "shuffle_persistent": ("naive", "auto", "cube_lower_bound"),
}
ORDER_METHODS = ("order_stats", "importance_order_stats")

sigma = st.one_of(st.floats(0.05, 60.0), st.sampled_from([0.05, 0.1, 0.5, 1.0, 5.0, 50.0]))
epsilon = st.one_of(st.floats(0.0, 60.0), st.sampled_from([0.0, 1e-12, 50.0, 1e3]))
orders_text = st.one_of(
    st.builds(lambda stop, step: f"1,{stop},{step}", st.integers(2, 40), st.integers(1, 5)),
    st.builds(lambda a, b: f"1,{a},1,{a},{a + b},2", st.integers(2, 20), st.integers(1, 20)),
)
#: One field at a time is replaced by one of these (about one request in four).
INVALID = {
    "sigma": [0.0, -1.0, math.nan, math.inf, 1e-300, "1"],
    "steps": [0, -1, 2.5],
    "epochs": [0, 1.5],
    "epsilons": [[], [-1e-9], [0.5, math.nan], [math.inf]],
    "samples": [0, -1],
    "error_prob": [0.0, 1.0, -0.5, math.nan],
    "direction": ["up"],
    "orders": ["", "0,3,1", "2,5,1", "1,3,1,2,4,1", "1,3", "a,b,c", "1,9,1"],
    "method": ["exact", "pld_upper", "cube_lower_bound", "importance", "order_stats", "nope"],
    "sampler": ["urn"],
    "shards": [0, 10**6],
}


@st.composite
def requests(draw) -> dict:
    """Mostly valid requests (sampler-compatible methods, small work), sometimes one bad field."""
    sampler = draw(st.sampled_from(SAMPLERS))
    methods = draw(st.lists(st.sampled_from(SUPPORTED[sampler]), min_size=1, max_size=3, unique=True))
    order_only = set(methods) <= set(ORDER_METHODS) or (
        sampler == "balls_and_bins" and set(methods) <= {"auto", *ORDER_METHODS})
    analytic = any(m in ANALYTIC for m in methods)
    steps = draw(st.sampled_from([2, 3, 2000, 10**6]) if order_only else st.integers(1, 8))
    if any(m in ORDER_METHODS for m in methods) and steps == 1:
        steps = 2
    single_epoch = any(m in ("importance", "importance_order_stats") for m in methods)
    epochs = 1 if single_epoch else draw(st.integers(1, 3) if analytic else st.sampled_from([1, 2, 3, 20]))
    wants_orders = any(m in ORDER_METHODS for m in methods) and steps <= 50 and draw(st.booleans())
    request = dict(
        sampler=sampler, method=methods[0] if len(methods) == 1 else methods,
        sigma=draw(sigma), steps=steps, epochs=epochs,
        epsilons=draw(st.lists(epsilon, min_size=1, max_size=4)),
        samples=draw(st.integers(1, 200)),
        error_prob=draw(st.one_of(st.floats(1e-12, 0.5), st.sampled_from([1e-300, 0.999]))),
        seed=draw(st.integers(0, 2**40)),
        direction=draw(st.sampled_from(["remove", "add", "both"])),
        orders=draw(orders_text) if wants_orders else None,
        shards=draw(st.integers(1, 3)),
        pld_discretization=draw(st.sampled_from([0.01, 0.05, 0.1])),  # keeps dp_accounting fast
    )
    if draw(st.integers(0, 3)) == 3:
        field = draw(st.sampled_from(sorted(INVALID)))
        request[field] = draw(st.sampled_from(INVALID[field]))
        if field == "steps" or (field == "method" and request["steps"] > 8):
            request["steps"] = min(request["steps"], 8) if field == "method" else request["steps"]
    if request["shards"] > request["samples"] and request["shards"] != 10**6:
        request["shards"] = 1
    return request


def check_table(table, request: dict) -> None:
    rows = table.to_pylist()
    assert rows, "an accepted request must give rows"
    for row in rows:
        where = f"{row['method']}/{row['direction']}/ε={row['epsilon']}"
        for key in ("delta", "delta_upper", "delta_lower", "std_error", "scale", "error_prob", "epsilon"):
            value = row[key]
            assert value is None or not math.isnan(value), f"{where}: {key} is NaN"
        delta, upper, lower = row["delta"], row["delta_upper"], row["delta_lower"]
        assert 0.0 <= delta <= 1.0, f"{where}: delta={delta}"
        if upper is not None:
            assert 0.0 <= upper <= 1.0, f"{where}: delta_upper={upper}"
            assert delta <= upper + ORDER_TOL, f"{where}: delta={delta} > delta_upper={upper}"
        if lower is not None:
            assert 0.0 <= lower <= delta + ORDER_TOL, f"{where}: delta_lower={lower} > delta={delta}"
        if row["std_error"] is not None:
            assert row["std_error"] >= 0.0
            assert math.isfinite(row["std_error"]) or row["samples"] < 2, f"{where}: std_error={row['std_error']}"
        if row["samples"] is not None:  # Monte Carlo row
            assert row["samples"] == request["samples"]
            assert 0.0 < row["error_prob"] < 1.0
            assert upper is not None and row["scale"] is not None and 0.0 <= row["scale"] <= 1.0
    wanted = {"both": {"remove", "add", "both"}}.get(request["direction"], {request["direction"]})
    for row in rows:  # rdp_upper and exact bound both directions at once: always 'both' rows
        allowed = {"both"} if row["method"] in ("rdp_upper", "exact") else wanted
        assert row["direction"] in allowed, (row["method"], row["direction"], request["direction"])


def run_request(request: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            table = epscert.certify(**request)
        except ValueError as exc:
            message = str(exc)
            assert "=" in message, f"unclear ValueError (names no field=value): {message!r} for {request}"
            return
    check_table(table, request)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(request=requests())
def test_fuzz_certify(request):
    # derandomize=True: the same examples every run (no flaky CI); the seed of each request is drawn.
    run_request(request)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(request=requests())
def test_fuzz_certify_long(request):
    run_request(request)
