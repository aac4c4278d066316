"""Third-party log lines that are not epscert's, dropped where epscert triggers them.

Importing Apache Beam logs "apitools not found, and bigquery client libraries are not
available ..." on the root logger whenever the optional GCP client is missing, even for
``epscert --help``. It says nothing about the user's job (BigQuery is never used), so a filter
on the root logger drops exactly that message, matched by its opening words; every other
record, warnings and errors included, passes unchanged.
"""

from __future__ import annotations

import logging

#: Openings of the messages dropped (exact prefixes, nothing broader).
BEAM_IMPORT_NOISE = ("apitools not found, and bigquery client libraries are not available",)


class DropMessages(logging.Filter):
    """Drop records whose formatted message starts with one of ``prefixes``."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefixes)


def quiet_beam_import() -> None:
    """Install the filter on the root logger once (idempotent); call before importing Beam."""
    root = logging.getLogger()
    if not any(isinstance(f, DropMessages) and f.prefixes == BEAM_IMPORT_NOISE for f in root.filters):
        root.addFilter(DropMessages(BEAM_IMPORT_NOISE))
