"""Sweep specifications: a YAML or JSON file of grids, expanded into validated configurations.

Example (YAML; JSON with the same keys works too)::

    sampler: [balls_and_bins, poisson]
    sigma: [0.5, 0.7, 1.0]
    steps: [100, 1000]            # or: dataset_size: 60000 and batch_size: [64, 256]
    method: auto
    samples: 100000
    epsilons: [1, 2, 4, 8]        # the epsilon grid every configuration gets
    seed: 0

Grid keys take one value or a non-empty list; the sweep is their Cartesian product:
``sampler, sigma, steps, dataset_size, batch_size, max_batch_size, epochs, method, samples, orders,
error_prob, direction, backend`` (numpy, jax or auto, as ``--backend``), and the matrix-mechanism
keys ``mechanism, c_col, strategy_matrix, iterations, cycle_length`` (below). Single-valued keys: ``epsilons`` (required), ``seed``, ``shards`` ('auto' or an
integer), ``pld_discretization``, ``baselines`` (true adds each configuration's analytic
baselines as configurations of their own). Keys left out take the defaults of ``epscert certify``
(sampler balls_and_bins, method auto, samples 100000, error_prob 0.01, seed 0, shards auto...).
``method: auto`` (or no ``method``) runs, per configuration, the certified candidate that
``epscert epsilon`` answers with (:func:`epscert.inverse.best.auto_methods`), with the other side
of its bracket: ``bracket_upper`` and ``bracket_lower`` for Balls-and-Bins in the bracket's range
(σ >= 0.05, T <= 10^6, E <= 1000), ``pld_upper`` and ``pld_lower`` for Poisson,
``exact`` for deterministic; Monte Carlo ``auto`` where none applies (Balls-and-Bins outside the
range, shuffling). The rows' ``method`` says which it was. Configurations are keyed by what
changes their rows: an analytic configuration ignores samples, error_prob, seed, backend and
orders (one computation for ``backend: [auto, numpy]``).

Steps rule: give ``steps`` (T, steps per epoch), or both ``dataset_size`` n and ``batch_size`` b,
and then T = n // b: the number of full batches in one epoch (a last, partial batch is dropped,
as with ``drop_last=True``); b > n is refused. n and b stay in the configuration and on its rows
(``dataset_size``, ``batch_size`` columns): pairs (n, b) giving the same T are separate configurations
with the same samples, hence the same numbers. ``max_batch_size`` B (with ``dataset_size`` n) asks for
truncated batches (SPEC §9): n and B then go into the configuration, and T comes from ``steps``
or from ``batch_size`` as above.

Matrix mechanism (DP-FTRL / BandMF, :mod:`epscert.config.mechanism`)::

    sigma: [3, 4]
    c_col: [1.0, 0.5, 0.25]        # one strategy; [[1.0, 0.5], [1.0, 0.5, 0.25]] is a grid of two,
                                   # and a string is numbers '1,0.5' or a .npy/.txt file
    iterations: 2000               # n (a grid too)
    cycle_length: [50, 100]        # b, in place of steps
    epsilons: [2, 4, 8]

``strategy_matrix`` (a path, or a list of paths, to dense ``.npy`` matrices) replaces ``c_col``; a
strategy implies the sampler ``balls_and_bins_persistent`` and the method ``auto`` (tilted);
``baselines: true`` adds its deterministic bounds. c_col files are read when the spec is expanded;
dense matrices are referenced by path and SHA-256, so workers need the same file at the same path.
Relative paths are relative to the working directory.

Every configuration of the product is validated (``CertifyConfig``) before any pipeline starts;
one invalid combination (say importance sampling with epochs > 1) refuses the whole sweep.
Files are parsed with ``yaml.safe_load`` or ``json.loads`` only.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import os
from typing import Any, Mapping

import yaml
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from epscert.inverse.best import auto_methods
from epscert.config import mechanism
from epscert.config.mechanism import mechanism_settings, read_c_col, strategy_from
from epscert.results.baselines import baseline_tasks
from epscert.results.cost import check_pld_memory
from epscert.config import DEFAULT_ERROR_PROB, DEFAULT_SAMPLES, CertifyConfig, Method, show, steps_per_epoch
from pipelines.certify import with_shards
from pipelines.flags import SYNONYMS
from pipelines.options import UsageError
from transforms.sinks import is_local

#: Keys whose value may be a list of alternatives, in product order.
GRID_KEYS = ("sampler", "sigma", "steps", "dataset_size", "batch_size", "max_batch_size", "epochs", "method",
             "samples", "orders", "error_prob", "direction", "backend") + (
             "mechanism", "c_col", "strategy_matrix", "iterations", "cycle_length")
#: The matrix-mechanism keys (epscert.config.mechanism): turned into a strategy and a cycle length per combination.
STRATEGY_KEYS = ("mechanism", "c_col", "strategy_matrix", "iterations", "cycle_length")
#: Keys with exactly one value.
SINGLE_KEYS = ("epsilons", "seed", "shards", "pld_discretization", "baselines")
REQUIRED_KEYS = ("sigma", "epsilons")
#: Sampler of a spec without a ``sampler`` key (as in ``epscert certify``).
DEFAULT_SAMPLER = mechanism.DEFAULT_SAMPLER.value
#: Refuse products larger than this before expanding them.
MAX_CONFIGS = 100_000


class SpecError(UsageError):
    """A sweep specification that cannot run; the message names the key and the value."""


#: Bounded reprs in messages: YAML aliases can make a small file expand to gigabytes.
_show = show


def read_text(path: str) -> str:
    try:
        if is_local(path):
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            return handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read sweep spec {_show(path)}: {err}") from None


def load_spec(path: str) -> dict:
    """Parse a spec file: JSON for ``*.json``, YAML (safe loader) otherwise."""
    text = read_text(path)
    is_json = os.path.splitext(path)[1].lower() == ".json"
    try:
        spec = json.loads(text) if is_json else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, RecursionError, OverflowError) as err:
        # beyond syntax errors, the safe loaders raise these for impossible dates, bad !!int /
        # !!float / !!timestamp scalars, over-long int literals and deep nesting
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise SpecError(f"sweep spec {_show(path)} is not valid {'JSON' if is_json else 'YAML'}: {first}") from None
    if not isinstance(spec, dict):
        raise SpecError(f"sweep spec {_show(path)} must be a mapping of keys to values, got {type(spec).__name__}")
    return spec


def _scalar(key: str, value: Any, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SpecError(f"sweep spec: {key} values must be numbers or names, got {key}={_show(value)}")
    return value


def _c_col_grid(value: Any) -> list:
    """c_col values: one (a list of numbers, or a string of numbers or a file) or a list of those.

    Each is read and validated here (files once), and becomes a tuple of floats."""
    if isinstance(value, list) and value and all(isinstance(v, (list, str)) for v in value):
        values = value
    elif isinstance(value, (list, str)):
        values = [value]
    else:
        raise SpecError(f"sweep spec: c_col must be a list of numbers, a string (numbers or a .npy/.txt file) or "
                        f"a list of those, got c_col={_show(value)}")
    out = []
    for v in values:
        if isinstance(v, list) and any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
            raise SpecError(f"sweep spec: c_col lists must hold numbers only, got c_col={_show(v)}")
        try:
            out.append(tuple(read_c_col(v).tolist()))
        except ValueError as err:
            raise SpecError(f"sweep spec: {err}") from None
    return out


def _grid(key: str, value: Any) -> list:
    if key == "c_col":
        values = _c_col_grid(value)
        if len(set(values)) < len(values):
            raise SpecError(f"sweep spec: grid 'c_col' lists the same strategy twice, got c_col={_show(value)}")
        return values
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SpecError(f"sweep spec: grid {_show(key)} is empty, got {key}=[]")
    if key == "orders":
        for v in values:
            if v is not None and not isinstance(v, str):
                raise SpecError(f"sweep spec: orders values must be strings like '1,100,1' or null, "
                                f"got orders={_show(v)}")
    else:
        values = [_scalar(key, v) for v in values]
    seen = set()
    for v in values:
        marker = (type(v).__name__, v)
        if marker in seen:
            raise SpecError(f"sweep spec: grid {_show(key)} lists {_show(v)} twice")
        seen.add(marker)
    return values


def _key_hint(key: Any, allowed: tuple[str, ...]) -> str:
    """'; did you mean sigma?' for a key meant as an allowed one: by meaning first (the flags' synonyms,
    ``noise_multiplier`` -> ``sigma``), then by spelling; '' when nothing is close."""
    if not isinstance(key, str):
        return ""
    name = key.strip().lower().replace("-", "_")
    meant = SYNONYMS.get("--" + name.replace("_", "-"), "")[2:].replace("-", "_")
    if meant not in allowed:
        close = difflib.get_close_matches(name, list(allowed), n=1, cutoff=0.75)
        meant = close[0] if close else ""
    return f" (did you mean {meant}?)" if meant else ""


def _check_keys(spec: Mapping) -> None:
    allowed = GRID_KEYS + SINGLE_KEYS
    for key in spec:
        if key not in allowed:
            raise SpecError(f"sweep spec: unknown key {_show(key)}{_key_hint(key, allowed)}; allowed keys: "
                            f"{', '.join(allowed)}")
    for key in REQUIRED_KEYS:
        if key not in spec:
            raise SpecError(f"sweep spec: missing required key {_show(key)}")
    if "steps" in spec and "cycle_length" in spec:
        raise SpecError("sweep spec: cycle_length is the steps of a matrix mechanism, give one of them, got "
                        f"steps={_show(spec['steps'])}, cycle_length={_show(spec['cycle_length'])}")
    steps_key = "cycle_length" if "cycle_length" in spec else "steps"
    has_steps, has_b = steps_key in spec, "batch_size" in spec
    has_n, has_max = "dataset_size" in spec, "max_batch_size" in spec
    if has_steps and has_b:
        raise SpecError(f"sweep spec: give either {steps_key} or dataset_size and batch_size, not both "
                        f"(got {steps_key}={_show(spec[steps_key])}, batch_size={_show(spec['batch_size'])})")
    if not has_steps and not has_b:
        raise SpecError("sweep spec: missing required key 'steps' (steps, or dataset_size and batch_size)")
    if (has_b or has_max) and not has_n:
        key = "batch_size" if has_b else "max_batch_size"
        raise SpecError(f"sweep spec: missing required key 'dataset_size' (needed by {key}={_show(spec[key])})")
    if has_n and not (has_b or has_max):
        raise SpecError(f"sweep spec: dataset_size={_show(spec['dataset_size'])} needs batch_size (to derive steps) "
                        "or max_batch_size (truncated batches)")


def _steps(n: Any, b: Any) -> int:
    for name, v in (("dataset_size", n), ("batch_size", b)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecError(f"sweep spec: {name} must be an integer >= 1, got {name}={_show(v)}")
    try:
        return steps_per_epoch(n, b)
    except ValueError as err:
        raise SpecError(f"sweep spec: {err}") from None


def _single(spec: Mapping) -> dict:
    out: dict[str, Any] = {}
    eps = spec["epsilons"]
    eps = eps if isinstance(eps, list) else [eps]
    if not eps:
        raise SpecError("sweep spec: grid 'epsilons' is empty, got epsilons=[]")
    out["epsilons"] = tuple(_scalar("epsilons", e) for e in eps)
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SpecError(f"sweep spec: seed must be one non-negative integer, got seed={_show(seed)}")
    out["seed"] = seed
    shards = spec.get("shards", "auto")
    if shards != "auto" and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise SpecError(f"sweep spec: shards must be 'auto' or an integer >= 1, got shards={_show(shards)}")
    out["shards"] = shards
    if "pld_discretization" in spec:
        out["pld_discretization"] = _scalar("pld_discretization", spec["pld_discretization"])
    baselines = spec.get("baselines", False)
    if not isinstance(baselines, bool):
        raise SpecError(f"sweep spec: baselines must be true or false, got baselines={_show(baselines)}")
    out["baselines"] = baselines
    return out


def expand(spec: Mapping, workers: int = 1) -> list[CertifyConfig]:
    """Every configuration of the spec's product (validated), then baselines; one per config_id.

    ``shards: auto`` is sized for ``workers`` workers (the rows do not depend on it)."""
    _check_keys(spec)
    grids = {key: _grid(key, spec[key]) for key in GRID_KEYS if key in spec}
    single = _single(spec)
    size = 1
    for values in grids.values():
        size *= len(values)
    if size > MAX_CONFIGS:
        raise SpecError(f"sweep spec: the product has {size} configurations, more than {MAX_CONFIGS}")
    keys = list(grids)
    configs: dict[str, CertifyConfig] = {}
    invalid: list[str] = []
    for index, combo in enumerate(itertools.product(*(grids[k] for k in keys))):
        point = dict(zip(keys, combo))
        try:
            config = _config(point, single, workers)
        except SpecError:
            raise
        except ValueError as err:
            invalid.append(f"combination {index + 1} of {size} "
                           f"({', '.join(f'{k}={_show(v)}' for k, v in point.items())}): {err}")
            continue
        configs.setdefault(config.config_id, config)
    if invalid:
        more = f" (and {len(invalid) - 1} more invalid combinations)" if len(invalid) > 1 else ""
        raise SpecError(f"sweep spec: {invalid[0]}{more}")
    if single["baselines"]:
        for config in list(configs.values()):
            for base, _ in baseline_tasks(config):
                base = keyed_by_result(base)
                configs.setdefault(base.config_id, base)
    for config in configs.values():  # dp_accounting PLDs past the memory cap: refused before any work
        try:
            check_pld_memory(config, "spec key pld_discretization")
        except ValueError as err:
            raise SpecError(f"sweep spec: {err}") from None
    return list(configs.values())


def _config(point: Mapping, single: Mapping, workers: int = 1) -> CertifyConfig:
    kwargs = dict(point)
    if "batch_size" in kwargs:  # steps from n and b; both stay in the configuration, so the rows say them
        kwargs["steps"] = _steps(kwargs["dataset_size"], kwargs["batch_size"])
    strategy = strategy_from(kwargs.pop("c_col", None), kwargs.pop("strategy_matrix", None),
                             kwargs.pop("iterations", None))
    kwargs["sampler"], kwargs["steps"] = mechanism_settings(
        strategy, sampler=kwargs.get("sampler"), steps=kwargs.get("steps"),
        cycle_length=kwargs.pop("cycle_length", None), mechanism=kwargs.pop("mechanism", None))
    kwargs["strategy"] = strategy
    method = kwargs.pop("method", "auto")
    kwargs["methods"] = (method,)
    kwargs.update(epsilons=single["epsilons"], seed=single["seed"], shards=1)
    if "pld_discretization" in single:
        kwargs["pld_discretization"] = single["pld_discretization"]
    config = CertifyConfig(**kwargs)
    if isinstance(method, str) and method.strip().lower() == "auto":
        # auto: the candidate `epscert epsilon` answers with for this (σ, T, E) (the bracket for
        # Balls-and-Bins in its range, PLD for Poisson, exact for deterministic), else Monte Carlo
        methods = auto_methods(config)
        if methods != (Method.AUTO,):
            config = dataclasses.replace(config, methods=methods, orders=None)
    return with_shards(keyed_by_result(config), single["shards"], workers)


def keyed_by_result(config: CertifyConfig) -> CertifyConfig:
    """``config`` with the fields that cannot change its rows set to their defaults (one config_id per result).

    A configuration without a Monte Carlo method draws nothing: its samples, β, seed, backend and orders
    change no number, so ``backend: [auto, numpy]`` or ``samples: [1e5, 1e6]`` must not compute (and
    store) its analytic rows twice.
    """
    if any(m.is_monte_carlo for m in config.resolved):
        return config
    return dataclasses.replace(config, samples=DEFAULT_SAMPLES, error_prob=DEFAULT_ERROR_PROB, seed=0,
                               backend="numpy", orders=None, shards=1)


def load(path: str, workers: int = 1) -> list[CertifyConfig]:
    """:func:`load_spec` then :func:`expand` (``shards: auto`` sized for ``workers``)."""
    return expand(load_spec(path), workers)
