"""The deploy recipes cannot rot: syntax, dry runs of every script, JSON, templates vs CLI flags."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import certify, spec as spec_mod, sweep
from pipelines.options import check_unknown_flags, choose_runner

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCRIPTS = sorted(DEPLOY.rglob("*.sh"))
BEAM_VERSION = "2.77.0"

#: Settings that let every script run with DRY_RUN=1 (nothing is executed).
DRY_ENV = {
    "DRY_RUN": "1", "PROJECT": "demo-project", "BUCKET": "demo-bucket", "REGION": "europe-west1",
    "SERVICE_ACCOUNT": "sweeper@demo-project.iam.gserviceaccount.com", "SPEC": "gs://demo-bucket/specs/grid.yaml",
    "OUTPUT": "gs://demo-bucket/sweeps/run1", "IMAGE": "registry.example/epscert:0.1.0",
    "FLINK_MASTER": "flink-jm:8081", "SPARK_MASTER": "spark://spark-master:7077", "OUT_ROOT": "/data/sweeps",
}
#: CLI flags a flex template does not take: local printing and on/off switches.
NOT_TEMPLATE_FLAGS = {"--format", "--no-baselines", "--no-progress", "--help"}


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_are_recipes_for_every_target():
    for folder in ("dataflow", "flink", "spark", "schedule"):
        assert (DEPLOY / folder / "README.md").is_file(), folder
        assert list((DEPLOY / folder).glob("*.sh")), folder


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_shell_scripts_parse_and_are_strict(script):
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    if script.name != "lib.sh":
        assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
        assert os.access(script, os.X_OK), f"{script} is not executable"


@pytest.mark.parametrize("path", sorted(DEPLOY.rglob("*.json")), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_json_files_parse(path):
    assert isinstance(load_json(path), dict)


def value_flags(parser) -> set[str]:
    """Canonical (hyphenated) --flags of a parser that take a value."""
    flags = set()
    for action in parser._actions:  # noqa: SLF001
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.nargs != 0 and longs[0] not in NOT_TEMPLATE_FLAGS:
            flags.add(longs[0])
    return flags


@pytest.mark.parametrize("job, parser", [("certify", certify.build_parser()), ("sweep", sweep.build_parser())])
def test_flex_template_parameters_match_the_cli_flags(job, parser):
    metadata = load_json(DEPLOY / "dataflow" / f"{job}-metadata.json")
    names = [p["name"] for p in metadata["parameters"]]
    assert len(names) == len(set(names)) and names[0] == "command"
    for param in metadata["parameters"]:
        assert re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_]*", param["name"]) and param["helpText"]
    known = set(parser.long_flags())
    params = {"--" + n for n in names if n != "command"}
    assert params <= known, params - known  # underscore aliases exist for every parameter
    canonical = {"--" + n.replace("_", "-") for n in names if n != "command"}
    expected = value_flags(parser) - {"--spec"}
    if job == "sweep":
        canonical.discard("--spec")
    assert canonical == expected, (canonical ^ expected)


def test_dockerfile_uses_the_pinned_beam_sdk_image_and_installs_the_package():
    text = (DEPLOY / "dataflow" / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, flags=re.M)
    assert froms == [f"apache/beam_python3.11_sdk:{BEAM_VERSION}"]
    assert f"apache-beam>={BEAM_VERSION.rsplit('.', 1)[0]}" in (ROOT / "pyproject.toml").read_text()
    assert re.search(r"pip install .*'\.\[gcp\]'", text)
    for folder in ("epscert", "transforms", "pipelines"):
        assert f"COPY {folder} ./{folder}" in text
    entry = re.search(r"FLEX_TEMPLATE_PYTHON_PY_FILE=/opt/epscert/(\S+)", text).group(1)
    assert (ROOT / entry).is_file() and f"COPY {entry} ./{entry}" in text
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in text


def test_template_main_picks_the_job_and_runs_it(tmp_path):
    sys.path.insert(0, str(DEPLOY / "dataflow"))
    try:
        import template_main
    finally:
        sys.path.pop(0)
    assert template_main.split_command(["--spec=a", "--output", "b"]) == ("sweep", ["--spec=a", "--output", "b"])
    assert template_main.split_command(["--command", "certify", "--sigma=1"]) == ("certify", ["--sigma=1"])
    assert template_main.main(["--command=plot"]) == 2
    out = tmp_path / "r.parquet"
    code = template_main.main(["--command=certify", "--sigma=0.9", "--steps=6", "--samples=200", "--shards=1",
                               "--error_prob=0.05", "--no_baselines", f"--output={out}", "--runner=FnApiRunner",
                               "--no_progress"])
    assert code == 0 and out.is_file()


def dry_run(script: Path, tmp_path: Path) -> list[list[str]]:
    env = dict(os.environ, **DRY_ENV, LOCK=str(tmp_path / "lock"))
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=True)
    return [shlex.split(line) for line in proc.stdout.splitlines() if line.strip()]


def job_args(command: list[str]) -> tuple[str, list[str]] | None:
    """('certify'|'sweep', args) for an epscert command line, else None."""
    for i, word in enumerate(command):
        if word in ("pipelines.certify", "pipelines.sweep") and command[i - 1] == "-m":
            return word.split(".")[1], command[i + 1:]
        if word in ("certify", "sweep") and i and command[i - 1].endswith("epscert"):
            return word, command[i + 1:]
    return None


def check_job_command(job: str, args: list[str]) -> None:
    """The job flags parse and validate exactly as the CLI would (no pipeline is built)."""
    parser = (certify if job == "certify" else sweep).build_parser()
    parsed, pipeline_args = parser.parse_known_args(args)
    check_unknown_flags(pipeline_args, parser.long_flags())
    choice = choose_runner(pipeline_args)
    if job == "certify":
        certify.config_from_args(parsed)
        assert parsed.output is not None or choice.local
    else:
        path = parsed.spec or parsed.spec_flag
        if not path.startswith("gs://"):
            assert spec_mod.load(path)


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name != "lib.sh"],
                         ids=lambda p: str(p.relative_to(DEPLOY)))
def test_scripts_dry_run_to_valid_commands(script, tmp_path):
    commands = dry_run(script, tmp_path)
    assert commands, "the script printed no command"
    for command in commands:
        found = job_args(command)
        if found:
            check_job_command(*found)
        if command[:3] == ["gcloud", "dataflow", "flex-template"] and command[3] == "run":
            template = next(w for w in command if w.startswith("gs://") and w.endswith(".json"))
            job = "certify" if "certify" in template else "sweep"
            names = {p["name"] for p in load_json(DEPLOY / "dataflow" / f"{job}-metadata.json")["parameters"]}
            for i, word in enumerate(command):
                if word == "--parameters":
                    value = command[i + 1]
                    pairs = value[3:].split("~") if value.startswith("^~^") else value.split(",")
                    keys = {pair.split("=", 1)[0] for pair in pairs}
                    assert keys <= names | {"sdk_container_image"}, keys


def test_scheduled_launch_body_matches_the_sweep_template():
    body = load_json(DEPLOY / "schedule" / "launch_body.json")["launchParameter"]
    names = {p["name"] for p in load_json(DEPLOY / "dataflow" / "sweep-metadata.json")["parameters"]}
    assert set(body["parameters"]) <= names | {"sdk_container_image"}
    assert "{date}" in body["parameters"]["output"] and body["parameters"]["command"] == "sweep"
    assert body["containerSpecGcsPath"].endswith("/templates/epscert-sweep.json")


def test_nightly_spec_and_crontab():
    configs = spec_mod.load(str(DEPLOY / "schedule" / "nightly-spec.yaml"))
    assert len(configs) > 8  # 8 certified configurations plus their baselines
    for line in (DEPLOY / "schedule" / "crontab.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            fields = line.split()
            assert len(fields) > 5 and "deploy/schedule/nightly_sweep.sh" in line


def test_cloud_scheduler_honours_spec(tmp_path):
    # issue 25 row 11: SPEC= used to be ignored (the nightly spec was always uploaded)
    script = DEPLOY / "schedule" / "cloud_scheduler.sh"
    base = dict(os.environ, **DRY_ENV)
    for spec, uploaded in (("gs://demo-bucket/specs/grid.yaml", None),
                           (str(DEPLOY / "schedule" / "nightly-spec.yaml"), "gs://demo-bucket/specs/nightly-spec.yaml")):
        body = tmp_path / "body.json"
        proc = subprocess.run(["bash", str(script)], env=dict(base, SPEC=spec, BODY_OUT=str(body)),
                              capture_output=True, text=True, timeout=60, check=True)
        expected = uploaded or spec
        assert load_json(body)["launchParameter"]["parameters"]["spec"] == expected
        copies = [shlex.split(line) for line in proc.stdout.splitlines() if line.startswith("gcloud storage cp")]
        assert copies == ([] if uploaded is None else [["gcloud", "storage", "cp", spec, uploaded]])
    proc = subprocess.run(["bash", str(script)], env=dict(base, SPEC=str(tmp_path / "missing.yaml")),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "SPEC=" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_dataflow_dry_run_without_the_gcp_extra_says_so_in_one_line():
    import importlib

    try:
        importlib.import_module("apache_beam.runners.dataflow.internal.apiclient")
        pytest.skip("the gcp extra is installed here")
    except ImportError:
        pass
    env = {k: v for k, v in os.environ.items() if k != "DRY_RUN"}
    proc = subprocess.run(["bash", str(DEPLOY / "dataflow" / "dry_run.sh")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and ".[gcp]" in proc.stderr
    # the job itself refuses the same way, after the other checks and before building anything
    from pipelines import cli

    argv = ["certify", "--sigma", "1", "--steps", "10", "--output", "gs://b/x.parquet", "--runner", "DataflowRunner",
            "--project", "p", "--region", "r", "--temp_location", "gs://b/tmp", "--no-progress"]
    assert cli.main(argv) == 2


def test_deploy_readme_says_to_build_the_image_first():
    text = (DEPLOY / "README.md").read_text()
    assert "First, build the image" in text and "deploy/dataflow/build.sh" in text
    assert "deploy/dataflow/build.sh" in (DEPLOY / "schedule" / "README.md").read_text()
