"""Hypothesis fuzzing of the sweep spec parser (``pipelines.spec.load``: read, safe-load, expand).

Property, for every file thrown at it: ``load`` either returns a non-empty list of configurations,
each a :class:`CertifyConfig` that passes validation again and with pairwise distinct config_ids, or
raises :class:`SpecError` (the ``UsageError`` the sweep command turns into one line and exit status 2)
with a non-empty message whose length is bounded by the size of the file. Never another exception,
never more than a few seconds, never code execution, never sampling or a pipeline (parse only).

Inputs: (a) structured specs, valid ones (which must parse, into the grids' product) and mutated
ones (junk values: wrong types, negative numbers, NaN, inf, huge ints, empty lists, nested junk,
unknown keys, conflicting keys), each dumped as YAML and as JSON (the two must agree); (b) raw
text and bytes: arbitrary text, token soup of YAML syntax (tags, anchors, aliases, merge keys,
directives), mutated valid files, and alias "bombs" of bounded expansion. Inputs that reach a known
bug live in the regression tests at the end, each with a minimal reproduction.
"""

from __future__ import annotations

import dataclasses
import json
import math

import apache_beam
import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import epscert.api
import epscert.results.tables
import epscert.montecarlo.shard
from epscert.config import SUPPORTED_METHODS, CertifyConfig, Method, Sampler
from epscert.montecarlo.protocol import LossSampler
from pipelines import spec as spec_mod
from pipelines.options import UsageError
from epscert.inverse.best import auto_methods
from pipelines.spec import GRID_KEYS, SINGLE_KEYS, SpecError

#: A refusal's message may not be longer than this plus MESSAGE_PER_BYTE per byte of the file.
MESSAGE_BASE, MESSAGE_PER_BYTE = 2000, 20
#: Ints kept below this in the passing fuzz: larger ones reach known bugs (see the xfail tests).
SAFE_INT = 2**62

FUZZ = dict(deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                   HealthCheck.data_too_large, HealthCheck.filter_too_much])
#: The known-bug fuzzers only need to fail: no shrinking (shrinking 400-digit ints takes long).
FUZZ_NO_SHRINK = dict(FUZZ, phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False)

SAMPLERS = [s.value for s in Sampler]
ORDER_METHODS = tuple(m.value for m in Method if m.uses_order_stats)  # every method that needs T >= 2
#: Methods that need epochs = 1 (importance and conditional sampling, SPEC §4).
IMPORTANCE = tuple(m.value for m in Method if m.uses_importance or m.is_conditional)


class WorkStarted(BaseException):
    """Raised by the tripwires (a BaseException: no ``except ValueError`` can hide it)."""


@pytest.fixture(autouse=True)
def tripwires(monkeypatch):
    """Parsing a spec must never sample or run a pipeline."""

    def boom(*args, **kwargs):
        raise WorkStarted("a spec parse started work")

    monkeypatch.setattr(apache_beam.Pipeline, "run", boom)
    monkeypatch.setattr(epscert.montecarlo.shard, "run_shard", boom)
    monkeypatch.setattr(epscert.results.tables, "run_shard", boom)
    stack = [LossSampler]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "draw" in vars(cls):
            monkeypatch.setattr(cls, "draw", boom)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("spec-fuzz")


# ---- the property -------------------------------------------------------------------------------


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data):  # structured specs are trees: never emit anchors
        return True


