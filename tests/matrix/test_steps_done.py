"""A matrix mechanism's certificate after its first k iterations (Accountant(steps_done=k))."""

from __future__ import annotations

import pytest

import epscert
from epscert.strategies import toeplitz_strategy

C_COL = [1.0, 0.6, 0.3]
DELTA = 1e-5


def accountant(iterations: int) -> epscert.Accountant:
    return epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(C_COL, iterations), cycle_length=5,
                              method="comonotone_upper_bound")


def test_a_toeplitz_prefix_is_the_truncated_strategy_and_never_above_the_run():
    acc = accountant(20)
    whole = acc.get_epsilon(DELTA)
    for k in (5, 12, 17):
        mid = acc.get_epsilon(DELTA, steps_done=k)
        assert acc.last_certificate.steps_done == k
        assert mid == accountant(k).get_epsilon(DELTA)  # C[:k, :k] is the same c_col over k iterations
        assert mid <= whole
    assert acc.get_epsilon(DELTA, steps_done=12) < acc.get_epsilon(DELTA, steps_done=17) < whole
    assert acc.get_epsilon(DELTA, steps_done=20) == whole


def test_fewer_iterations_than_a_cycle_take_the_whole_run_and_say_so():
    acc = accountant(20)
    whole = acc.get_epsilon(DELTA)
    assert acc.get_epsilon(DELTA, steps_done=3) == whole
    assert any("post-processing" in n for n in acc.last_certificate.notes)
    assert acc.get_epsilon(DELTA, steps_done=0) == 0.0


@pytest.mark.parametrize("bad, needle", [(21, "steps_done must be <= the strategy's iterations=20"),
                                         (-1, "steps_done"), (2.5, "steps_done")])
def test_steps_done_beyond_the_strategy_is_refused(bad, needle):
    with pytest.raises(ValueError, match=needle):
        accountant(20).get_epsilon(DELTA, steps_done=bad)
