"""Issue 23 item 3: how a matrix mechanism is described (epscert.config.mechanism), and bad input refused first."""

from __future__ import annotations

import numpy as np
import pytest

from epscert.config import mechanism
from epscert.config.mechanism import mechanism_settings, read_c_col, strategy_from
from epscert.matrix.strategies import toeplitz_strategy


def test_c_col_from_numbers_text_and_files(tmp_path):
    want = [1.0, 0.5, 0.25]
    assert read_c_col(want).tolist() == want
    assert read_c_col("1, 0.5,0.25").tolist() == want
    assert read_c_col(np.array(want)).tolist() == want
    np.save(tmp_path / "c.npy", np.array(want))
    assert read_c_col(str(tmp_path / "c.npy")).tolist() == want
    (tmp_path / "c.txt").write_text("# first column of C\n1\n0.5 0.25\n")
    assert read_c_col(str(tmp_path / "c.txt")).tolist() == want
    assert read_c_col(tmp_path / "c.txt").tolist() == want  # a PathLike too


@pytest.mark.parametrize("value, needle", [
    ("1,-0.5", "c_col[1]=-0.5"),
    ("1,nan", "finite"),
    ("1,1e999", "finite"),
    ("0,0", "positive entry"),
    ("1,two", "c_col='1,two'"),
    ("１,2", "numbers separated by commas"),  # full-width digit: float() would read it
    ("", "numbers separated by commas"),
    ("missing.npy", "c_col file not readable: path='missing.npy'"),
    ("no/such/dir/c.txt", "not readable"),
])
def test_bad_c_col_is_refused_naming_it(value, needle):
    with pytest.raises(ValueError) as err:
        read_c_col(value)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_c_col_beyond_the_float_range():
    with pytest.raises(ValueError, match="finite"):
        read_c_col([1, 10**400])


def test_bad_c_col_files(tmp_path, monkeypatch):
    np.save(tmp_path / "square.npy", np.eye(3))
    with pytest.raises(ValueError, match=r"1-D array, got shape=\(3, 3\)"):
        read_c_col(str(tmp_path / "square.npy"))
    np.save(tmp_path / "text.npy", np.array(["a", "b"]))
    with pytest.raises(ValueError, match="real numbers"):
        read_c_col(str(tmp_path / "text.npy"))
    (tmp_path / "junk.npy").write_bytes(b"not a numpy file")
    with pytest.raises(ValueError, match="not a readable .npy array"):
        read_c_col(str(tmp_path / "junk.npy"))
    (tmp_path / "utf.txt").write_bytes("1, 0.5, ½".encode())
    with pytest.raises(ValueError, match="ASCII"):
        read_c_col(str(tmp_path / "utf.txt"))
    with pytest.raises(ValueError, match="directory"):
        read_c_col(str(tmp_path) + "/")
    (tmp_path / "big.txt").write_text("1,0.5\n" * 10)
    monkeypatch.setattr(mechanism, "MAX_C_COL_FILE_BYTES", 20)
    with pytest.raises(ValueError, match="c_col file is too large: 60 bytes, limit 20"):
        read_c_col(str(tmp_path / "big.txt"))


def test_strategy_from_the_three_fields(tmp_path):
    assert strategy_from() is None
    st = strategy_from("1,0.5", iterations=10)
    assert st == toeplitz_strategy([1.0, 0.5], 10)
    dense = np.tril(np.ones((6, 6)))
    np.save(tmp_path / "C.npy", dense)
    st = strategy_from(strategy_matrix=str(tmp_path / "C.npy"))
    assert st.kind == "dense" and st.iterations == 6 and np.array_equal(st.matrix(), dense)
    for kwargs, needle in [({"c_col": "1"}, "iterations is required with c_col"),
                           ({"iterations": 5}, "iterations applies to a matrix mechanism"),
                           ({"c_col": "1", "strategy_matrix": "C.npy", "iterations": 5}, "not both"),
                           ({"c_col": "1", "iterations": 0}, "iterations=0"),
                           ({"c_col": "1", "iterations": 2.5}, "iterations=2.5"),
                           ({"strategy_matrix": str(tmp_path / "C.npy"), "iterations": 5}, "iterations must match"),
                           ({"strategy_matrix": 3}, "strategy_matrix=3")]:
        with pytest.raises(ValueError, match=needle):
            strategy_from(**kwargs)


def test_a_strategy_implies_its_sampler_and_cycle_length():
    st = toeplitz_strategy([1.0], 12)
    assert mechanism_settings(st, cycle_length=4) == ("balls_and_bins_persistent", 4)
    assert mechanism_settings(st, steps=4) == ("balls_and_bins_persistent", 4)
    assert mechanism_settings(st, steps=4, cycle_length=4, sampler="balls_and_bins_persistent",
                              mechanism="BandMF") == ("balls_and_bins_persistent", 4)
    assert mechanism_settings(None, steps=7) == ("balls_and_bins", 7)
    assert mechanism_settings(None, sampler="poisson", steps=7, mechanism="dpsgd") == ("poisson", 7)


@pytest.mark.parametrize("strategy, kwargs, needle", [
    (True, {"cycle_length": 4, "sampler": "poisson"}, "sampler='poisson' conflicts with a strategy"),
    (True, {"cycle_length": 4, "sampler": "balls_and_bins"}, "leave the sampler out"),
    (True, {}, "cycle_length is required with a strategy"),
    (True, {"cycle_length": 13}, "cycle_length must be <= iterations=12, got cycle_length=13"),
    (True, {"cycle_length": 0}, "cycle_length=0"),
    (True, {"steps": 3, "cycle_length": 4}, "give it once"),
    (True, {"cycle_length": 4, "mechanism": "dpsgd"}, "mechanism='dpsgd' conflicts"),
    (True, {"cycle_length": 4, "mechanism": "ftrl"}, "mechanism must be one of dpsgd, bandmf"),
    (False, {"cycle_length": 4}, "cycle_length applies to a matrix mechanism"),
    (False, {"steps": 4, "mechanism": "bandmf"}, "needs a strategy"),
])
def test_conflicts_are_refused_naming_the_field(strategy, kwargs, needle):
    st = toeplitz_strategy([1.0, 0.5], 12) if strategy else None
    with pytest.raises(ValueError, match=needle):
        mechanism_settings(st, **kwargs)
