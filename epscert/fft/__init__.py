"""Fourier accountant for heterogeneous compositions (Koskela, Jälkö, Prediger, Honkela).

Certified lower <= δ(ε) <= upper for a list of (mechanism, count): grid placement by
connect-the-dots (upper) and merging (lower) (``grid``, ``pairs``, ``gaussmix``), one tilted FFT
product per side (``tilt``, ``compose``), the running δ of a schedule by Plancherel
(``plancherel``), the a-priori choice of L and n (``choose``), rows and the command line
(``report``). May import numpy, scipy and the ground floor (names, checks, schema) only.

    >>> from epscert.fft import Grid, Schedule, SubsampledGaussian, fft_bounds
    >>> sched = Schedule.of([(SubsampledGaussian(q=0.01, sigma=1.0), 100)])
    >>> b = fft_bounds(sched, [1.0], Grid(half_width=8.0, size=2**14)).result
    >>> bool(b.lower[0] <= b.upper[0])
    True
"""

from epscert.fft.choose import GridChoice, choose_grid
from epscert.fft.compose import Bracket, FFTBounds, fft_bounds
from epscert.fft.grid import Grid, Rounding
from epscert.fft.pairs import GridMasses
from epscert.fft.mechanisms import Gaussian, Mechanism, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.fft.plancherel import RunningBounds, running_bounds
from epscert.fft.report import cli_fft, config_id, running_rows, to_rows

__all__ = [
    "Bracket", "FFTBounds", "Gaussian", "Grid", "GridChoice", "GridMasses", "Mechanism", "RandomizedResponse",
    "Rounding", "RunningBounds", "Schedule", "SubsampledGaussian", "choose_grid", "cli_fft", "config_id",
    "fft_bounds", "running_bounds", "running_rows", "to_rows",
]
