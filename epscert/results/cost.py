"""What a certification will cost, estimated from its configuration before any work (issue 17 item 6).

Monte Carlo: single-core seconds from :func:`epscert.config.samplers.estimated_seconds` (a measured
cost per sampled coordinate) and the memory of one block of samples.

PLD grids (the Poisson ``pld_upper``/``pld_lower`` bracket and the multi-epoch sliced composition
behind ``cube_lower_bound``) cost in proportion to their size: a PMF on a grid of interval h over a loss
range L has L/h points.

- Poisson, one step (q = 1/T): the noise is cut at z ≈ 9.67 standard deviations (dp_accounting's
  e^-50; the bracket of :mod:`epscert.analytic.poisson` cuts at a z sized from δ, 5 to 9 for δ from
  1e-5 to 1e-15), so x ranges over [-zσ, 1 + zσ] and the loss ℓ(x) = log(1 - q + q·e^{(2x - 1)/(2σ²)})
  over L = log(1 - q + q·e^{a}) - log(1 - q + q·e^{-a}),  a = (1 + 2zσ)/(2σ²); points P = L/h.
  Measured on this machine for the tilted PLD bracket (issue 24: both directions and sides, two ε,
  building plus the compositions): 2e-6 to 1.1e-5 s and about 400 bytes per point P, under the
  :data:`POISSON_SECONDS_PER_POINT` and :data:`POISSON_BYTES_PER_POINT` kept from the dp_accounting
  measurement (2e-5 s, 185 to 700 bytes).
- Sliced composition (E > 1 epochs): the loss range L of the 600-slice one-epoch pair is read off
  the pair itself (milliseconds); the E-fold composition is at most :data:`SLICED_WIDTH_FACTOR` times
  wider than one epoch (dp_accounting truncates its tails: measured 2.0x at E = 2, 3.6x at E = 10,
  3.8x at E = 40), and costs :data:`SLICED_SECONDS_PER_POINT` s and :data:`SLICED_BYTES_PER_POINT`
  bytes per composed point and direction.

Example: σ = 0.05, T = 100, h = 1e-4 gives P = 3.9e6, about 78 s per PLD and 3.1 GB (measured: the
default baselines took 145 s and 2.9 GB); h = 1e-10 at σ = 1, T = 10 gives P = 8.0e10, tens of TB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from epscert.analytic.composed import sliced_pair
from epscert.config.samplers import estimated_seconds
from epscert.results.rows import row_count
from epscert.montecarlo.protocol import BLOCK_ELEMENTS
from epscert.config import EPSILON_BLOCK_BYTES, EPSILONS_PER_PASS, CertifyConfig, Method, Sampler

#: dp_accounting's default ``log_mass_truncation_bound`` of ``from_gaussian_mechanism`` (the sizing cut).
LOG_MASS_TRUNCATION = -50.0
#: Measured cost of one Poisson PLD grid point (both directions, built and composed): 1.0e-5 to 1.6e-5 s.
POISSON_SECONDS_PER_POINT = 2e-5
#: Measured peak memory per Poisson PLD grid point: 185 B (σ = 1) to 700 B (σ = 0.05).
POISSON_BYTES_PER_POINT = 800
#: The E-fold sliced composition is at most this many times wider than one epoch (measured <= 3.8).
SLICED_WIDTH_FACTOR = 4
#: Measured per composed point and direction: 0.8 µs and 72 bytes.
SLICED_SECONDS_PER_POINT = 1e-6
SLICED_BYTES_PER_POINT = 100
#: Memory of the process before any array (Python, numpy, scipy, dp_accounting): about 110 MB.
BASE_BYTES = 150 * 2**20
#: One sampled coordinate is held in about this many float64 arrays while a block is processed.
MC_ARRAYS = 4
#: Refuse any dp_accounting PLD estimated above this much memory (it would fail, or swap, after work).
MAX_PLD_BYTES = 8 * 2**30
#: Refuse default baselines estimated above this many single-core seconds (they are context, not the answer).
MAX_BASELINE_SECONDS = 120.0


@dataclass(frozen=True)
class Cost:
    """Estimated single-core seconds and peak bytes of some work (0 when none)."""

    seconds: float = 0.0
    peak_bytes: float = 0.0
    points: float = 0.0  # PLD grid points, for messages

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.seconds + other.seconds, max(self.peak_bytes, other.peak_bytes),
                    max(self.points, other.points))


def poisson_loss_range(sigma: float, steps: int) -> float:
    """Loss range L of one Poisson-subsampled Gaussian step as dp_accounting truncates it (docstring)."""
    z = float(norm.isf(math.exp(LOG_MASS_TRUNCATION)))
    a = (1.0 + 2.0 * z * sigma) / (2.0 * sigma * sigma)
    q = 1.0 / steps
    if q >= 1.0:
        return 2.0 * a
    log_keep = math.log1p(-q)
    return float(np.logaddexp(log_keep, math.log(q) + a) - np.logaddexp(log_keep, math.log(q) - a))


def poisson_pld_cost(sigma: float, steps: int, discretization: float) -> Cost:
    """Cost of one Poisson PLD (pessimistic or optimistic): P = L/h points (module docstring)."""
    points = poisson_loss_range(sigma, steps) / discretization
    return Cost(points * POISSON_SECONDS_PER_POINT, BASE_BYTES + points * POISSON_BYTES_PER_POINT, points)


def sliced_pld_cost(sigma: float, steps: int, epochs: int, discretization: float, eps_hint: float,
                    pair: str) -> Cost:
    """Cost of the E-fold sliced composition, both directions (module docstring)."""
    log_p, log_q = sliced_pair(sigma, steps, pair, eps_hint)
    keep = np.isfinite(log_p) & np.isfinite(log_q) & (log_p > -700.0) & (log_q > -700.0)
    losses = log_p[keep] - log_q[keep]
    span = float(losses.max() - losses.min()) if losses.size else 0.0
    points = span / discretization * min(epochs, SLICED_WIDTH_FACTOR)
    return Cost(2 * points * SLICED_SECONDS_PER_POINT, BASE_BYTES + points * SLICED_BYTES_PER_POINT, points)


#: A dense ε grid (issue 35 item 5, benchmarks/dense_grid_cli.py on a 2-core machine, T = 50, 14,001 ε):
#: beyond its first ε, the Poisson PLD bracket (pld_upper and pld_lower share one pass over the grid, so
#: each is charged the whole pass: an over-estimate when both run) costs about 0.35 ms per ε (the reads;
#: Chernoff bounds and saddle points are array passes), the cube lower bound about 0.14 ms per ε and
#: sampler (a coarse scan and the cells that can beat it), RDP 0.03 ms per ε.
POISSON_SECONDS_PER_EPSILON = 4e-4
CUBE_SECONDS_PER_EPSILON = 2e-4
RDP_SECONDS_PER_EPSILON = 5e-5
#: Per result row: measured 2e-5 to 5e-5 s; memory 3.9 KB a row at the peak (the CLI at 14,001 ε, 224,016
#: rows: 1,114 MiB against 254 MiB for one ε, benchmarks/dense_grid_cli.py), though the rows' Arrow table
#: is 0.3 KB a row: the rest is the printed rows' dicts and the runner's copies of the packed tables.
ROW_SECONDS = 5e-5
ROW_BYTES = 4000


def analytic_cost(config: CertifyConfig, method: Method) -> Cost:
    """Cost of one analytic method of ``config``: the PLD grids, plus the per-ε cost of a dense grid
    (closed forms and the Balls-and-Bins bracket count as 0 here)."""
    if config.sampler.is_persistent and method is not Method.CUBE_LOWER_BOUND:
        config = config.reduced()
    more = len(config.epsilons) - 1  # the grid's ε beyond the first
    if method in (Method.PLD_UPPER, Method.PLD_LOWER) and config.sampler is Sampler.POISSON:
        return poisson_pld_cost(config.sigma, config.steps, config.pld_discretization) + \
            Cost(more * POISSON_SECONDS_PER_EPSILON)
    if method is Method.RDP_UPPER:
        return Cost(more * RDP_SECONDS_PER_EPSILON)
    if method is Method.CUBE_LOWER_BOUND:
        sigma, epochs = config.sigma, config.epochs
        if config.sampler.is_persistent:
            sigma, epochs = sigma / math.sqrt(epochs), 1
        if epochs > 1:
            pair = "balls_and_bins" if config.sampler.base is Sampler.BALLS_AND_BINS else "shuffle"
            return sliced_pld_cost(sigma, config.steps, epochs, config.pld_discretization,
                                   max(config.epsilons) / epochs, pair)
        return Cost(more * CUBE_SECONDS_PER_EPSILON)
    return Cost()


def rows_cost(config: CertifyConfig, method: Method) -> Cost:
    """The result rows of one method (:func:`epscert.results.rows.row_count`): seconds and the bytes they
    hold (rows are kept in memory as one table, so their bytes add up over methods)."""
    rows = row_count(config, method)
    return Cost(rows * ROW_SECONDS, rows * ROW_BYTES)


#: Measured per sample and direction beyond its coordinates (drawing the event, the loss, the sums):
#: 9e-8 s in all for the one-coordinate deterministic importance sampler (2·10^6 samples, 0.36 CPU s).
SECONDS_PER_SAMPLE = 5e-8
#: Measured per sample, direction and ε of the grid (Y = (1 - e^{ε-ℓ})_+ and its exact sums): 1.25e-8 s.
SECONDS_PER_EPSILON = 1.2e-8


def monte_carlo_cost(config: CertifyConfig, method: Method) -> Cost:
    """Single-core seconds of all samples, and the memory of one block of samples (with its ε sums).

    Seconds: the coordinates (:func:`epscert.config.samplers.estimated_seconds`) plus, per sample and
    direction, :data:`SECONDS_PER_SAMPLE` and :data:`SECONDS_PER_EPSILON` per ε of the grid (they
    dominate when a sample has few coordinates, e.g. deterministic batches).
    """
    block_bytes = BLOCK_ELEMENTS * 8 * MC_ARRAYS * (1 if config.sampler.is_persistent else config.epochs)
    eps_bytes = min(len(config.epsilons), EPSILONS_PER_PASS) * EPSILON_BLOCK_BYTES
    per_sample = SECONDS_PER_SAMPLE + len(config.epsilons) * SECONDS_PER_EPSILON
    seconds = estimated_seconds(config, method) + config.samples * len(config.direction.parts()) * per_sample
    return Cost(seconds, BASE_BYTES + block_bytes + eps_bytes)


def config_cost(config: CertifyConfig) -> Cost:
    """Estimated cost of every resolved method of ``config``: seconds add up; memory is the largest
    method's, plus the rows of all methods (held together)."""
    total, rows = Cost(), Cost()
    for m in config.resolved:
        total = total + (monte_carlo_cost(config, m) if m.is_monte_carlo else analytic_cost(config, m))
        part = rows_cost(config, m)
        rows = Cost(rows.seconds + part.seconds, rows.peak_bytes + part.peak_bytes)
    return Cost(total.seconds + rows.seconds, total.peak_bytes + rows.peak_bytes, total.points)


