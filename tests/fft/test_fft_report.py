"""A-priori grid choice, rows in the results schema, and the ``epscert fft`` command."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from epscert import schema
from epscert.fft.choose import choose_grid
from epscert.fft.compose import fft_bounds
from epscert.fft.grid import Grid
from epscert.fft.mechanisms import Gaussian, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.fft.plancherel import running_bounds
from epscert.fft.report import cli_fft, config_id, running_rows, to_rows
from epscert.config import Direction

SCHEDULE = Schedule.of([(SubsampledGaussian(0.05, 1.0), 20), (Gaussian(5.0), 2), (RandomizedResponse(0.6), 1)])


@pytest.mark.parametrize("target", [1e-2, 1e-3])
def test_apriori_grid_meets_its_target(target):
    sched = Schedule.of([(Gaussian(3.0), 4), (Gaussian(6.0), 6)])
    eps = [0.5, 1.0, 2.0]
    choice = choose_grid(sched, eps, target, Direction.REMOVE)
    assert not choice.capped
    assert choice.predicted_tail + choice.predicted_discretisation <= target
    b = fft_bounds(sched, eps, choice.grid, Direction.REMOVE).result
    assert np.all(b.width <= target)


def test_apriori_grid_is_capped_not_refused():
    choice = choose_grid(SCHEDULE, [1.0], 1e-9, Direction.BOTH, max_size=2**12)
    assert choice.capped and choice.grid.size == 2**12
    assert choice.predicted_discretisation > 1e-9
    with pytest.raises(ValueError, match="target_error"):
        choose_grid(SCHEDULE, [1.0], 0.0)


def test_rows_match_the_results_schema():
    res = fft_bounds(SCHEDULE, [0.5, 1.0], Grid(8.0, 2**12), Direction.BOTH)
    rows = to_rows(res)
    assert all(tuple(sorted(r)) == tuple(sorted(schema.COLUMNS)) for r in rows)
    table = schema.to_table(rows)
    assert table.num_rows == 3 * 2 * 2  # (remove, add, both) x ε x (upper, lower)
    by = {(r["direction"], r["epsilon"], r["method"]): r for r in rows}
    for d in ("remove", "add", "both"):
        up, lo = by[(d, 1.0, "fft_upper")], by[(d, 1.0, "fft_lower")]
        assert lo["delta_lower"] == lo["delta"] <= up["delta"] == up["delta_upper"]
        assert (up["guarantee"], lo["guarantee"]) == ("upper_bound", "lower_bound")
    r = rows[0]
    assert (r["sampler"], r["bound"], r["steps"], r["epochs"], r["sigma"]) == (
        "heterogeneous", "fft_koskela", 23, 1, 1.0)
    assert re.fullmatch(r"[0-9a-f]{16}", r["config_id"])


def test_running_rows_match_the_results_schema():
    grid = Grid(8.0, 2**12)
    run = running_bounds(SCHEDULE, [1.0], grid, Direction.REMOVE, [10, 23])
    table = schema.to_table(running_rows(SCHEDULE, grid, run))
    assert sorted(set(table.column("steps").to_pylist())) == [10, 23]


def test_config_id_is_stable_and_sensitive():
    grid = Grid(8.0, 2**12)
    a = config_id(SCHEDULE, grid, Direction.BOTH, [1.0])
    assert a == config_id(Schedule.from_dict(json.loads(json.dumps(SCHEDULE.to_dict()))), Grid(8, 4096), "both", [1])
    assert a != config_id(SCHEDULE, Grid(8.0, 2**13), Direction.BOTH, [1.0])
    assert a != config_id(SCHEDULE, grid, Direction.REMOVE, [1.0])


@pytest.fixture()
def schedule_file(tmp_path):
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(SCHEDULE.to_dict()))
    return path


def test_cli_prints_a_table(schedule_file, capsys):
    code = cli_fft(["--schedule", str(schedule_file), "--epsilons", "0.5,1", "--half-width", "8",
                    "--size", "4096", "--running-every", "10"])
    out = capsys.readouterr().out
    assert code == 0
    assert "| both | 1 |" in out and "running bracket" in out and "| 20 | 0.5 |" in out


def test_cli_apriori_grid(schedule_file, capsys):
    assert cli_fft(["--schedule", str(schedule_file), "--epsilons", "1", "--max-size", "4096"]) == 0
    assert "a-priori grid" in capsys.readouterr().out


@pytest.mark.parametrize("argv, field", [
    (["--epsilons", "1,a"], "--epsilons"),
    (["--epsilons", "9", "--half-width", "8", "--size", "4096"], "epsilons"),
    (["--half-width", "8"], "--size"),
    (["--half-width", "8", "--size", "4095"], "size"),
    (["--direction", "up"], "--direction"),
    (["--target-error", "2"], "target_error"),
    (["--size", "x"], "--size"),
])
def test_cli_bad_input_exits_2_with_one_line(schedule_file, capsys, argv, field):
    code = cli_fft(["--schedule", str(schedule_file), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err


def test_cli_bad_schedule_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"mechanisms": [{"mechanism": "subsampled_gaussian", "q": 0.1, "sigma": -1}]}')
    assert cli_fft(["--schedule", str(bad)]) == 2
    assert "mechanisms[0]" in capsys.readouterr().err
    bad.write_text("{not json")
    assert cli_fft(["--schedule", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert cli_fft(["--schedule", str(tmp_path / "missing.json")]) == 2
