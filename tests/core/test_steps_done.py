"""``Accountant.get_epsilon/get_delta(steps_done=)``: certificates after the first n steps (issue 25, item 1).

Independent values: the whole-epoch answers of ``Accountant(epochs=k)`` (whole epochs must be the
same number, mid-epoch ones must lie between them), and the brackets' own lower sides.
"""

from __future__ import annotations

import math

import pytest

import epscert
from epscert.allocation import AllocationBracket

SIGMA, T, DELTA = 1.0, 20, 1e-5


def whole(epochs: int, sampler: str = "balls_and_bins", **kw) -> float:
    return epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=epochs, sampler=sampler, **kw).get_epsilon(DELTA)


def test_whole_epochs_are_the_whole_epoch_accountants_answer():
    acc = epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=3)
    for k in (1, 2, 3):
        assert acc.get_epsilon(DELTA, steps_done=k * T) == whole(k)
        assert acc.last_certificate.bound == "allocation_bracket_upper" and acc.last_certificate.steps_done == k * T
    assert acc.get_epsilon(DELTA) == acc.get_epsilon(DELTA, steps_done=3 * T) == whole(3)


def test_mid_epoch_lies_between_the_whole_epochs_and_above_the_brackets_lower_side():
    acc = epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=3)
    values = {}
    for n in (1, 10, 19, 21, 30, 39):
        values[n] = acc.get_epsilon(DELTA, steps_done=n)
        cert = acc.last_certificate
        assert cert.bound == "allocation_prefix_bracket_upper" and cert.steps_done == n
        assert f"after {n} steps" in cert.summary()
        full, r = divmod(n, T)
        assert (whole(full) if full else 0.0) < values[n] <= whole(full + 1), n
        if n in (10, 30):  # the prefix bracket's lower side: the value is an upper bound, and tight
            lower = AllocationBracket(SIGMA, T, full + 1, steps_done=n).epsilon(DELTA)[1]
            assert lower <= values[n] <= lower * (1 + 1e-3)
    assert list(values.values()) == sorted(values.values())  # ε grows with the steps taken
    # and δ(ε) too, with the mid-epoch δ between the whole epochs' δ
    d = [acc.get_delta(0.3, steps_done=n) for n in (T, T + 10, 2 * T)]
    assert d[0] < d[1] < d[2]
    assert acc.last_certificate.quantity == "delta"


def test_no_step_is_epsilon_zero_and_bad_step_counts_are_refused():
    acc = epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=2)
    assert acc.get_epsilon(DELTA, steps_done=0) == 0.0 and acc.get_delta(0.5, steps_done=0) == 0.0
    assert acc.last_certificate.bound == "no_steps"
    for bad in (-1, 2 * T + 1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="steps_done"):
            acc.get_epsilon(DELTA, steps_done=bad)


@pytest.mark.parametrize("sampler", ["deterministic", "shuffle",
                                     pytest.param("poisson", marks=pytest.mark.slow)])  # Poisson PLD ~8 s
def test_other_samplers_mid_epoch_take_the_epoch_in_progress(sampler):
    acc = epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=2, sampler=sampler)
    mid = acc.get_epsilon(DELTA, steps_done=T + 5)
    assert mid == whole(2, sampler)
    assert any("post-processing" in note for note in acc.last_certificate.notes)


def test_persistent_runs_mid_cycle_lie_between_the_whole_cycles():
    acc = epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=3, sampler="balls_and_bins_persistent")
    first = acc.get_epsilon(DELTA, steps_done=T // 2)
    assert acc.last_certificate.bound == "allocation_prefix_bracket_upper"
    assert first < whole(1, "balls_and_bins_persistent") == whole(1)  # one cycle: nothing reused yet
    cycles = {k: whole(k, "balls_and_bins_persistent") for k in (1, 2)}
    mid = [acc.get_epsilon(DELTA, steps_done=T + r) for r in (1, 3, T // 2, T - 1)]
    assert acc.last_certificate.bound == "allocation_prefix_bracket_upper"  # the bins seen twice or once
    assert cycles[1] < mid[0] and mid == sorted(mid) and mid[-1] <= cycles[2]


def test_a_named_method_keeps_its_method_mid_epoch():
    acc = epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=2, method="pld_upper")  # the old name
    assert acc.get_epsilon(DELTA, steps_done=T + 5) < acc.get_epsilon(DELTA, steps_done=2 * T)
    assert acc.last_certificate.method == "bracket_upper"
    exact = epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=2, sampler="deterministic", method="exact")
    assert exact.get_epsilon(DELTA, steps_done=T + 5) == exact.get_epsilon(DELTA) and math.isfinite(
        exact.get_epsilon(DELTA))


def test_a_longer_run_used_mid_epoch_keeps_no_lower_bound():
    """Poisson mid-epoch takes the epoch in progress whole: its upper bound holds for the prefix, its
    Monte Carlo estimate (and any lower bound) of the longer run do not, so they are dropped."""
    acc = epscert.Accountant(noise_multiplier=1.0, steps=10, epochs=2, sampler="poisson", method="naive",
                             samples=3000)
    acc.get_epsilon(0.05, steps_done=20)
    assert acc.last_certificate.estimate is not None  # whole epochs: the run's own estimate
    acc.get_epsilon(0.05, steps_done=15)
    cert = acc.last_certificate
    assert cert.lower == 0.0 and cert.estimate is None and cert.lower_method is None
