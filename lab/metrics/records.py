"""The record lines ranks print on stdout (DESIGN.md, contract 1), and their parsing.

A record is one JSON object on one line behind ``@lab ``. Kinds used across the lab:
``header`` (model, parameters, backend, world size, rank, device), ``step`` (step,
samples, seconds), ``summary``, ``metric`` (name, value, step), ``event``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

PREFIX = "@lab "


def format_record(kind: str, **fields: Any) -> str:
    """The text of one record line (without the newline)."""
    return PREFIX + json.dumps({"kind": kind, **fields}, separators=(", ", ": "), default=str)


def emit(kind: str, stream: TextIO | None = None, **fields: Any) -> None:
    """Print one record and flush, so it leaves the rank at once (live views rely on it)."""
    fields.setdefault("time", round(time.time(), 6))
    out = stream or sys.stdout
    out.write(format_record(kind, **fields) + "\n")
    out.flush()


def parse_record(text: str) -> dict[str, Any] | None:
    """The record in one line of output, or None if the line carries no record.

    The prefix may stand after a launcher's tag, so it is searched, not anchored.
    """
    at = text.find(PREFIX)
    if at < 0:
        return None
    try:
        obj = json.loads(text[at + len(PREFIX) :])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "kind" in obj else None
