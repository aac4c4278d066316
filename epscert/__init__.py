"""epscert: certified (ε, δ) for DP-SGD batch samplers (numerical core; no Beam here).

Main entry point: :func:`certify`. See SPEC.md for the mathematics and the README for
the results schema.
"""

from epscert._version import __version__
from epscert.accountant import Accountant
from epscert.api import certify, certify_config
from epscert.params import CertifyConfig, Direction, Method, Sampler
from epscert.schema import RESULTS_SCHEMA

__all__ = [
    "Accountant", "RESULTS_SCHEMA", "CertifyConfig", "Direction", "Method", "Sampler", "__version__",
    "certify", "certify_config",
]
