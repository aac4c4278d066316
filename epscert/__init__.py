"""epscert: certified (ε, δ) for DP-SGD batch samplers (numerical core; no Beam here).

Main entry points: :func:`certify` and :class:`Accountant`. See SPEC.md for the
mathematics and the README for the layout and the results schema.
"""

import importlib as _importlib
import sys as _sys

from epscert._version import __version__
from epscert import config, fft
from epscert.accountant import Accountant, BatchSampler
from epscert.analytic import hidden_state
from epscert.analytic.hidden_state import HiddenStateConfig, compare_at_delta, hidden_state_rdp
from epscert.api import certify, certify_config
from epscert.config import CertifyConfig, Direction, Method, Sampler
from epscert.fft import Grid, Schedule, choose_grid, fft_bounds, running_bounds
from epscert.matrix import strategies
from epscert.schema import RESULTS_SCHEMA

#: Import paths of earlier releases that the README showed, kept working: the Fourier
#: accountant's facade was folded into :mod:`epscert.fft`, the inverse questions moved into
#: :mod:`epscert.inverse`; the house of round two put the strategies into the matrix mechanism's
#: room, the last-iterate bound among the closed forms, ``params`` into the configuration floor
#: (:mod:`epscert.config` re-exports every name it had) and ``BatchSampler`` beside the Accountant.
OLD_MODULE_PATHS = {
    "epscert.fft_accountant": fft,
    "epscert.epsilon_at_delta": _importlib.import_module("epscert.inverse.epsilon_at_delta"),
    "epscert.calibrate": _importlib.import_module("epscert.inverse.calibrate"),
    "epscert.strategies": strategies,
    "epscert.hidden_state": hidden_state,
    "epscert.params": config,
    "epscert.mechanism": _importlib.import_module("epscert.config.mechanism"),
    "epscert.batch_sampler": _importlib.import_module("epscert.accountant"),
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