def dump(spec, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(spec)  # NaN and Infinity as json.loads reads them
    return yaml.dump(spec, Dumper=_NoAliasDumper, allow_unicode=True, sort_keys=False)


def load_file(workdir, content: str | bytes, suffix: str):
    """(configs, None) or (None, SpecError) from ``spec_mod.load``; any other exception propagates."""
    path = workdir / f"spec{suffix}"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    size = path.stat().st_size
    try:
        configs, error = spec_mod.load(str(path)), None
    except SpecError as err:
        configs, error = None, err
    if error is not None:
        check_refusal(error, size)
    else:
        check_configs(configs)
    return configs, error


def check_refusal(error: SpecError, size: int, bounded: bool = True) -> None:
    assert isinstance(error, UsageError) and isinstance(error, ValueError)
    message = str(error)
    assert message.strip(), "empty SpecError message"
    if bounded:
        limit = MESSAGE_BASE + MESSAGE_PER_BYTE * size
        assert len(message) <= limit, f"message of {len(message)} characters for a file of {size} bytes"


def check_configs(configs) -> None:
    assert isinstance(configs, list) and configs, configs
    assert len(configs) <= spec_mod.MAX_CONFIGS * 8  # the product cap, times baselines
    ids = [c.config_id for c in configs]
    assert len(set(ids)) == len(ids), "duplicate config_id"
    for config in configs:
        assert isinstance(config, CertifyConfig)
        kwargs = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
        again = CertifyConfig(**kwargs)  # validation again, from the validated fields
        assert again == config and again.config_id == config.config_id
        assert config.shards >= 1 and all(math.isfinite(e) and e >= 0 for e in config.epsilons)


def outcome(configs, error):
    """What the YAML and the JSON dump of one spec must agree on: the config_ids, or the refusal.

    Both dumps are well-formed mappings, so refusals come from expand() and name no file path."""
    return ("parsed", tuple(c.config_id for c in configs)) if error is None else ("refused", str(error))


# ---- strategies: structured specs ---------------------------------------------------------------

huge_ints = st.one_of(st.integers(2**31, SAFE_INT), st.integers(-SAFE_INT, -2**31))
#: Text that survives a YAML round trip: YAML folds line breaks ('\x85' loads back as ' '), not a spec's fault.
YAML_SAFE_CHARACTERS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x85\u2028\u2029\r\n")
yaml_safe_text = st.text(YAML_SAFE_CHARACTERS, max_size=12)
scalar_junk = st.one_of(
    yaml_safe_text, st.integers(-10**6, 0), huge_ints,
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e-320]),
    st.booleans(), st.none(), st.sampled_from(["auto", "", "1,5,1", "nan", "1e400", "balls_and_bins", "urn"]),
)
nested_junk = st.recursive(scalar_junk, lambda inner: st.one_of(
    # keys survive a YAML round trip as well (the slow set's 2000 mutated specs drew a key '\x85', which YAML read
    # back as ' ': the two dumps were refused with messages that echoed different keys)
    st.lists(inner, max_size=3), st.dictionaries(st.text(YAML_SAFE_CHARACTERS, max_size=6), inner, max_size=3)),
    max_leaves=8)
#: Values with the right type but out of range, per key.
OUT_OF_RANGE = {
    "sampler": ["urn", "Poisson", "balls-and-bins", ""],
    "sigma": [0, 0.0, -1.0, 1e-300, "abc", "0"],
    "steps": [0, -3, 2.5, "10", 1e3 + 0.5],
    "dataset_size": [0, -1, 10.5, "100"],
    "batch_size": [0, -2, 3.5, 10**9],
    "max_batch_size": [0, -1, 1.5],
    "epochs": [0, -1, 1.5],
    "method": ["magic", "AUTO", "exact", "pld_upper", "cube_lower_bound", ""],
    "samples": [0, -1, 0.5, 10**15],
    "orders": ["", "0,3,1", "2,5,1", "1,3,1,2,4,1", "1,3", "a,b,c", "1,1000000000,1", "1,5,0"],
    "error_prob": [0, 1, -0.5, 1.5, "0.5x"],
    "direction": ["up", "BOTH", ""],
    "epsilons": [-1, [-0.5], "one", [1, "x"]],
    "seed": [-1, 1.5, "7", 2**128],
    "shards": [0, -1, "many", 2.5, 10**7],
    "pld_discretization": [0, -1e-4, 2.0, "fine"],
    "baselines": ["yes", 1, None],
    "backend": ["cuda", "GPU", "", 3],
    # the matrix-mechanism keys (issue 23)
    "mechanism": ["ftrl", "", 3, "dpsgd-bandmf"],
    "c_col": [[-1.0], "1,nan", "1,x", "nowhere.npy", [], [[1.0], 2.0], [1.0, "x"]],
    "strategy_matrix": ["nowhere.npy", "", "notes.txt", 3],
    "iterations": [0, -1, 2.5, "10", 10**8],
    "cycle_length": [0, -1, 2.5, "4", 10**9],
}


