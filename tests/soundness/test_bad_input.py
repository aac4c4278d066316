"""Bad input corpus for ``epscert.certify``: every entry raises ValueError, naming the field and
the bad value, before any sampling or analytic work starts."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import epscert
import epscert.api
import epscert.results.tables
import epscert.rng
import epscert.montecarlo.shard
from .tripwires import trip_sampler_draws

NAN, INF = math.nan, math.inf
ROOT = Path(__file__).resolve().parents[2]

#: A small valid request; each corpus entry overrides some of it.
BASE = dict(sampler="balls_and_bins", sigma=1.0, steps=10, epochs=1, epsilons=[0.5, 1.0], method="naive",
            samples=100, error_prob=0.05, seed=0, direction="both")


def _entry(name, fields, value, **kwargs):
    """(id, overrides, field names of which one must appear, text of the bad value that must appear
    (or a tuple of accepted spellings))."""
    return pytest.param({**BASE, **kwargs}, fields, value, id=name)


CORPUS = [
    # σ
    _entry("sigma-zero", ("sigma",), "0", sigma=0.0),
    _entry("sigma-negative", ("sigma",), "-1.5", sigma=-1.5),
    _entry("sigma-nan", ("sigma",), "nan", sigma=NAN),
    _entry("sigma-inf", ("sigma",), "inf", sigma=INF),
    _entry("sigma-string", ("sigma",), "abc", sigma="abc"),
    _entry("sigma-none", ("sigma",), "None", sigma=None),
    _entry("sigma-bool", ("sigma",), "True", sigma=True),
    # steps / epochs / samples
    _entry("steps-zero", ("steps",), "0", steps=0),
    _entry("steps-negative", ("steps",), "-4", steps=-4),
    _entry("steps-fractional", ("steps",), "2.5", steps=2.5),
    _entry("steps-nan", ("steps",), "nan", steps=NAN),
    _entry("epochs-zero", ("epochs",), "0", epochs=0),
    _entry("epochs-fractional", ("epochs",), "1.5", epochs=1.5),
    _entry("samples-zero", ("samples",), "0", samples=0),
    _entry("samples-negative", ("samples",), "-10", samples=-10),
    _entry("samples-fractional", ("samples",), "10.5", samples=10.5),
    # ε
    _entry("epsilon-negative", ("epsilon",), "-0.1", epsilons=[0.5, -0.1]),
    _entry("epsilon-nan", ("epsilon",), "nan", epsilons=[NAN]),
    _entry("epsilon-inf", ("epsilon",), "inf", epsilons=[1.0, INF]),
    _entry("epsilons-empty", ("epsilons",), "[]", epsilons=[]),
    _entry("epsilons-string", ("epsilons",), "'1.0'", epsilons="1.0"),
    _entry("epsilons-none", ("epsilons",), "None", epsilons=None),
    # error_prob
    _entry("error-prob-zero", ("error_prob",), "0", error_prob=0.0),
    _entry("error-prob-one", ("error_prob",), "1", error_prob=1.0),
    _entry("error-prob-negative", ("error_prob",), "-0.1", error_prob=-0.1),
    _entry("error-prob-above-one", ("error_prob",), "1.5", error_prob=1.5),
    _entry("error-prob-nan", ("error_prob",), "nan", error_prob=NAN),
    # orders
    _entry("orders-unsorted", ("orders",), "1,2,1,5,8,1,3,5,1", method="order_stats", orders="1,2,1,5,8,1,3,5,1"),
    _entry("orders-duplicated", ("orders",), "1,4,1,3,6,1", method="order_stats", orders="1,4,1,3,6,1"),
    _entry("orders-not-from-1", ("orders",), "2,5,1", method="order_stats", orders="2,5,1"),
    _entry("orders-reach-T", ("orders",), "1,11,1", method="order_stats", orders="1,11,1"),
    _entry("orders-beyond-T", ("orders",), "1,50,1", method="importance_order_stats", orders="1,50,1"),
    _entry("orders-not-a-triple", ("orders",), "1,5", method="order_stats", orders="1,5"),
    _entry("orders-garbage", ("orders",), "1,x,1", method="order_stats", orders="1,x,1"),
    _entry("orders-zero-step", ("orders",), ("1,5,0", "(1, 5, 0)"), method="order_stats", orders="1,5,0"),
    _entry("orders-for-naive", ("orders",), "1,5,1", method="naive", orders="1,5,1"),
    _entry("order-stats-one-step", ("steps",), "1", method="order_stats", steps=1),
    # method / sampler / direction
    _entry("importance-multi-epoch", ("epochs",), "2", method="importance", epochs=2),
    _entry("importance-order-stats-multi-epoch", ("epochs",), "3", method="importance_order_stats", epochs=3),
    _entry("unknown-sampler", ("sampler",), "urn", sampler="urn"),
    _entry("unknown-method", ("method",), "magic", method="magic"),
    _entry("unknown-method-in-list", ("method",), "magic", method=["naive", "magic"]),
    _entry("empty-method-list", ("method",), "[]", method=[]),
    _entry("method-not-for-sampler", ("method", "sampler"), "exact", method="exact"),
    _entry("order-stats-for-poisson", ("method", "sampler"), "order_stats", sampler="poisson", method="order_stats"),
    _entry("unknown-direction", ("direction",), "sideways", direction="sideways"),
    # seed / shards
    _entry("seed-negative", ("seed",), "-1", seed=-1),
    _entry("seed-float", ("seed",), "1.5", seed=1.5),
    _entry("shards-zero", ("shards",), "0", shards=0),
    _entry("shards-above-samples", ("shards",), "200", shards=200),
    # absurd work sizes
    _entry("naive-steps-1e9", ("steps",), "1000000000", steps=10**9),
    _entry("naive-epochs-1e9", ("epochs",), "1000000000", steps=1, epochs=10**9),
    _entry("poisson-steps-times-epochs", ("steps", "epochs"), "100000000", sampler="poisson", steps=10**8,
           epochs=10),
    _entry("absurd-total-samples", ("samples",), "1000000000000000", steps=1000, samples=10**15),
    _entry("orders-far-beyond-T", ("orders",), "1,1000000,1", method="order_stats", orders="1,1000000,1"),
]


@pytest.fixture
def no_work(monkeypatch):
    """Make every sampling or analytic entry point fail loudly if it is reached."""

    def boom(*args, **kwargs):
        raise AssertionError("work started before the input was rejected")

    for module, names in ((epscert.results.tables, ("run_shard", "plan_shards", "analytic_rows", "mc_rows")),
                          (epscert.montecarlo.shard, ("run_shard", "block_generator")),
                          (epscert.rng, ("block_generator",))):
        for name in names:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, boom)
    trip_sampler_draws(monkeypatch, boom)
    monkeypatch.setattr(np.random, "Generator", boom)


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("kwargs,fields,value", CORPUS)
def test_bad_input_raises_value_error_naming_field_and_value(no_work, kwargs, fields, value):
    with pytest.raises(ValueError) as info:
        epscert.certify(**kwargs)
    message = str(info.value)
    assert any(f in message for f in fields), f"no field name {fields} in: {message}"
    values = (value,) if isinstance(value, str) else value
    assert any(v in message for v in values), f"bad value {value!r} not in: {message}"


def test_base_request_is_valid():
    table = epscert.certify(**BASE)
    assert table.num_rows == 6


_HUGE_ORDERS_SCRIPT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
import epscert
try:
    epscert.certify(sampler="balls_and_bins", sigma=1.0, steps=int(sys.argv[1]), epsilons=[0.5],
                    method="order_stats", samples=100, orders=sys.argv[2])
except ValueError as exc:
    print("ValueError:", exc)
except MemoryError:
    print("MemoryError")
"""


@pytest.mark.parametrize("steps,orders", [(10, "1,1000000000,1"),  # each a subprocess (2 s): two with the slow set
                                          pytest.param(10**10, "1,1000000000,1", marks=pytest.mark.slow),
                                          pytest.param(10**12, "1,100,1,100,1000000000000,1", marks=pytest.mark.slow)])
def test_huge_orders_are_refused_without_expanding_them(steps, orders):
    """Orders are checked against T and against the per-sample memory limit before the ranks
    are materialised: a typo like stop=10**9 must be a ValueError, not minutes of work and an
    out-of-memory kill. Run in a subprocess capped at 2 GiB of address space."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run([sys.executable, "-c", _HUGE_ORDERS_SCRIPT, str(steps), orders], env=env,
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"orders={orders!r} with steps={steps} still running after 60 s")
    out = done.stdout + done.stderr
    assert out.startswith("ValueError:") and "orders" in out, out[-2000:]
