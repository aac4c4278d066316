"""Bad command lines, across every ``epscert`` command: exit status 2, one line on stderr naming the
field, no traceback, and nothing sampled or launched first.

Each corpus entry is ``(command, argv, needles)``: ``argv`` may use ``{name}`` placeholders for files
this module writes into ``tmp_path`` (sweep specs, fft schedules, a results table, a regular file
standing in for a directory); at least one needle (a field name) must appear on the error line.
Entries run in process through :func:`pipelines.cli.main` with every sampling and pipeline entry
point replaced by a tripwire; a handful also run as ``python -m pipelines.cli`` subprocesses.
Entries with a ``bug`` text are regressions: they failed when this corpus was written (the text
says how) and pass since the fix.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import apache_beam
import pytest

import epscert
import epscert.api
import epscert.results.tables
import epscert.compare
import epscert.fft.report
import epscert.montecarlo.shard
from .tripwires import trip_sampler_draws
from pipelines import cli

ROOT = Path(__file__).resolve().parents[2]

#: Valid flags of the commands whose entries change one thing at a time.
HIDDEN = ["--dataset-size", "1000", "--batch-size", "10", "--step-size", "0.01", "--sigma", "1",
          "--strong-convexity", "0.1", "--smoothness", "1", "--grad-sensitivity", "1"]
CALIBRATE = ["--target-epsilon", "2", "--delta", "1e-3", "--steps", "10", "--samples", "1000"]
COMPARE = ["--sigma", "1", "--steps", "10", "--samples", "1000"]
#: A valid sweep spec (one line per key) that entries edit.
SPEC_OK = "sigma: [0.5, 1.0]\nsteps: 10\nepsilons: [1, 2]\nmethod: naive\nsamples: 100\nshards: 1\n"


class WorkStarted(BaseException):
    """Raised by the tripwires; a BaseException so that no ``except ValueError`` in a CLI can eat it."""


def _spec(**changes) -> str:
    """SPEC_OK with keys replaced (value text) or removed (None) or added."""
    lines = dict(line.split(": ", 1) for line in SPEC_OK.splitlines())
    for key, value in changes.items():
        if value is None:
            lines.pop(key, None)
        else:
            lines[key] = value
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


def _schedule(**changes) -> str:
    """A one-mechanism fft schedule (JSON) with fields replaced by raw JSON text."""
    fields = {"mechanism": '"subsampled_gaussian"', "q": "0.01", "sigma": "1.0", "count": "100"}
    fields.update(changes)
    return '{"mechanisms": [{' + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}]}"


#: Files written to tmp_path for every entry: name -> text.
FILES = {
    "schedule.json": _schedule(),
    "schedule-sigma-zero.json": _schedule(sigma="0"),
    "schedule-sigma-nan.json": _schedule(sigma="NaN"),
    "schedule-q.json": _schedule(q="1.5"),
    "schedule-count.json": _schedule(count="2.5"),
    "schedule-kind.json": _schedule(mechanism='"laplace_of_doom"'),
    "blocker": "a regular file where a directory is expected\n",
    "spec-nan-sigma.yaml": _spec(sigma="[0.5, .nan]"),
    "spec-zero-sigma.yaml": _spec(sigma="0"),
    "spec-fractional-steps.yaml": _spec(steps="2.5"),
    "spec-zero-epochs.yaml": _spec(epochs="[1, 0]"),
    "spec-negative-epsilon.yaml": _spec(epsilons="[1, -0.5]"),
    "spec-nan-epsilon.json": '{"sigma": 1, "steps": 10, "epsilons": [NaN], "method": "naive", "samples": 100}',
    "spec-error-prob.yaml": _spec(error_prob="1.5"),
    "spec-zero-samples.yaml": _spec(samples="0"),
    "spec-orders-unsorted.yaml": _spec(method="order_stats", orders="'1,5,1,3,4,1'"),
    "spec-orders-reach-T.yaml": _spec(method="order_stats", orders="'1,11,1'"),
    "spec-importance-epochs.yaml": _spec(method="importance", epochs="[1, 2]"),
    "spec-unknown-sampler.yaml": _spec(sampler="[poisson, urn]"),
    "spec-unknown-method.yaml": _spec(method="magic"),
    "spec-unknown-direction.yaml": _spec(direction="sideways"),
    "spec-empty-grid.yaml": _spec(sigma="[]"),
    "spec-unknown-key.yaml": _spec(noise_multiplier="1.0"),
    "spec-malformed.yaml": "sigma: [0.5, 1.0\nsteps: 10\n",
    "spec-malformed.json": '{"sigma": [0.5, 1.0], "steps": 10,, }',
    "spec-python-tag.yaml": _spec(sigma="!!python/object/apply:os.system ['true']"),
    "spec-absurd.yaml": _spec(samples="1000000000000000", steps="1000"),
    "spec-huge-int.json": '{"sigma": 1' + "0" * 400 + ', "steps": 10, "epsilons": [1]}',
    "spec-deep.json": '{"sigma": ' + "[" * 100_000 + "]" * 100_000 + ', "steps": 10, "epsilons": [1]}',
    "spec-long-int.yaml": _spec(samples="1" * 5000),
    "spec-bad-date.yaml": _spec(sigma="2001-13-45"),
    "spec-huge-steps.yaml": _spec(steps="100000000000000000000", method="auto"),
}


def E(command: str, argv: list[str], needles: str | tuple[str, ...], *, id: str, bug: str | None = None,
      raises=AssertionError):
    """One corpus entry; ``bug`` records a defect this corpus found (now fixed: the entry is a
    regression test; ``raises`` was the exception the bug raised)."""
    marks = []
    needles = (needles,) if isinstance(needles, str) else needles
    return pytest.param(command, argv, needles, id=f"{command}-{id}", marks=marks)


#: An output path whose parent is a regular file: unwritable even for root (chmod does not stop root).
OUT_BLOCKED_PARQUET = "{blocker}/out.parquet"
HUGE_STEPS = ("steps >= ~1e20 with order statistics: default_orders() passes a Python int beyond int64 to "
              "np.geomspace, whose object array raises TypeError (not ValueError): a traceback")

CORPUS = [
    # ---- certify -----------------------------------------------------------------------------
    E("certify", ["--sigma", "0"], "sigma", id="sigma-zero"),
    E("certify", ["--sigma", "nan"], "sigma", id="sigma-nan"),
    E("certify", ["--sigma", "-inf"], "sigma", id="sigma-minus-inf"),
    E("certify", ["--steps", "2.5"], "steps", id="steps-fractional"),
    E("certify", ["--steps", "0"], "steps", id="steps-zero"),
    E("certify", ["--method", "naive", "--epochs", "0"], "epochs", id="epochs-zero"),
    E("certify", ["--epsilons", "1,-0.5"], "epsilon", id="epsilon-negative"),
    E("certify", ["--epsilons", "nan"], "epsilon", id="epsilon-nan"),
    E("certify", ["--epsilons", ","], "epsilons", id="epsilons-empty"),
    E("certify", ["--error-prob", "0"], "error_prob", id="error-prob-zero"),
    E("certify", ["--error_prob", "nan"], "error_prob", id="error-prob-nan"),
    E("certify", ["--samples", "-5"], "samples", id="samples-negative"),
    E("certify", ["--steps", "10", "--method", "order_stats", "--orders", "1,5,1,3,4,1"], "orders",
      id="orders-unsorted"),
    E("certify", ["--steps", "10", "--method", "order_stats", "--orders", "1,4,1,3,6,1"], "orders",
      id="orders-duplicated"),
    E("certify", ["--steps", "10", "--method", "importance_order_stats", "--orders", "1,11,1"], "orders",
      id="orders-reach-T"),
    E("certify", ["--method", "importance_order_stats", "--epochs", "3"], "epochs", id="importance-epochs"),
    E("certify", ["--sampler", "balls_and_urns"], "sampler", id="unknown-sampler"),
    E("certify", ["--method", ""], "method", id="empty-method"),
    E("certify", ["--direction", "both,add"], "direction", id="unknown-direction"),
    E("certify", ["--method", "naive", "--steps", "1000", "--samples", "1000000000000000"], "samples",
      id="absurd-samples"),
    E("certify", ["--method", "naive", "--steps", "100000000000"], "steps", id="absurd-steps"),
    E("certify", ["--method", "order_stats", "--steps", "100000000000000000000"], "steps", id="steps-1e20",
      bug=HUGE_STEPS, raises=TypeError),
    E("certify", ["--output", OUT_BLOCKED_PARQUET], "output", id="output-parent-is-a-file"),
    E("certify", ["--output", "{readonly}/out.parquet"], "output", id="output-read-only-dir"),
    # ---- epsilon -----------------------------------------------------------------------------
    E("epsilon", ["--noise-multiplier", "0", "--steps", "10", "--delta", "1e-5"], "sigma", id="sigma-zero"),
    E("epsilon", ["--noise-multiplier", "1", "--steps", "10", "--delta", "2"], "delta", id="delta-above-one"),
    E("epsilon", ["--noise-multiplier", "1", "--delta", "1e-5"], "steps", id="no-steps"),
    E("epsilon", ["--noise-multiplier", "1", "--dataset-size", "100", "--batch-size", "200", "--delta", "1e-5"],
      "batch_size", id="batch-above-dataset"),
    E("epsilon", ["--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5", "--sampler", "urn"], "sampler",
      id="unknown-sampler"),
    E("epsilon", ["--noise-multiplier", "1", "--steps", "0", "--delta", "1e-5"], "steps", id="steps-zero"),
    # ---- sweep -------------------------------------------------------------------------------
    E("sweep", ["{spec-nan-sigma.yaml}"], "sigma", id="sigma-nan"),
    E("sweep", ["{spec-zero-sigma.yaml}"], "sigma", id="sigma-zero"),
    E("sweep", ["{spec-fractional-steps.yaml}"], "steps", id="steps-fractional"),
    E("sweep", ["{spec-zero-epochs.yaml}"], "epochs", id="epochs-zero"),
    E("sweep", ["{spec-negative-epsilon.yaml}"], "epsilon", id="epsilon-negative"),
    E("sweep", ["{spec-nan-epsilon.json}"], "epsilon", id="epsilon-nan-json"),
    E("sweep", ["{spec-error-prob.yaml}"], "error_prob", id="error-prob-above-one"),
    E("sweep", ["{spec-zero-samples.yaml}"], "samples", id="samples-zero"),
    E("sweep", ["{spec-orders-unsorted.yaml}"], "orders", id="orders-unsorted"),
    E("sweep", ["{spec-orders-reach-T.yaml}"], "orders", id="orders-reach-T"),
    E("sweep", ["{spec-importance-epochs.yaml}"], "epochs", id="importance-epochs"),
    E("sweep", ["{spec-unknown-sampler.yaml}"], "sampler", id="unknown-sampler"),
    E("sweep", ["{spec-unknown-method.yaml}"], "method", id="unknown-method"),
    E("sweep", ["{spec-unknown-direction.yaml}"], "direction", id="unknown-direction"),
    E("sweep", ["{spec-empty-grid.yaml}"], "sigma", id="empty-grid"),
    E("sweep", ["{spec-unknown-key.yaml}"], "noise_multiplier", id="unknown-key"),
    E("sweep", ["{spec-malformed.yaml}"], "YAML", id="malformed-yaml"),
    E("sweep", ["{spec-malformed.json}"], "JSON", id="malformed-json"),
    E("sweep", ["{spec-python-tag.yaml}"], "YAML", id="python-tag"),
    E("sweep", ["{missing.yaml}"], "spec", id="missing-spec"),
    E("sweep", ["{spec-absurd.yaml}"], "samples", id="absurd-samples"),
    E("sweep", ["{spec-zero-sigma.yaml}", "--output-shards", "0"], "output_shards", id="output-shards-zero"),
    E("sweep", ["{spec-zero-sigma.yaml}", "--wave-seconds", "nan"], "wave_seconds", id="wave-seconds-nan"),
    E("sweep", ["{spec-huge-steps.yaml}"], "steps", id="steps-1e20", bug=HUGE_STEPS, raises=TypeError),
    E("sweep", ["{spec-bad-date.yaml}"], ("YAML", "sigma"), id="impossible-date",
      bug="yaml.safe_load raises ValueError (not YAMLError) for 2001-13-45: load_spec lets it through, traceback",
      raises=ValueError),
    E("sweep", ["{spec-huge-int.json}"], "sigma", id="huge-int-sigma",
      bug="OverflowError from check_float (float(10**400)) escapes expand(): traceback", raises=OverflowError),
    E("sweep", ["{spec-deep.json}"], ("JSON", "spec"), id="deeply-nested-json",
      bug="RecursionError from json.loads escapes load_spec(): traceback", raises=RecursionError),
    E("sweep", ["{spec-long-int.yaml}"], ("YAML", "samples"), id="5000-digit-int",
      bug="ValueError (int max str digits) from yaml.safe_load escapes load_spec() as a non-UsageError",
      raises=ValueError),
    # ---- calibrate ---------------------------------------------------------------------------
    E("calibrate", [*CALIBRATE, "--target-epsilon", "nan"], "epsilon", id="target-epsilon-nan"),
    E("calibrate", [*CALIBRATE, "--delta", "0"], "delta", id="delta-zero"),
    E("calibrate", [*CALIBRATE, "--delta", "1"], "delta", id="delta-one"),
    E("calibrate", [*CALIBRATE, "--delta", "nan"], "delta", id="delta-nan"),
    E("calibrate", [*CALIBRATE, "--steps", "2.5"], "steps", id="steps-fractional"),
    E("calibrate", [*CALIBRATE, "--method", "naive", "--epochs", "0"], "epochs", id="epochs-zero"),
    E("calibrate", [*CALIBRATE, "--method", "importance", "--epochs", "2"], "epochs", id="importance-epochs"),
    E("calibrate", [*CALIBRATE, "--samples", "0"], "samples", id="samples-zero"),
    E("calibrate", [*CALIBRATE, "--error-prob", "1"], "error_prob", id="error-prob-one"),
    E("calibrate", [*CALIBRATE, "--sampler", "poisson", "--method", "pld_upper"], "method",
      id="analytic-method"),
    E("calibrate", [*CALIBRATE, "--search-samples", "0"], "search_samples", id="search-samples-zero"),
    E("calibrate", [*CALIBRATE, "--seed", "3", "--certify-seed", "3"], "certify_seed", id="same-seeds"),
    E("calibrate", [*CALIBRATE, "--direction", "up"], "direction", id="unknown-direction"),
    E("calibrate", [*CALIBRATE, "--output", OUT_BLOCKED_PARQUET], "output", id="output-parent-is-a-file",
      bug="calibrate checks --output with os.access on its parent, which is true for a regular file: the "
          "whole search runs (Beam jobs) and write_rows then fails with a FileExistsError traceback",
      raises=WorkStarted),
    # ---- compare -----------------------------------------------------------------------------
    E("compare", [*COMPARE, "--sigma", "nan"], "sigma", id="sigma-nan"),
    E("compare", [*COMPARE, "--steps", "2.5"], "steps", id="steps-fractional"),
    E("compare", [*COMPARE, "--method", "naive", "--epochs", "0"], "epochs", id="epochs-zero"),
    E("compare", [*COMPARE, "--epsilons", "-1"], "epsilon", id="epsilon-negative"),
    E("compare", [*COMPARE, "--error-prob", "1"], "error_prob", id="error-prob-one"),
    E("compare", [*COMPARE, "--samples", "0"], "samples", id="samples-zero"),
    E("compare", [*COMPARE, "--method", "importance", "--epochs", "2"], "epochs", id="importance-epochs"),
    E("compare", [*COMPARE, "--direction", "sideways"], "direction", id="unknown-direction"),
    E("compare", [*COMPARE, "--deltas", "nan"], "delta", id="delta-nan",
      bug="compare validates --deltas only in epsilon_report, after the Monte Carlo run of certify_config",
      raises=WorkStarted),
    E("compare", [*COMPARE, "--deltas", "1e-5,1.5"], "delta", id="delta-above-one",
      bug="compare validates --deltas only in epsilon_report, after the Monte Carlo run of certify_config",
      raises=WorkStarted),
    # ---- plot --------------------------------------------------------------------------------
    E("plot", ["{results.parquet}", "--out", "{fig.png}", "--kind", "sigma", "--delta", "0"], "delta",
      id="delta-zero"),
    E("plot", ["{results.parquet}", "--out", "{fig.png}", "--delta", "nan"], "delta", id="delta-nan"),
    E("plot", ["{missing.parquet}", "--out", "{fig.png}"], "results", id="missing-results"),
    E("plot", ["{blocker}", "--out", "{fig.png}"], "Parquet", id="results-not-parquet"),
    E("plot", ["{results.parquet}", "--out", "{blocker}/fig.png"], "out", id="out-parent-is-a-file",
      bug="plot checks --out with os.access on its parent (true for a regular file); the figure is drawn and "
          "the failure is an OSError line that does not name the field"),
    E("plot", ["{results.parquet}", "--out", "{fig.png}", "--kind", "cdf"], "kind", id="unknown-kind",
      bug="plot uses a plain argparse parser: a bad flag raises SystemExit from main() and prints two lines "
          "(usage + error) instead of returning 2 with one line"),
    E("plot", ["{results.parquet}", "--out", "{fig.png}", "--direction", "up"], "direction",
      id="unknown-direction",
      bug="plot uses a plain argparse parser: a bad flag raises SystemExit from main() and prints two lines "
          "(usage + error) instead of returning 2 with one line"),
    # ---- fft ---------------------------------------------------------------------------------
    E("fft", ["--schedule", "{missing.json}"], "schedule", id="missing-schedule"),
    E("fft", ["--schedule", "{spec-malformed.json}"], "schedule", id="malformed-schedule"),
    E("fft", ["--schedule", "{schedule-sigma-zero.json}"], "sigma", id="sigma-zero"),
    E("fft", ["--schedule", "{schedule-sigma-nan.json}"], "sigma", id="sigma-nan"),
    E("fft", ["--schedule", "{schedule-q.json}"], "q", id="q-above-one"),
    E("fft", ["--schedule", "{schedule-count.json}"], "count", id="count-fractional"),
    E("fft", ["--schedule", "{schedule-kind.json}"], "mechanism", id="unknown-mechanism"),
    E("fft", ["--schedule", "{schedule.json}", "--epsilons", "1,-2"], "epsilon", id="epsilon-negative"),
    E("fft", ["--schedule", "{schedule.json}", "--epsilons", "nan"], "epsilon", id="epsilon-nan"),
    E("fft", ["--schedule", "{schedule.json}", "--direction", "up"], "direction", id="unknown-direction"),
    E("fft", ["--schedule", "{schedule.json}", "--half-width", "20", "--size", "1001"], "size", id="odd-size"),
    E("fft", ["--schedule", "{schedule.json}", "--half-width", "20"], "size", id="half-width-alone"),
    E("fft", ["--schedule", "{schedule.json}", "--target-error", "nan"], "target_error", id="target-error-nan"),
    E("fft", ["--schedule", "{schedule.json}", "--half-width", "20", "--size", "1024", "--running-every", "-1"],
      "running-every", id="running-every-negative",
      bug="fft checks --running-every only after fft_bounds has composed the whole schedule", raises=WorkStarted),
    # ---- hidden-state ------------------------------------------------------------------------
    E("hidden-state", [*HIDDEN, "--sigma", "0"], "sigma", id="sigma-zero"),
    E("hidden-state", [*HIDDEN, "--sigma", "nan"], "sigma", id="sigma-nan"),
    E("hidden-state", [*HIDDEN, "--batch-size", "7"], "batch_size", id="batch-does-not-divide"),
    E("hidden-state", [*HIDDEN, "--epochs", "1,2.5"], "epochs", id="epochs-fractional"),
    E("hidden-state", [*HIDDEN, "--epochs", "1,0"], "epochs", id="epochs-zero"),
    E("hidden-state", [*HIDDEN, "--epochs", ","], "epochs", id="epochs-empty"),
    E("hidden-state", [*HIDDEN, "--delta", "1.5"], "delta", id="delta-above-one"),
    E("hidden-state", [*HIDDEN, "--delta", "nan"], "delta", id="delta-nan"),
    E("hidden-state", [*HIDDEN, "--smoothness", "0.05"], "smoothness", id="smoothness-below-convexity"),
    E("hidden-state", [*HIDDEN, "--step-size", "5"], "step_size", id="step-size-too-large"),
    E("hidden-state", [*HIDDEN, "--conversion", "magic"], "conversion", id="unknown-conversion"),
    E("hidden-state", [*HIDDEN, "--dataset-size", "2.5"], "dataset-size", id="dataset-size-fractional"),
]

#: Sweep entries get an output directory; certify entries skip the baselines and progress lines.
EXTRA = {"sweep": lambda p: ["--output", str(p / "sweep-out")], "certify": lambda p: ["--no-baselines"]}


@pytest.fixture(scope="module")
def results_table(tmp_path_factory) -> Path:
    """A small, real results table for the plot entries (computed before any tripwire is set)."""
    import pyarrow.parquet as pq

    table = epscert.certify(sampler="balls_and_bins", sigma=1.0, steps=4, epsilons=[0.5, 1.0], method="naive",
                            samples=50, seed=0)
    path = tmp_path_factory.mktemp("results") / "results.parquet"
    pq.write_table(table, path)
    return path


@pytest.fixture
def paths(tmp_path, results_table) -> dict[str, str]:
    """Placeholder -> path: every FILES entry written, plus missing files, a figure and a read-only dir."""
    out = {}
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
        out[name] = str(tmp_path / name)
    for name in ("missing.yaml", "missing.json", "missing.parquet", "fig.png"):
        out[name] = str(tmp_path / name)
    out["results.parquet"] = str(results_table)
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    readonly.chmod(0o500)
    out["readonly"] = str(readonly)
    yield out
    readonly.chmod(0o700)


#: Required flags given first, so that an entry's own value (later on the line) wins (argparse).
PREFIX = {"certify": ["--sigma", "1", "--steps", "10"]}


def expand_argv(command: str, argv: list[str], paths: dict[str, str], tmp_path: Path) -> list[str]:
    full = [re.sub(r"\{([^{}]+)\}", lambda m: paths[m.group(1)], a) for a in argv]
    return [command, *PREFIX.get(command, []), *full, *EXTRA.get(command, lambda p: [])(tmp_path)]


@pytest.fixture
def tripwires(monkeypatch):
    """Every way to start sampling, a Beam pipeline or a Fourier composition raises WorkStarted."""

    def boom(*args, **kwargs):
        raise WorkStarted("work started before the bad input was refused")

    monkeypatch.setattr(apache_beam.Pipeline, "run", boom)
    for module, names in ((epscert.montecarlo.shard, ("run_shard",)), (epscert.results.tables, ("run_shard",)), (epscert.api, ("certify_config",)),
                          (epscert.compare, ("certify_config", "fft_bounds")),
                          (epscert.fft.report, ("fft_bounds", "running_bounds"))):
        for name in names:
            monkeypatch.setattr(module, name, boom)
    trip_sampler_draws(monkeypatch, boom)


def error_lines(err: str) -> list[str]:
    """stderr without logging records of third-party libraries (Beam warns on import)."""
    return [line for line in err.splitlines() if line.strip() and not re.match(r"(WARNING|INFO|DEBUG):", line)]


def check_refusal(command: str, code, err: str, needles: tuple[str, ...]) -> None:
    assert "Traceback" not in err, err
    lines = error_lines(err)
    assert code == 2, f"exit status {code!r}, stderr: {err!r}"
    assert len(lines) == 1, f"expected one error line, got {lines!r}"
    assert lines[0].startswith(f"epscert {command}:"), lines[0]
    assert any(n in lines[0] for n in needles), f"none of {needles} in {lines[0]!r}"


def test_corpus_size_per_command():
    counts = {}
    for param in CORPUS:
        counts[param.values[0]] = counts.get(param.values[0], 0) + 1
    assert set(counts) == set(cli.COMMANDS), counts
    assert len(CORPUS) >= 20 and min(counts.values()) >= 5, counts


@pytest.mark.parametrize("command, argv, needles", CORPUS)
def test_bad_command_line_is_refused_before_any_work(command, argv, needles, paths, tmp_path, tripwires, capsys):
    if "{readonly}" in " ".join(argv) and os.access(paths["readonly"], os.W_OK):
        pytest.skip("running as root: a chmod 0o500 directory is still writable (see output-parent-is-a-file)")
    try:
        code = cli.main(expand_argv(command, argv, paths, tmp_path))
    except SystemExit as stop:  # argparse exiting by itself is not the documented contract
        code = f"SystemExit({stop.code!r})"
    check_refusal(command, code, capsys.readouterr().err, needles)
    assert not (tmp_path / "sweep-out" / "results.parquet").exists()


#: Entries also run as real processes (exit status and stderr as a user sees them): four in the fast suite (each
#: process's imports are most of its cost), the other four with the slow set; every entry runs in-process above.
SUBPROCESS_IDS = ("certify-sigma-nan", "sweep-malformed-yaml", "calibrate-delta-one", "plot-delta-nan")
SLOW_SUBPROCESS_IDS = ("sweep-unknown-key", "compare-steps-fractional", "fft-sigma-zero", "hidden-state-epochs-zero")


@pytest.mark.parametrize("ids", [SUBPROCESS_IDS, pytest.param(SLOW_SUBPROCESS_IDS, marks=pytest.mark.slow)],
                         ids=["fast", "slow"])
def test_subprocess_entries_exit_2_without_traceback(paths, tmp_path, ids):
    entries = {p.id: p.values for p in CORPUS if p.id in ids}
    assert set(entries) == set(ids)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    procs = {}
    for name, (command, argv, needles) in entries.items():  # all at once: the imports dominate
        procs[name] = subprocess.Popen([sys.executable, "-m", "pipelines.cli",
                                        *expand_argv(command, argv, paths, tmp_path)],
                                       cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    failures = []
    for name, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            failures.append(f"{name}: still running after 120 s")
            continue
        command, _, needles = entries[name]
        try:
            check_refusal(command, proc.returncode, err, needles)
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)
