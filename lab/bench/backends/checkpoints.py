"""Checkpoints of a parameter-server job, written and found by the chief.

A checkpoint is ``tf.train.Checkpoint(model, optimizer)`` written to
``<dir>/ckpt-<global step>`` (the step in the name, so a restarted chief knows where it
resumes without reading a variable back); each write prints an ``event`` record with its
duration and size, the data of CM-DARE's checkpoint-duration model.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from lab.metrics.records import emit

_NAME = re.compile(r"^ckpt-(\d+)\.index$")


def latest(directory: str) -> tuple[int, str] | None:
    """(global step, prefix) of the newest complete checkpoint in ``directory``, if any."""
    found = []
    for path in Path(directory).glob("ckpt-*.index"):
        m = _NAME.match(path.name)
        if m:
            found.append((int(m.group(1)), str(path.with_suffix(""))))
    return max(found) if found else None


def size_of(prefix: str) -> int:
    """Bytes of every file of the checkpoint ``prefix`` (index and data shards)."""
    p = Path(prefix)
    return sum(f.stat().st_size for f in p.parent.glob(p.name + ".*"))


def write(ckpt: Any, directory: str, step: int, **fields: Any) -> None:
    """Write a checkpoint at ``step`` and print its ``checkpoint`` event record."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    prefix = str(Path(directory) / f"ckpt-{step}")
    start = time.perf_counter()
    ckpt.write(prefix)
    seconds = time.perf_counter() - start
    emit("event", event="checkpoint", step=step, seconds=round(seconds, 6),
         bytes=size_of(prefix), **fields)  # fmt: skip


def restore(ckpt: Any, directory: str, **fields: Any) -> int:
    """Restore the newest checkpoint (if any); its global step, 0 without one."""
    found = latest(directory)
    if found is None:
        return 0
    step, prefix = found
    start = time.perf_counter()
    ckpt.read(prefix)
    seconds = time.perf_counter() - start
    emit("event", event="restored", step=step, seconds=round(seconds, 6),
         bytes=size_of(prefix), **fields)  # fmt: skip
    return step