@st.composite
def valid_specs(draw) -> dict:
    """Specs every combination of which is valid (so ``load`` must return configurations)."""
    samplers = draw(st.lists(st.sampled_from(SAMPLERS), min_size=1, max_size=3, unique=True))
    common = set.intersection(*(set(m.value for m in SUPPORTED_METHODS[Sampler(s)]) for s in samplers))
    methods = draw(st.lists(st.sampled_from(sorted(common)), min_size=1, max_size=3, unique=True))
    order_only = samplers == ["balls_and_bins"] and set(methods) <= set(ORDER_METHODS)
    binomial = set(samplers) <= {"poisson", "balls_and_bins"}
    mode = draw(st.sampled_from(["steps", "n_b"] + (["n_b_B", "steps_n_B"] if binomial else [])))
    spec: dict = {}
    if samplers != [spec_mod.DEFAULT_SAMPLER] or draw(st.booleans()):  # left out: the default sampler
        spec["sampler"] = samplers if len(samplers) > 1 or draw(st.booleans()) else samplers[0]
    # the Balls-and-Bins PLD bracket needs σ >= 0.05 (σ/√E for the persistent sampler, E <= 3); 0.6 keeps it cheap
    bracket = {"pld_upper", "pld_lower", "bracket_upper", "bracket_lower"} & set(methods) \
        and {"balls_and_bins", "balls_and_bins_persistent"} & set(samplers)
    low = 0.6 if bracket else 0.05
    spec["sigma"] = draw(st.one_of(st.floats(low, 20.0),
                                   st.lists(st.floats(low, 20.0), min_size=1, max_size=3, unique=True)))
    min_steps = 2 if any(m in ORDER_METHODS for m in methods) or "auto" in methods else 1
    if mode in ("steps", "steps_n_B"):
        spec["steps"] = draw(st.lists(st.integers(min_steps, 30), min_size=1, max_size=3, unique=True))
        steps = spec["steps"]
    else:
        n = draw(st.integers(2 * min_steps, 400))
        spec["dataset_size"] = n
        spec["batch_size"] = draw(st.lists(st.integers(1, n // min_steps), min_size=1, max_size=3, unique=True))
        steps = [n // b for b in spec["batch_size"]]
    if mode in ("n_b_B", "steps_n_B"):
        spec.setdefault("dataset_size", draw(st.integers(50, 400)))
        spec["max_batch_size"] = draw(st.lists(st.integers(1, 400), min_size=1, max_size=2, unique=True))
    if not any(m in IMPORTANCE for m in methods) and draw(st.booleans()):
        spec["epochs"] = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2, unique=True))
    spec["method"] = methods if len(methods) > 1 or draw(st.booleans()) else methods[0]
    samples = draw(st.lists(st.integers(8, 10**6), min_size=1, max_size=2, unique=True))
    spec["samples"] = samples if len(samples) > 1 else samples[0]
    if order_only and draw(st.booleans()):
        top = min(steps) - 1
        spec["orders"] = draw(st.lists(st.one_of(
            st.none(), st.builds(lambda stop, step: f"1,{stop},{step}", st.integers(2, top + 1), st.integers(1, 3))),
            min_size=1, max_size=2, unique=True))
    for key, strategy in (("error_prob", st.floats(1e-9, 0.5)),
                          ("direction", st.sampled_from(["remove", "add", "both"]))):
        if draw(st.booleans()):
            spec[key] = draw(strategy)
    spec["epsilons"] = draw(st.one_of(st.floats(0.0, 50.0), st.lists(st.floats(0.0, 50.0), min_size=1, max_size=4)))
    if draw(st.booleans()):
        spec["seed"] = draw(st.integers(0, 2**64))
    if draw(st.booleans()):
        spec["shards"] = draw(st.one_of(st.just("auto"), st.integers(1, 8)))
    if draw(st.booleans()):
        spec["pld_discretization"] = draw(st.sampled_from([1e-4, 1e-3, 0.01, 0.1]))
    if draw(st.booleans()):
        spec["baselines"] = draw(st.booleans())
    return spec


@st.composite
def mutated_specs(draw) -> dict:
    """A valid spec with one to three things broken (or, rarely, nothing)."""
    spec = dict(draw(valid_specs()))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["out_of_range", "junk", "nested", "in_list", "empty", "drop", "unknown",
                                     "conflict", "duplicate"]))
        key = draw(st.sampled_from(GRID_KEYS + SINGLE_KEYS))
        if kind == "out_of_range":
            spec[key] = draw(st.sampled_from(OUT_OF_RANGE[key]))
        elif kind == "junk":
            spec[key] = draw(scalar_junk)
        elif kind == "nested":
            spec[key] = draw(nested_junk)
        elif kind == "in_list":  # one bad value inside an otherwise fine grid
            values = spec.get(key) if isinstance(spec.get(key), list) else [spec.get(key, 1)]
            spec[key] = values + [draw(st.one_of(scalar_junk, st.sampled_from(OUT_OF_RANGE[key])))]
        elif kind == "empty":
            spec[key] = []
        elif kind == "drop":
            spec.pop(key, None)
        elif kind == "unknown":
            spec[draw(st.one_of(st.sampled_from(["sigmas", "step", "Sigma", "epsilon", "batchsize", ""]),
                                # YAML folds line breaks in keys ('\x85' loads back as ' '): not a spec's fault
                                st.text(st.characters(blacklist_categories=("Cs",),
                                                      blacklist_characters="\x85\u2028\u2029\r\n"),
                                        max_size=8)))] = draw(scalar_junk)
        elif kind == "conflict":
            spec.update(draw(st.sampled_from([{"steps": 10, "batch_size": 2}, {"batch_size": 5},
                                              {"max_batch_size": 5}, {"dataset_size": 10}])))
        elif kind == "duplicate" and isinstance(spec.get(key), list) and spec[key]:
            spec[key] = spec[key] + spec[key][:1]
    return spec


