"""epscert: certified (ε, δ) for DP-SGD batch samplers (numerical core; no Beam here).

Main entry point: :func:`certify`. See SPEC.md for the mathematics and the README for
the results schema.
"""

from epscert._version import __version__
from epscert import fft_accountant, hidden_state
from epscert.accountant import Accountant
from epscert.fft_accountant import Grid, Schedule, choose_grid, fft_bounds, running_bounds
from epscert.hidden_state import HiddenStateConfig, compare_at_delta, hidden_state_rdp
from epscert.api import certify, certify_config
from epscert.params import CertifyConfig, Direction, Method, Sampler
from epscert.schema import RESULTS_SCHEMA

__all__ = [
    "Accountant", "Grid", "HiddenStateConfig", "RESULTS_SCHEMA", "Schedule", "choose_grid",
    "compare_at_delta", "fft_accountant", "fft_bounds", "hidden_state", "hidden_state_rdp",
    "running_bounds", "CertifyConfig", "Direction", "Method", "Sampler", "__version__",
    "certify", "certify_config",
]