#: Default cap of one certification (``certify(max_cpu_hours=...)``, ``epscert certify --max-cpu-hours``):
#: above an hour of one core the run is refused with its estimate, unless the caller raises the cap.
CERTIFY_MAX_CPU_HOURS = 1.0


def check_cpu_hours(cost: Cost, max_cpu_hours: float | None, subject: str, way_out: str) -> None:
    """ValueError naming ``max_cpu_hours`` when ``cost`` (estimated single-core time) is past the cap (None: no cap)."""
    if max_cpu_hours is None:
        return
    hours = cost.seconds / 3600
    if hours > max_cpu_hours:
        raise ValueError(
            f"{subject} needs about {hours:.3g} CPU-hours ({format_seconds(cost.seconds)} of one core; an estimate "
            f"from measured costs per sampled coordinate), more than max_cpu_hours={max_cpu_hours:g}; {way_out}")


def check_pld_memory(config: CertifyConfig, flag: str = "pld_discretization") -> None:
    """ValueError naming ``pld_discretization`` when a PLD of ``config`` would exceed :data:`MAX_PLD_BYTES`.

    ``flag`` is how the caller's user sets the discretisation (a CLI flag, a spec key), for the advice.
    """
    for m in config.resolved:
        if m.is_monte_carlo:
            continue
        cost = analytic_cost(config, m)
        if cost.peak_bytes > MAX_PLD_BYTES:
            coarsest = config.pld_discretization * cost.peak_bytes / MAX_PLD_BYTES
            raise ValueError(
                f"pld_discretization={config.pld_discretization:g} makes the {config.sampler.value} "
                f"{m.value} PLD about {cost.points:.2g} grid points, about {format_bytes(cost.peak_bytes)} "
                f"of memory (limit {format_bytes(MAX_PLD_BYTES)}, sigma={config.sigma:g}, steps={config.steps}); "
                f"use a coarser {flag} (>= {coarsest:.2g})")


def format_bytes(value: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value / 2**10:.3g} KiB"


def format_seconds(value: float) -> str:
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.3g} s"
