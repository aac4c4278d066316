"""epscert: certified (ε, δ) for DP-SGD batch samplers (numerical core; no Beam here).

Main entry points: :func:`certify` and :class:`Accountant`. See SPEC.md for the
mathematics and the README for the layout and the results schema.
"""

import importlib as _importlib
import sys as _sys

from epscert._version import __version__
from epscert import fft, hidden_state, strategies
from epscert.accountant import Accountant
from epscert.api import certify, certify_config
from epscert.batch_sampler import BatchSampler
from epscert.fft import Grid, Schedule, choose_grid, fft_bounds, running_bounds
from epscert.hidden_state import HiddenStateConfig, compare_at_delta, hidden_state_rdp
from epscert.params import CertifyConfig, Direction, Method, Sampler
from epscert.schema import RESULTS_SCHEMA

#: Import paths of earlier releases that the README showed, kept working: the Fourier
#: accountant's facade was folded into :mod:`epscert.fft`, and the inverse questions moved
#: into :mod:`epscert.inverse`.
OLD_MODULE_PATHS = {
    "epscert.fft_accountant": fft,
    "epscert.epsilon_at_delta": _importlib.import_module("epscert.inverse.epsilon_at_delta"),
    "epscert.calibrate": _importlib.import_module("epscert.inverse.calibrate"),
}
for _name, _module in OLD_MODULE_PATHS.items():
    _sys.modules.setdefault(_name, _module)
    globals()[_name.rpartition(".")[2]] = _module

__all__ = [
    "Accountant", "BatchSampler", "Grid", "HiddenStateConfig", "RESULTS_SCHEMA", "Schedule", "choose_grid",
    "compare_at_delta", "fft", "fft_accountant", "fft_bounds", "hidden_state", "hidden_state_rdp",
    "running_bounds", "CertifyConfig", "Direction", "Method", "Sampler", "__version__",
    "certify", "certify_config", "strategies",
]
