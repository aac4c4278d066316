"""A matrix mechanism's certificate after its first k iterations (Accountant(steps_done=k))."""

from __future__ import annotations

import math

import pytest

import epscert
from epscert.matrix.strategies import toeplitz_strategy

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


def test_fewer_iterations_than_a_cycle_are_the_subsampled_k_bin_run_and_say_so():
    acc = accountant(20)
    whole = acc.get_epsilon(DELTA)
    at_3 = acc.get_epsilon(DELTA, steps_done=3)
    assert at_3 < whole
    assert any("k < b" in n for n in acc.last_certificate.notes)
    k_bins = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(C_COL, 3), cycle_length=3,
                                method="comonotone_upper_bound").get_epsilon(DELTA * 5 / 3)
    assert at_3 == pytest.approx(math.log1p(3 / 5 * math.expm1(k_bins)), rel=1e-12) and at_3 >= math.log1p(
        3 / 5 * math.expm1(k_bins))
    assert acc.get_epsilon(DELTA, steps_done=0) == 0.0


@pytest.mark.parametrize("bad, needle", [(21, "steps_done must be <= the strategy's iterations=20"),
                                         (-1, "steps_done"), (2.5, "steps_done")])
def test_steps_done_beyond_the_strategy_is_refused(bad, needle):
    with pytest.raises(ValueError, match=needle):
        accountant(20).get_epsilon(DELTA, steps_done=bad)


def test_a_whole_run_certificate_used_mid_run_keeps_no_lower_bound():
    """Below one cycle the whole run's certificate answers; its lower bound and estimate belong to the
    whole run, not to the first k iterations, so they are dropped (review finding)."""
    acc = epscert.Accountant(noise_multiplier=3.0, strategy=toeplitz_strategy([1.0, 0.5, 0.25], 40), cycle_length=10,
                             samples=2000)
    lower, _, _ = acc.epsilon_interval(1e-3)
    assert lower > 0  # the whole run has a certified lower bound
    acc.get_epsilon(1e-3, steps_done=3)
    cert = acc.last_certificate
    assert cert.steps_done == 3 and cert.lower == 0.0 and cert.estimate is None and cert.lower_method is None


def test_the_bracket_asked_by_name_mid_cycle_takes_the_next_whole_cycle():
    """C = c·I with bracket_upper: a truncated run whose iterations b does not divide has no bracket, so
    the certificate of the first ceil(k/b)·b iterations (valid by post-processing) answers instead of an
    error; that is the truncated mechanism's own bracket at the next multiple of b, below the whole run's."""
    acc = epscert.Accountant(noise_multiplier=6.0, strategy=toeplitz_strategy([1.0], 200), cycle_length=20,
                             method="bracket_upper")
    whole = acc.get_epsilon(1e-5)
    at_150 = acc.get_epsilon(1e-5, steps_done=150)
    assert any("post-processing" in n for n in acc.last_certificate.notes)
    at_160 = acc.get_epsilon(1e-5, steps_done=160)  # b | 160: the truncated mechanism's own bracket
    assert at_150 == at_160 < whole
    fresh = epscert.Accountant(noise_multiplier=6.0, strategy=toeplitz_strategy([1.0], 160), cycle_length=20,
                               method="bracket_upper")
    assert at_160 == fresh.get_epsilon(1e-5)


def test_the_matrix_answer_names_no_bracket_limit_when_c_is_not_diagonal():
    from epscert.inverse.best import best_certificate  # noqa: PLC0415
    from epscert.config import CertifyConfig  # noqa: PLC0415

    config = CertifyConfig("balls_and_bins_persistent", 3.0, 10, (1.0,), samples=2000,
                           strategy=toeplitz_strategy([1.0, 0.5, 0.375, 0.3125], 200))
    cert = best_certificate(config, delta=1e-6)
    assert cert.finite and not any("PLD bracket" in n for n in cert.notes), cert.notes