# ---- strategies: raw text -----------------------------------------------------------------------

#: File an executed tag would create (in the test's own directory).
MARKER_NAME = "EXECUTED"


def evil_tags(marker: str) -> list[str]:
    """YAML tags that would run code (and create ``marker``) under an unsafe loader."""
    return [
        f"!!python/object/apply:builtins.open [{marker!r}, 'w']",
        f"!!python/object/apply:os.system ['touch {marker}']",
        f"!!python/object/apply:subprocess.call [['touch', {marker!r}]]",
        f"!!python/object/new:builtins.open [{marker!r}, 'w']",
        f"!python/object/apply:builtins.exec [\"open({marker!r}, 'w')\"]",
        "!!python/name:os.system",
        "!!python/module:os",
        f"!<tag:yaml.org,2002:python/object/apply:builtins.open> [{marker!r}, 'w']",
    ]


TOKENS = ["sigma", "steps", "epsilons", "seed", "method", "orders", "x", ":", ": ", " ", "  ", "\n", "\n  ", "- ",
          "[", "]", "{", "}", ",", "'", '"', "1", "-1", "0.5", "1e400", ".nan", ".inf", "-.inf", "null", "~", "true",
          "&a ", "*a", "&b ", "*b", "<<: ", "<<: *a", "? ", "|", ">", "#", "---", "...", "%YAML 1.1\n", "%TAG ! x\n",
          "!!str ", "!!null ", "!!binary ", "!!set ", "!!omap ", "!!pairs ", "!!merge ", "!!seq ", "!!map ", "!x ",
          "\t", "\x00", "\ufeff", "\u2028", "0x1F", "0o17", "1_000", "12:30:00", "2001-12-14"]
#: Tokens that reach a known bug (PyYAML's constructors raise ValueError, KeyError, IndexError or
#: AttributeError, not YAMLError, on bad explicitly typed scalars and on impossible dates).
KNOWN_BUG_TOKENS = ["!!int ", "!!float ", "!!bool ", "!!timestamp ", "2001-13-45", "2001-02-30"]


@st.composite
def token_soup(draw, marker: str, tokens: list[str] = TOKENS) -> str:
    token = st.one_of(st.sampled_from(tokens), st.sampled_from(evil_tags(marker)), st.text(max_size=3))
    return "".join(draw(st.lists(token, max_size=40)))


