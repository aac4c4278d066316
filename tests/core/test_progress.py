"""Progress everywhere (issue 17, item 4): one line format, a throttled meter, callbacks from the API."""

from __future__ import annotations

import dataclasses
import io

import pytest

import epscert
from epscert.compare import compare_rows
from epscert.inverse.calibrate import bisect_steps, calibrate_sigma
from epscert.config import CertifyConfig
from epscert.results.tables import certify_config
from epscert.progress import ProgressMeter, ProgressUpdate, eta_line
from transforms.progress import ProgressReporter


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_line_format_and_eta():
    assert eta_line("sampling", 250, 1000, "samples", 3.0) == \
        "epscert: sampling  25.0% (250/1000 samples), 3.0 s elapsed, ETA 9 s"
    assert "ETA ? s" in eta_line("sampling", 0, 10, "samples", 0.0)
    update = ProgressUpdate("x", 3, 4, "evaluations", 6.0)
    assert update.fraction == 0.75 and update.eta == pytest.approx(2.0)


def test_meter_throttles_but_always_reports_the_end():
    clock, seen = Clock(), []
    meter = ProgressMeter(seen.append, 100, "sampling", interval=2.0, clock=clock)
    meter.add(10)  # first update: reported
    clock.now += 1.0
    meter.add(10)  # within the interval: not reported
    clock.now += 1.5
    meter.add(10)
    meter.add(70)  # the end: always reported
    assert [u.done for u in seen] == [10, 30, 100] and seen[-1].fraction == 1.0
    ProgressMeter(None, 10, "silent").add(10)  # no callback: nothing, no error


def test_certify_progress_line_is_the_shared_format():
    stream = io.StringIO()
    reporter = ProgressReporter("eta", 100, stream=stream)
    reporter.samples(100)
    line = stream.getvalue().strip()
    assert line.startswith("epscert: sampling 100.0% (100/100 samples), ") and line.endswith("ETA 0 s")


def test_bisect_steps_counts_the_bisection():
    lo, hi, tol, count = 0.05, 3.0, 0.01, 0
    while hi / lo > 1 + tol:  # the loop of calibrate's bisection
        lo = (lo * hi) ** 0.5
        count += 1
    assert bisect_steps(0.05, 3.0, 0.01) == count


@pytest.mark.slow  # the Poisson σ for comparison (dp_accounting PLD) takes ~15 s
def test_calibrate_reports_every_evaluation():
    seen = []
    config = CertifyConfig("balls_and_bins", 1.0, 1, (1.5,), methods=("importance",), samples=4000)
    # each evaluation computes the deterministic exact δ (T = 1: the same curve), so the test stays fast
    exact = lambda cfg: certify_config(dataclasses.replace(cfg, sampler="deterministic", methods=("exact",)))  # noqa: E731
    result = calibrate_sigma(config, 1.5, 1e-2, run=exact, progress=seen.append)
    assert len(seen) == len(result.search_sigmas) + 2  # every search evaluation, the certificate, Poisson σ
    assert [u.done for u in seen] == list(range(1, len(seen) + 1))
    assert all(u.total >= u.done for u in seen) and seen[-1].fraction == 1.0
    assert "certificate" in seen[-2].stage and "Poisson" in seen[-1].stage
    assert all(u.unit == "evaluations" for u in seen)


def test_get_epsilon_reports_sampling():
    seen = []
    acc = epscert.Accountant(noise_multiplier=1.0, steps=20, samples=2000, method="naive", progress=seen.append)
    acc.get_epsilon(1e-2)
    assert seen and seen[0].stage.startswith("sampling") and any(u.fraction == 1.0 for u in seen)


@pytest.mark.slow  # the analytic baselines of the comparison take ~10 s
def test_compare_reports_sampling():
    seen = []
    config = CertifyConfig("balls_and_bins", 1.0, 4, (1.0, 2.0), methods=("naive",), samples=2000)
    compare_rows(config, (1e-2,), fft=False, progress=seen.append)
    stages = {u.stage for u in seen}
    assert "sampling (δ(ε) grid)" in stages and "sampling (coarse ε grid)" in stages
