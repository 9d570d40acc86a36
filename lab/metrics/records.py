"""The record lines ranks print on stdout (DESIGN.md, contract 1), and their parsing.

A record is one JSON object on one line behind ``@lab ``. Kinds used across the lab:
``header`` (model, parameters, backend, world size, rank, device), ``step`` (step,
samples, seconds), ``summary``, ``metric`` (name, value, step), ``event``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, NoReturn, TextIO

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


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process without the interpreter's teardown.

    For a rank whose records are all out: the teardown is where ranks failed. A DDP rank
    aborted while torch destroyed its gloo objects ("terminate called without an active
    exception", SIGABRT), and a TensorFlow chief's coordinator threads or a server's gRPC
    threads would keep a finished task alive.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
