"""Shared setup of the soundness suite.

Makes ``tests.reference`` importable however pytest was started (``python -m pytest`` from
the repository root puts the root on ``sys.path``; plain ``pytest`` may not), and prints the
coverage table collected by ``test_coverage.py`` when ``EPSCERT_SOUNDNESS_REPORT`` names a file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from . import report  # noqa: E402  (after the path fix)


def pytest_terminal_summary(terminalreporter) -> None:
    path = os.environ.get("EPSCERT_SOUNDNESS_REPORT")
    if not path or not report.ROWS:
        return
    text = report.markdown()
    Path(path).write_text(text)
    terminalreporter.write_sep("-", "soundness coverage table")
    terminalreporter.write(text)
