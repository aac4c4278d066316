"""Makes ``benchmarks`` (JAX Privacy and Opake wrappers) importable however pytest was started."""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
