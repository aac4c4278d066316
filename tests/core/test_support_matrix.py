"""The support matrix (issue 25 item 8): one table in the core, the docs page generated from it, and
the guarantees it states checked against what the code's rows actually say."""

from __future__ import annotations

import pathlib

import pytest

import epscert
from epscert import support
from epscert.inverse.best import CANDIDATES
from epscert.config import MATRIX_METHODS, SUPPORTED_METHODS, CertifyConfig, Method, Sampler
from epscert.matrix.strategies import toeplitz_strategy

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "support_matrix.md"

#: The ``guarantee`` column values a row of each guarantee of the table may carry (schema vocabulary).
ROW_GUARANTEES = {
    "exact": {"exact"},
    "bracket": {"upper_bound", "lower_bound"},
    "upper_bound": {"upper_bound"},
    "mc_ucb": {"mc_upper_confidence"},
    "lower_bound": {"lower_bound"},
    "conjecture": {"conjecture"},
}


def test_the_docs_page_is_the_generated_one():
    assert PAGE.read_text(encoding="utf-8") == support.render_markdown(), \
        "docs/support_matrix.md is stale: python -m pipelines.support_matrix > docs/support_matrix.md"


def test_the_readme_links_the_page():
    assert "docs/support_matrix.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_validation_and_candidates_read_the_same_table():
    for sampler in Sampler:
        assert SUPPORTED_METHODS[sampler] == {Method.AUTO} | {Method(m) for m in support.methods_for(sampler.value)}
        assert CANDIDATES[sampler] == tuple(Method(m) for m in support.CANDIDATES[("dpsgd", sampler.value)])
    assert MATRIX_METHODS == {Method.AUTO} | {Method(m) for m in support.methods_for(support.MATRIX_SAMPLER, "bandmf")}
    assert {r.mechanism for r in support.TABLE} == set(support.MECHANISMS)
    assert {m for m, _ in support.CANDIDATES} <= set(support.MECHANISMS)
    assert {r.guarantee for r in support.TABLE} <= set(support.GUARANTEES) == set(support.LABELS)


@pytest.mark.parametrize("sampler", [s.value for s in Sampler])
def test_what_the_table_leaves_out_is_refused(sampler):
    supported = set(support.methods_for(sampler)) | {"auto"}
    for method in Method:
        if method.value in supported or support.ALIASES.get((sampler, method.value)) in supported:
            continue
        with pytest.raises(ValueError, match="does not apply to sampler|applies to the matrix mechanism only"):
            CertifyConfig(sampler, 1.0, 4, (1.0,), methods=(method.value,), samples=10)


@pytest.mark.parametrize("row", support.TABLE, ids=lambda r: f"{r.mechanism}-{r.sampler}-{r.method}")
def test_each_row_states_the_guarantee_its_numbers_carry(row):
    # run the method on a tiny configuration: every row it returns must carry a guarantee the table allows
    kw = dict(sampler=row.sampler, sigma=1.0, steps=4, epochs=1)
    if row.mechanism == "bandmf":  # C = I where only C = c·I applies (the bracket), b = 1 for exact
        c_col = [1.0] if row.method.startswith("bracket") else [1.0, 0.5]
        kw.update(strategy=toeplitz_strategy(c_col, 8), steps=1 if row.method == "exact" else 4, epochs=1)
    table = epscert.certify(**kw, epsilons=[1.0, 2.0], method=row.method, samples=200, seed=3)
    got = {r["guarantee"] for r in table.to_pylist()}
    assert got and got <= ROW_GUARANTEES[row.guarantee], (row, got)
    if row.guarantee == "bracket":  # each side is the side it says
        side = "upper_bound" if row.method.endswith("upper") else "lower_bound"
        assert got == {side}


def test_old_bracket_names_are_aliases_for_balls_and_bins_only():
    config = CertifyConfig("balls_and_bins", 1.0, 4, (1.0,), methods=("pld_upper", "PLD_LOWER"))
    assert config.methods == (Method.BRACKET_UPPER, Method.BRACKET_LOWER)
    poisson = CertifyConfig("poisson", 1.0, 4, (1.0,), methods=("pld_upper",))
    assert poisson.methods == (Method.PLD_UPPER,)  # dp_accounting's PLD keeps its name
    with pytest.raises(ValueError, match="does not apply"):
        CertifyConfig("poisson", 1.0, 4, (1.0,), methods=("bracket_upper",))


@pytest.mark.parametrize("method", sorted(m.value for m in Method if m not in MATRIX_METHODS
                                           and support.ALIASES.get((support.MATRIX_SAMPLER, m.value)) is None))
def test_what_the_bandmf_rows_leave_out_is_refused(method):
    with pytest.raises(ValueError, match="does not apply to a matrix mechanism"):
        CertifyConfig(support.MATRIX_SAMPLER, 1.0, 4, (1.0,), methods=(method,), samples=10,
                      strategy=toeplitz_strategy([1.0, 0.5], 8))
