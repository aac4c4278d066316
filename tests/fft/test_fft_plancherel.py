"""Plancherel running bracket: equals the direct path at every checkpoint; validation."""

from __future__ import annotations

import numpy as np
import pytest

from epscert.analytic.deterministic import gaussian_delta
from epscert.fft.compose import fft_bounds
from epscert.fft.grid import Grid
from epscert.fft.mechanisms import Gaussian, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.fft.plancherel import running_bounds
from epscert.config import Direction

SCHEDULE = Schedule.of([(SubsampledGaussian(0.1, 1.0), 7), (Gaussian(4.0), 2), (RandomizedResponse(0.6), 3),
                        (SubsampledGaussian(0.1, 1.0), 5), (SubsampledGaussian(0.2, 1.5), 6)])
GRID = Grid(8.0, 2**13)
EPS = [0.25, 1.0, 2.0]


def _prefix(schedule: Schedule, steps: int) -> Schedule:
    out, left = [], steps
    for mech, count in schedule.entries:
        if left == 0:
            break
        out.append((mech, min(count, left)))
        left -= min(count, left)
    return Schedule.of(out)


@pytest.mark.parametrize("direction", [Direction.REMOVE, Direction.ADD, Direction.BOTH])
def test_running_equals_direct_at_every_checkpoint(direction):
    checkpoints = [1, 4, 7, 9, 12, 15, 23]
    run = running_bounds(SCHEDULE, EPS, GRID, direction, checkpoints)
    assert list(run.steps) == checkpoints
    for t, step in enumerate(checkpoints):
        direct = fft_bounds(_prefix(SCHEDULE, step), EPS, GRID, direction).result
        # both are certified brackets of the same δ (the running one reads every checkpoint with
        # the whole schedule's tilt, by Parseval): they overlap and agree closely
        assert np.all(run.lower[t] <= direct.upper) and np.all(direct.lower <= run.upper[t])
        np.testing.assert_allclose(run.upper[t], direct.upper, rtol=1e-3, atol=1e-10)
        np.testing.assert_allclose(run.lower[t], direct.lower, rtol=1e-3, atol=1e-10)


def test_running_every_step_is_consistent_with_monotonicity():
    """True δ grows with each composed step: lower at t never exceeds upper at t' >= t."""
    run = running_bounds(SCHEDULE, EPS, GRID, Direction.BOTH)
    assert run.steps.tolist() == list(range(1, SCHEDULE.steps + 1))
    running_max_lower = np.maximum.accumulate(run.lower, axis=0)
    assert np.all(running_max_lower <= run.upper + 1e-15)


def test_running_gaussian_matches_closed_form_each_step():
    sched = Schedule.of([(Gaussian(3.0), 10)])
    run = running_bounds(sched, [0.5, 1.0], Grid(10.0, 2**12), Direction.REMOVE, [1, 2, 5, 10])
    for t, k in enumerate(run.steps.tolist()):
        exact = gaussian_delta(3.0 / np.sqrt(k), [0.5, 1.0])
        assert np.all(run.lower[t] <= exact) and np.all(exact <= run.upper[t])


@pytest.mark.parametrize("checkpoints, match", [([0], "checkpoints"), ([24], "checkpoints"), ([], "checkpoints"),
                                                ([1.5], "checkpoints")])
def test_checkpoint_validation(checkpoints, match):
    with pytest.raises(ValueError, match=match):
        running_bounds(SCHEDULE, EPS, GRID, Direction.BOTH, checkpoints)
