"""Fourier accountant for heterogeneous compositions: the public names in one place.

The implementation lives in the :mod:`epscert.fft` package (grid placement, spectra,
direct composition, Plancherel running bound, a-priori grid, rows and command line);
see :mod:`epscert.fft.compose` for the inequalities the bracket rests on.

    >>> from epscert.fft_accountant import Grid, Schedule, SubsampledGaussian, fft_bounds
    >>> sched = Schedule.of([(SubsampledGaussian(q=0.01, sigma=1.0), 100)])
    >>> b = fft_bounds(sched, [1.0], Grid(half_width=8.0, size=2**14)).result
    >>> bool(b.lower[0] <= b.upper[0])
    True
"""

from epscert.fft.choose import GridChoice, choose_grid
from epscert.fft.compose import Bracket, FFTBounds, fft_bounds
from epscert.fft.grid import Grid, GridPLD, Rounding
from epscert.fft.mechanisms import Gaussian, Mechanism, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.fft.plancherel import RunningBounds, running_bounds
from epscert.fft.report import cli_fft, config_id, running_rows, to_rows

__all__ = [
    "Bracket", "FFTBounds", "Gaussian", "Grid", "GridChoice", "GridPLD", "Mechanism", "RandomizedResponse",
    "Rounding", "RunningBounds", "Schedule", "SubsampledGaussian", "choose_grid", "cli_fft", "config_id",
    "fft_bounds", "running_bounds", "running_rows", "to_rows",
]
