"""Whether a process recorded earlier is still the same live process.

A pid alone cannot say: pids are reused. A process is named by its pid, the clock tick
after boot at which it started (``/proc/PID/stat`` field 22) and the boot's id, so a
process that ended, or a machine that rebooted, is told apart from a new process that
happens to get the same pid. Used for run manifests (a run whose launching process died
is ``orphaned``) and for emulated clusters' records (lab.cluster.emulation.state).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def boot_id() -> str:
    """This boot's random id ("" where the kernel does not say)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """Clock ticks after boot at which ``pid`` started; None when there is no such
    process (or it is a zombie: it has ended, only its exit status is left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def identity(pid: int | None = None) -> dict[str, Any]:
    """What names ``pid`` (default: this process) for ``ended``: pid, start time, boot id
    and machine name."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start_time": start_time(pid), "boot_id": boot_id(),
            "host": platform.node()}  # fmt: skip


def ended(ident: Mapping[str, Any] | None) -> bool | None:
    """True when the process ``ident`` names has ended; False while it runs; None when
    this machine cannot tell (another machine's process, or an incomplete identity)."""
    if not isinstance(ident, Mapping):
        return None
    pid, started = ident.get("pid"), ident.get("start_time")
    if not isinstance(pid, int) or not isinstance(started, int):
        return None
    if ident.get("host") not in (None, platform.node()):
        return None
    if ident.get("boot_id") and ident.get("boot_id") != boot_id():
        return True  # the machine rebooted since
    return start_time(pid) != started