@st.composite
def mutated_text(draw, marker: str) -> tuple[str, str]:
    """A valid spec's YAML or JSON text with a slice deleted, duplicated or replaced by a token."""
    fmt = draw(st.sampled_from(["yaml", "json"]))
    text = dump(draw(valid_specs()), fmt)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        op = draw(st.sampled_from(["delete", "duplicate", "insert"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(st.one_of(st.sampled_from(TOKENS), st.sampled_from(evil_tags(marker)))) + text[i:]
    return text, "." + fmt


def alias_bomb(levels: int, width: int) -> str:
    """Flow YAML of a chain x0 = [1]*width, x_i = [x_{i-1}]*width: width**levels leaves, O(levels*width) text."""
    chain = [f"&x0 [{', '.join(['1'] * width)}]"]
    chain += [f"&x{i} [{', '.join([f'*x{i - 1}'] * width)}]" for i in range(1, levels)]
    return "[" + ", ".join(chain) + "]"


#: Where a bomb goes: (key, template) in an otherwise valid spec; BOMB is replaced by the chain.
BOMB_PLACES = [("seed", "BOMB"), ("sigma", "{k: BOMB}"), ("sigma", "[1, BOMB]"), ("epsilons", "BOMB"),
               ("orders", "BOMB"), ("shards", "BOMB"), ("baselines", "BOMB"), ("pld_discretization", "BOMB"),
               ("method", "[naive, BOMB]"), ("bogus", "BOMB"), ("steps", "BOMB"), ("batch_size", "BOMB"),
               ("dataset_size", "BOMB"), ("<<", "{a: BOMB}")]
BOMB_BASE = {"sigma": "1.0", "steps": "10", "epsilons": "[1]", "method": "naive", "samples": "100"}


def bomb_spec(key: str, template: str, levels: int, width: int) -> str:
    lines = dict(BOMB_BASE)
    lines[key] = template.replace("BOMB", alias_bomb(levels, width))
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


# ---- the fuzz tests -----------------------------------------------------------------------------


def fuzz_twins(specs, check, examples: int, slow_examples: int):
    """A fuzz test of ``check`` over ``specs`` at ``examples`` and its twin at ``slow_examples`` with the slow set."""
    def make(count: int):
        @settings(max_examples=count, **FUZZ)
        @given(spec=specs)
        def test(workdir, spec):
            check(workdir, spec)
        return test
    return make(examples), pytest.mark.slow(make(slow_examples))


def check_valid_spec(workdir, spec) -> None:
    results = {}
    for fmt in ("yaml", "json"):
        configs, error = load_file(workdir, dump(spec, fmt), "." + fmt)
        assert error is None, f"valid spec refused ({fmt}): {error}\n{spec}"
        results[fmt] = [c.config_id for c in configs]
    assert results["yaml"] == results["json"]
    grid = {k: (spec[k] if isinstance(spec[k], list) else [spec[k]]) for k in GRID_KEYS if k in spec}
    product = math.prod(len(v) for v in grid.values())
    def allowed(c) -> set:  # "auto" in a sweep means the sampler's certified methods (issue 17 item 2)
        names = set(grid.get("method", ["auto"]))
        return names | ({m.value for m in auto_methods(c)} if "auto" in names else set())

    main = [c for c in configs if not spec.get("baselines")
            or (c.sampler.value in grid.get("sampler", ["balls_and_bins"])
                and set(m.value for m in c.methods) <= allowed(c))]
    if not spec.get("baselines"):
        assert len(configs) <= product
    # every value of the sigma, sampler, samples grids shows up; nothing else does
    assert {c.sigma for c in main} == {float(s) for s in grid["sigma"]}
    assert {c.sampler.value for c in main} == set(grid.get("sampler", ["balls_and_bins"]))
    # samples only key configurations that sample (an analytic one is keyed by what changes its rows)
    sampled = [c for c in main if any(m.is_monte_carlo for m in c.resolved)]
    assert {c.samples for c in sampled} <= set(grid["samples"])
    assert all(c.samples == 100_000 for c in main if c not in sampled)
    eps = spec["epsilons"] if isinstance(spec["epsilons"], list) else [spec["epsilons"]]
    assert all(c.epsilons == tuple(sorted(set(map(float, eps)))) for c in configs)
    assert all(c.seed == (spec.get("seed", 0) if any(m.is_monte_carlo for m in c.resolved) else 0) for c in configs)
    steps = grid.get("steps") or [spec["dataset_size"] // b for b in grid["batch_size"]]
    assert {c.steps for c in configs} == set(steps)
    if "max_batch_size" in spec:
        assert {c.max_batch_size for c in main} == set(grid["max_batch_size"])
    else:
        # no truncation; the spec's own dataset_size / batch_size are kept as labels (issue 35 item 6)
        assert all(c.max_batch_size is None for c in configs)
        assert all(c.dataset_size in (None, spec.get("dataset_size")) for c in configs)


def check_mutated_spec(workdir, spec) -> None:
    yaml_result = load_file(workdir, dump(spec, "yaml"), ".yaml")
    json_result = load_file(workdir, dump(spec, "json"), ".json")
    assert outcome(*yaml_result) == outcome(*json_result), spec
    event("parsed" if yaml_result[1] is None else "refused")


test_valid_specs_expand_to_their_product, test_valid_specs_expand_to_their_product_more_examples = fuzz_twins(
    valid_specs(), check_valid_spec, 150, 1000)
test_mutated_specs_parse_or_are_refused, test_mutated_specs_parse_or_are_refused_more_examples = fuzz_twins(
    mutated_specs(), check_mutated_spec, 250, 2000)


@settings(max_examples=200, **FUZZ)
@given(spec=st.dictionaries(st.one_of(st.sampled_from(GRID_KEYS + SINGLE_KEYS), st.text(max_size=6)),
                            nested_junk, max_size=8))
def test_arbitrary_mappings_parse_or_are_refused(workdir, spec):
    for fmt in ("yaml", "json"):
        load_file(workdir, dump(spec, fmt), "." + fmt)


@settings(max_examples=500, **FUZZ)
@given(data=st.data())
def test_arbitrary_text_and_bytes_never_escape_or_execute(workdir, data):
    marker = workdir / MARKER_NAME
    suffix = data.draw(st.sampled_from([".yaml", ".yml", ".json", ".txt"]))
    content = data.draw(st.one_of(
        st.text(max_size=200), st.binary(max_size=200), token_soup(str(marker)),
        mutated_text(str(marker)).map(lambda pair: pair[0]),
    ))
    configs, _ = load_file(workdir, content, suffix)
    assert not marker.exists(), "a YAML tag executed code"
    event("parsed" if configs is not None else "refused")


@settings(max_examples=100, **FUZZ)
@given(place=st.sampled_from(BOMB_PLACES), levels=st.integers(1, 4), width=st.integers(1, 5))
def test_alias_bombs_of_bounded_size_are_refused_quickly(workdir, place, levels, width):
    path = workdir / "bomb.yaml"
    path.write_text(bomb_spec(*place, levels, width))
    with pytest.raises(SpecError) as info:  # refused, not expanded (an expansion would not return)
        spec_mod.load(str(path))
    check_refusal(info.value, path.stat().st_size, bounded=False)  # the message bound is a known bug below


@pytest.mark.parametrize("position", [
    "sigma: TAG\nsteps: 10\nepsilons: [1]\n",
    "sigma: [0.5, TAG]\nsteps: 10\nepsilons: [1]\n",
    "TAG\n",
    "sigma: 1\nsteps: 10\nepsilons: [1]\nbogus: TAG\n",
    "? TAG\n: 1\n",
    "sigma: 1\nsteps: 10\nepsilons: [1]\n<<: TAG\n",
    "base: &a TAG\nsigma: *a\n",
    "--- TAG\n--- {sigma: 1}\n",
])
def test_python_tags_never_execute(tmp_path, position):
    marker = tmp_path / MARKER_NAME
    for tag in evil_tags(str(marker)):
        path = tmp_path / "evil.yaml"
        path.write_text(position.replace("TAG", tag))
        with pytest.raises(SpecError):
            spec_mod.load(str(path))
        assert not marker.exists(), f"executed: {tag}"


# ---- regressions: bugs this suite found, now fixed (each test once was a strict xfail) ---------

BIG = 10**400  # an int float() cannot convert


@pytest.mark.parametrize("key, value", [("sigma", BIG), ("epsilons", [1, BIG]), ("error_prob", -BIG),
                                        ("pld_discretization", BIG)],
                         ids=["sigma", "epsilons", "error_prob", "pld_discretization"])
def test_bug_int_beyond_float_range_escapes(workdir, key, value):
    spec = {"sigma": 1.0, "steps": 10, "epsilons": [1], "method": "naive", "samples": 100, key: value}
    for fmt in ("yaml", "json"):
        load_file(workdir, dump(spec, fmt), "." + fmt)


@pytest.mark.parametrize("spec", [
    {"sigma": 1.0, "steps": 10**20, "epsilons": [1], "samples": 100},
    {"sigma": 1.0, "dataset_size": 10**30, "batch_size": 1, "epsilons": [1], "method": "order_stats"},
], ids=["auto-steps-1e20", "order-stats-n-1e30"])
def test_bug_astronomical_steps_with_order_statistics(workdir, spec):
    load_file(workdir, dump(spec, "yaml"), ".yaml")


LOADER_BUG = ("load_spec catches only JSONDecodeError/YAMLError, but the loaders raise others: RecursionError on "
              "deep nesting, ValueError on int literals of more than 4300 digits, and PyYAML's SafeConstructor "
              "ValueError/KeyError/IndexError/AttributeError on impossible dates and bad !!int/!!float/!!bool/"
              "!!timestamp scalars")
LOADER_ERRORS = (RecursionError, ValueError, KeyError, IndexError, AttributeError)


@pytest.mark.parametrize("text, suffix", [
    pytest.param("sigma: 2001-13-45\nsteps: 10\nepsilons: [1]\n", ".yaml", id="impossible-date"),
    pytest.param("sigma: !!int x\nsteps: 10\nepsilons: [1]\n", ".yaml", id="int-tag"),
    pytest.param("sigma: !!int ''\nsteps: 10\nepsilons: [1]\n", ".yaml", id="empty-int-tag"),
    pytest.param("sigma: !!bool x\nsteps: 10\nepsilons: [1]\n", ".yaml", id="bool-tag"),
    pytest.param("sigma: !!timestamp x\nsteps: 10\nepsilons: [1]\n", ".yaml", id="timestamp-tag"),
    pytest.param('{"sigma": ' + "[" * 100_000 + "]" * 100_000 + "}", ".json", id="deep-json"),
    pytest.param("sigma: " + "[" * 3000 + "]" * 3000 + "\n", ".yaml", id="deep-yaml"),
    pytest.param('{"sigma": 1, "steps": 10, "epsilons": [1], "samples": ' + "1" * 5000 + "}", ".json",
                 id="5000-digit-int-json"),
    pytest.param("sigma: 1\nsteps: 10\nepsilons: [1]\nsamples: " + "1" * 5000 + "\n", ".yaml",
                 id="5000-digit-int-yaml"),
])
def test_bug_loader_errors_other_than_syntax_escape(workdir, text, suffix):
    load_file(workdir, text, suffix)


@settings(max_examples=100, **FUZZ_NO_SHRINK)
@given(data=st.data())
def test_bug_fuzz_with_typed_scalars_and_dates(workdir, data):
    marker = workdir / MARKER_NAME
    soup = token_soup(str(marker), TOKENS + KNOWN_BUG_TOKENS)
    text = data.draw(st.sampled_from(KNOWN_BUG_TOKENS)) + data.draw(soup)
    load_file(workdir, text, ".yaml")
    assert not marker.exists()


@settings(max_examples=30, **FUZZ_NO_SHRINK)
@given(place=st.sampled_from(BOMB_PLACES), levels=st.integers(1, 5), width=st.integers(1, 6))
def test_bug_alias_bomb_messages_are_not_bounded(workdir, place, levels, width):
    path = workdir / "bomb.yaml"
    path.write_text(bomb_spec(*place, levels, width))
    with pytest.raises(SpecError) as info:
        spec_mod.load(str(path))
    check_refusal(info.value, path.stat().st_size, bounded=True)


@settings(max_examples=60, **FUZZ_NO_SHRINK)
@given(spec=valid_specs(), key=st.sampled_from(["sigma", "epsilons", "error_prob", "pld_discretization", "steps"]),
       value=st.one_of(st.integers(10**309, 10**400), st.integers(-10**400, -10**309), st.integers(10**20, 10**40)))
def test_bug_fuzz_with_unbounded_ints(workdir, spec, key, value):
    spec = dict(spec, **{key: value})
    if key == "steps":  # steps replaces dataset_size and batch_size
        for other in ("dataset_size", "batch_size", "max_batch_size"):
            spec.pop(other, None)
    load_file(workdir, dump(spec, "yaml"), ".yaml")
