"""Helpers for the pipeline tests: row comparison and subprocess runs of this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def without_wall(rows):
    """Rows with ``wall_seconds`` zeroed: every other column must match bit for bit."""
    return [dict(r, wall_seconds=0.0) for r in rows]


def subprocess_env() -> dict:
    """Environment in which `python -m pipelines...` and Beam worker processes import this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


def run_module(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=subprocess_env(),
                          capture_output=True, text=True, timeout=timeout)
