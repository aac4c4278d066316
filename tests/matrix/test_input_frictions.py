"""Issue 35 item 3: smaller input frictions of the matrix mechanism.

- an empty field in c_col ('1,,2') is refused, naming the value, on every entry point (it was read as [1, 2]);
- a dense ``.npy`` is checked in blocks, with no full-size temporary (an all-zero 10^4 x 10^4 file took
  2.5 GB before being refused; ``python -m benchmarks.dense_load`` prints the figures), and gives the
  matrix and SHA-256 that ``np.load`` gives;
- a dense C with a zero mode leaked numpy's ``RuntimeWarning: divide by zero`` (epscert.matrix.values,
  the importance thresholds' division by √v_j, and the kriging G / diag(G)): such a mode is now refused
  before any arithmetic (epscert.matrix.checks.check_gram), and dense strategies with zero columns but
  no zero mode run every method with warnings turned into errors.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import epscert
from epscert.config.mechanism import read_c_col
from epscert.matrix.strategies import check_c_col, dense, dense_strategy, toeplitz_strategy
from epscert.matrix.strategies.dense import load_dense
from pipelines import cli, spec as spec_mod

ROOT = Path(__file__).resolve().parents[2]
EMPTY_FIELDS = ["1,,2", "1,2,", ",1", "1;;2", "1, ,2"]
NEEDLE = "c_col has an empty field"


@pytest.mark.parametrize("text", EMPTY_FIELDS)
def test_an_empty_c_col_field_is_refused_by_every_reader(text):
    for read in (read_c_col, check_c_col, lambda t: toeplitz_strategy(t, 10)):
        with pytest.raises(ValueError) as err:
            read(text)
        assert NEEDLE in str(err.value) and repr(text) in str(err.value), str(err.value)


def test_separators_without_an_empty_field_still_read():
    """Independent value: the numbers written out."""
    np.testing.assert_array_equal(read_c_col("1, 2"), [1.0, 2.0])
    np.testing.assert_array_equal(read_c_col("1 2;3"), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(check_c_col("1;0.5"), [1.0, 0.5])


def test_a_c_col_file_with_an_empty_field_is_refused_naming_it(tmp_path):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("# first column\n1, 0.5\n0.25\n")
    bad.write_text("1, 0.5,\n0.25\n")
    np.testing.assert_array_equal(read_c_col(str(good)), [1.0, 0.5, 0.25])
    with pytest.raises(ValueError, match=f"{NEEDLE}.*path={str(bad)!r}"):
        read_c_col(str(bad))


@pytest.mark.parametrize("command", ["certify", "epsilon"])
def test_the_cli_refuses_an_empty_field_in_one_line(capsys, command):
    noise = ["--sigma", "1"] if command == "certify" else ["--noise-multiplier", "1", "--delta", "1e-3"]
    assert cli.main([command, *noise, "--c-col", "1,,2", "--iterations", "12", "--cycle-length", "4",
                     "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and "\n" not in err and NEEDLE in err and "c_col='1,,2'" in err, err


def test_a_sweep_spec_refuses_an_empty_field(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text('sigma: [1.5]\nc_col: ["1,,0.5"]\niterations: 12\ncycle_length: 4\nmethod: [naive]\n'
                    "samples: 100\nepsilons: [1]\n")
    with pytest.raises(spec_mod.SpecError, match=NEEDLE):
        spec_mod.load(str(path))
    assert cli.main(["sweep", str(path), "--output", str(tmp_path / "out"), "--dry-run"]) == 2
    assert NEEDLE in capsys.readouterr().err


def test_an_all_zero_dense_file_is_refused_without_a_full_size_array(tmp_path, monkeypatch):
    """Peak traced memory (numpy's allocations included) while refusing an all-zero 1000 x 1000 file (8 MB):
    the blocks only. Checking the whole matrix at once needs at least its float64 copy (8 MB)."""
    n = 1000
    path = tmp_path / "zeros.npy"
    np.save(path, np.zeros((n, n)))
    monkeypatch.setattr(dense, "READ_BLOCK_BYTES", 2**16)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with pytest.raises(ValueError, match="must have a positive entry, got all zeros"):
            dense_strategy(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * n * n / 8, peak


def _reference(path) -> tuple[np.ndarray, str]:
    matrix = np.ascontiguousarray(np.load(path), dtype=np.float64)
    return matrix, hashlib.sha256(matrix.tobytes()).hexdigest()


@pytest.mark.parametrize("layout", ["C", "F", ">f8", "int32", "float32"])
def test_blockwise_reading_gives_the_matrix_and_hash_of_np_load(tmp_path, monkeypatch, layout):
    monkeypatch.setattr(dense, "READ_BLOCK_BYTES", 8 * 37 * 5)  # blocks of 5 rows (37 x 37): a ragged last block
    rng = np.random.default_rng(3)
    matrix = np.tril(rng.integers(0, 9, size=(37, 37)).astype(np.float64))
    matrix[:, 11:19] = 0.0  # zero blocks in between are skipped, not lost
    stored = {"C": matrix, "F": np.asfortranarray(matrix), ">f8": matrix.astype(">f8"),
              "int32": matrix.astype(np.int32), "float32": matrix.astype(np.float32)}[layout]
    path = tmp_path / "c.npy"
    np.save(path, stored)
    got, digest = load_dense(str(path))
    want, want_digest = _reference(path)
    np.testing.assert_array_equal(got, want)
    assert digest == want_digest and got.flags.c_contiguous and not got.flags.writeable


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("entry, value, needle", [
    ((30, 2), np.nan, "must be finite, got C[30,2]=nan"),
    ((21, 21), -1.0, "must be >= 0 (the dominating pair needs C >= 0), got C[21,21]=-1.0"),
    ((3, 30), 2.0, "must be lower-triangular, got C[3,30]=2.0 above the diagonal"),
])
def test_a_bad_entry_in_any_block_is_named(tmp_path, monkeypatch, order, entry, value, needle):
    monkeypatch.setattr(dense, "READ_BLOCK_BYTES", 8 * 37 * 4)
    matrix = np.tril(np.ones((37, 37)))
    matrix[entry] = value
    path = tmp_path / "c.npy"
    np.save(path, matrix if order == "C" else np.asfortranarray(matrix))
    with pytest.raises(ValueError) as err:
        load_dense(str(path))
    assert needle in str(err.value), str(err.value)


def _zero_column_strategy(tmp_path, column):
    matrix = np.tril(np.ones((6, 6)))
    matrix[:, column] = 0.0
    path = tmp_path / f"zero{column}.npy"
    np.save(path, matrix)
    return dense_strategy(path)


@pytest.mark.filterwarnings("error")
def test_a_dense_zero_mode_is_refused_with_no_warning(tmp_path):
    """C = lower ones with column 5 zero, b = 6: mode 5 is C e_5 = 0 (the issue's case: δ was right, but
    numpy's divide-by-zero reached stderr). Now refused first, with warnings as errors."""
    strategy = _zero_column_strategy(tmp_path, 5)
    for method in ["tilted", "naive", "importance", "conditional", "comonotone_upper_bound"]:
        with pytest.raises(ValueError, match="mode 5 of the strategy .* has zero norm"):
            epscert.certify(sampler="balls_and_bins_persistent", sigma=2.0, steps=6, epsilons=[1.0], method=method,
                            samples=200, strategy=strategy)
    with pytest.raises(ValueError, match="has zero norm"):
        epscert.Accountant(noise_multiplier=2.0, strategy=strategy, cycle_length=6)


def test_the_cli_refuses_a_dense_zero_mode_with_no_warning(tmp_path):
    strategy = _zero_column_strategy(tmp_path, 5)
    done = subprocess.run([sys.executable, "-W", "error", "-m", "pipelines.cli", "epsilon", "--noise-multiplier",
                           "2", "--delta", "1e-3", "--strategy-matrix", strategy.path, "--cycle-length", "6",
                           "--samples", "200", "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    err = done.stderr.strip()
    assert done.returncode == 2 and "\n" not in err and "Warning" not in err and "zero norm" in err, done.stderr


@pytest.mark.filterwarnings("error")
def test_zero_columns_without_a_zero_mode_run_every_method_without_warnings(tmp_path):
    """Column 5 zero with b = 3: mode 2 = C e_2 + C e_5 = C e_2 != 0. Each method's rows lie in [0, 1] with
    lower <= upper, and no numpy warning is raised (they would be errors here)."""
    strategy = _zero_column_strategy(tmp_path, 5)
    methods = ["tilted", "naive", "importance", "conditional", "comonotone_upper_bound", "independent_lower_bound"]
    rows = epscert.certify(sampler="balls_and_bins_persistent", sigma=1.0, steps=3, epochs=2, epsilons=[0.0, 1.0, 5.0],
                           method=methods, samples=300, strategy=strategy).to_pylist()
    assert {r["method"] for r in rows} == set(methods)
    for r in rows:
        lo, hi = r["delta_lower"], r["delta_upper"]
        assert all(x is None or 0.0 <= x <= 1.0 for x in (lo, hi)), r
        assert lo is None or hi is None or lo <= hi, r
