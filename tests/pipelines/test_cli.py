"""The command line: --help, exit status 2 on bad input, table and JSON output, module entry points."""

from __future__ import annotations

import json
import re
import sys

import pyarrow.parquet as pq
import pytest

from epscert.api import certify_config
from pipelines import certify, cli, sweep
from pipelines.certify import build_parser
from pipelines.output import print_json
from pipeline_helpers import run_module, without_wall

TINY = ["--sampler", "balls_and_bins", "--sigma", "0.8", "--steps", "10", "--epsilons", "1,2",
        "--method", "importance", "--samples", "500", "--shards", "2", "--seed", "4", "--no-progress"]

#: The flags the issue asks for, all of which --help must document.
CERTIFY_FLAGS = ["--sampler", "--sigma", "--steps", "--epochs", "--epsilons", "--method", "--samples",
                 "--error-prob", "--seed", "--direction", "--orders", "--output", "--format", "--shards",
                 "--no-baselines"]


def test_certify_help_lists_every_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["certify", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for flag in set(CERTIFY_FLAGS) | set(build_parser().long_flags()):
        assert re.search(rf"{re.escape(flag)}\b", text), flag
    assert "--runner" in text  # says where unknown flags go


def test_sweep_help_lists_every_flag(capsys):
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--help"])
    text = capsys.readouterr().out
    for flag in sweep.build_parser().long_flags() + ["SPEC"]:
        assert flag in text, flag


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_command_resolves_and_has_help(command, capsys):
    assert callable(cli.resolve(command))
    try:
        code = cli.main([command, "--help"])
    except SystemExit as stop:  # argparse's own --help exit
        code = stop.code
    assert code == 0 and "usage:" in capsys.readouterr().out


def test_top_level_usage(capsys):
    assert cli.main(["--help"]) == 0
    assert "certify" in capsys.readouterr().out
    assert cli.main([]) == 2
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


@pytest.mark.parametrize("args, needle", [
    (["--sigma", "-1"], "sigma"),
    (["--sigma", "abc"], "sigma='abc'"),
    (["--sampler", "urn"], "sampler='urn'"),
    (["--epsilons", "1,x"], "epsilons='1,x'"),
    (["--samples", "0"], "samples"),
    (["--seed", "-3"], "seed"),
    (["--error-prob", "2"], "error_prob"),
    (["--direction", "up"], "direction='up'"),
    (["--method", "importance", "--epochs", "2"], "epochs=2"),
    (["--method", "naive", "--orders", "1,5,1"], "orders"),
    (["--method", "order_stats", "--orders", "2,5,1"], "orders"),
    (["--shards", "0"], "shards='0'"),
    (["--shards", "100", "--samples", "10"], "shards"),
    (["--format", "xml"], "xml"),
    (["--output", "/nonexistent-epscert-dir/r.parquet"], "output"),
    (["--output", "/"], "output"),
    (["--runner=DaskRunner"], "DaskRunner"),
    (["--runner=DataflowRunner", "--output", "local.parquet"], "gs:// path"),
    (["--max-batch-size", "40"], "dataset_size and max_batch_size go together"),
    (["--sampler", "shuffle", "--method", "naive", "--dataset-size", "100", "--max-batch-size", "40"], "truncated"),
    (["--dataset-size", "many", "--max-batch-size", "40"], "dataset_size='many'"),
    (["--sample", "10"], "--samples"),
])
def test_bad_certify_input_exits_2_naming_the_field(capsys, args, needle):
    # sigma and steps are required (issue 17): a valid pair first, the bad value after it wins
    assert cli.main(["certify", "--no-baselines", "--sigma", "1", "--steps", "10", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err


def test_bad_input_in_a_subprocess_has_no_traceback():
    proc = run_module("pipelines.cli", "certify", "--sigma", "0", "--steps", "10", "--no-baselines")
    assert proc.returncode == 2
    assert "sigma" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("epscert certify: error:")


def test_sweep_spec_given_once(tmp_path, small_spec, capsys):
    assert cli.main(["sweep", "--output", str(tmp_path)]) == 2
    assert "give the sweep spec once" in capsys.readouterr().err
    assert cli.main(["sweep", str(small_spec), "--spec", str(small_spec), "--output", str(tmp_path)]) == 2
    assert cli.main(["sweep", "--spec", str(small_spec), "--output", str(tmp_path / "o"), "--no_progress"]) == 0
    assert "4 configurations" in capsys.readouterr().out


def test_unwritable_sweep_output_is_refused(tmp_path, small_spec, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli.main(["sweep", str(small_spec), "--output", str(blocker / "out")]) == 2
    assert "output" in capsys.readouterr().err


def test_json_format_parses_and_matches_the_api(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    assert cli.main(["certify", *TINY, "--no-baselines", "--format", "json", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines]
    config = certify.prepare([*TINY, "--no-baselines"]).config
    expected = certify_config(config).to_pylist()
    assert without_wall(rows) == without_wall(sorted(expected, key=lambda r: (r["method"], r["direction"], r["epsilon"])))
    assert without_wall(pq.read_table(out).to_pylist()) == without_wall(rows)


def test_json_output_is_strict(capsys):
    print_json([{"a": float("inf"), "b": 1.5, "c": None}], sys.stdout)
    assert json.loads(capsys.readouterr().out) == {"a": "inf", "b": 1.5, "c": None}


def test_table_format_shows_rows_and_baselines(capsys):
    assert cli.main(["certify", *TINY]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split()[:7] == ["sampler", "sigma", "steps", "epochs", "method", "direction", "epsilon"]
    body = lines[2:]
    methods = {line.split()[4] for line in body}
    assert {"importance", "exact", "pld_upper", "pld_lower", "cube_lower_bound"} <= methods
    assert len(body) == 6 * 2  # the 'both' rows: importance, exact and 4 baselines, at 2 epsilons
    assert {line.split()[5] for line in body} == {"both"}
    assert "per-direction rows not shown" in captured.err
    assert "epscert: sampling" not in captured.err  # --no-progress


def test_table_shows_every_row_of_a_single_direction(capsys):
    assert cli.main(["certify", *TINY, "--direction", "remove", "--no-baselines"]) == 0
    body = capsys.readouterr().out.splitlines()[2:]
    assert len(body) == 2 and {line.split()[5] for line in body} == {"remove"}


def test_progress_line_on_stderr(capsys):
    assert cli.main(["certify", *[a for a in TINY if a != "--no-progress"], "--no-baselines"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"epscert: sampling 100\.0% \(1000/1000 samples\).*ETA", err), err


def test_python_m_entry_points(tmp_path, small_spec):
    proc = run_module("pipelines.certify", *TINY, "--no-baselines", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert len([json.loads(line) for line in proc.stdout.splitlines()]) == 6
    proc = run_module("pipelines.sweep", str(small_spec), "--output", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    assert "4 configurations (0 reused, 4 computed), 36 rows" in proc.stdout


def test_with_shards_auto_uses_core_auto_shards():
    job = certify.prepare(["--sigma", "0.35", "--steps", "1000", "--method", "importance", "--samples",
                           "1000000", "--shards", "auto"])
    from epscert.results.scaling import auto_shards
    assert job.config.shards == auto_shards(job.config, job.config.resolved[0]) >= 1
    assert certify.prepare(["--sigma", "1", "--steps", "1000", "--shards", "7"]).config.shards == 7


def test_printing_from_the_table_matches_printing_the_rows(capsys):
    # issue 35 item 5: certify prints from the Arrow table (only the shown rows become dicts); the output is
    # print_rows' own, for a configuration with 'both' rows, one without (a single direction), and JSON
    import io  # noqa: PLC0415

    from epscert.config import CertifyConfig  # noqa: PLC0415
    from epscert.schema import to_table  # noqa: PLC0415
    from pipelines.output import print_rows, print_table_file  # noqa: PLC0415

    both = certify_config(CertifyConfig("balls_and_bins", 1.0, 10, (1.0, 2.0), methods=("order_stats", "cube_lower_bound"),
                                        samples=200)).to_pylist()
    one = certify_config(CertifyConfig("poisson", 1.0, 10, (1.0, 3.0), methods=("naive",), samples=200,
                                       direction="remove")).to_pylist()
    rows = both + one
    for fmt in ("table", "json"):
        a, b = io.StringIO(), io.StringIO()
        print_rows(rows, fmt, a, {rows[0]["config_id"]})
        err_rows = capsys.readouterr().err
        print_table_file(to_table(rows), fmt, b, {rows[0]["config_id"]})
        assert a.getvalue() == b.getvalue() and capsys.readouterr().err == err_rows
        assert a.getvalue().count("\n") >= 2
