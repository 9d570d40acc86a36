"""What each emulated host used while a run went on: CPU from its cgroup, bytes on its link.

A run observer that launch() attaches to every run on an emulated cluster. Every
``interval`` seconds it samples, per host, the CPU seconds its processes used (the
cgroup's ``cpuacct.usage`` or v2 ``cpu.stat`` usage where the machine accounts CPU per
cgroup, else the sum of ``/proc/<pid>/stat`` times of the processes in it), the quota's
periods and throttled periods (``cpu.stat``: how often the host ran out of its share), and
the bytes through its veth (``/sys/class/net/<veth>/statistics``; on the bridge side, so
``tx`` is what the host received and ``rx`` what it sent). It writes them to
``hostload.jsonl`` in the run directory: one line naming each host's share, link and veth,
then one line per host per sample.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.metrics.hostload import HOSTS_FILE

log = logging.getLogger(__name__)
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stat_fields(text: str | None) -> dict[str, int]:
    out = {}
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def cpu_seconds(group: Path, seen: dict[int, float] | None = None) -> float:
    """CPU seconds used in ``group``: its own accounting where there is one, else the sum
    over its processes (all their threads), remembering in ``seen`` what processes that
    have since ended had used, so that the total never goes down."""
    usage = _read(group / "cpuacct.usage")
    if usage and usage.strip().isdigit():
        return int(usage) / 1e9
    stat = _stat_fields(_read(group / "cpu.stat"))
    if "usage_usec" in stat:
        return stat["usage_usec"] / 1e6
    seen = {} if seen is None else seen
    for pid in (_read(group / "cgroup.procs") or "").split():
        fields = (_read(Path(f"/proc/{pid}/stat")) or ")").rsplit(")", 1)[1].split()
        with contextlib.suppress(IndexError, ValueError):
            seen[int(pid)] = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
    return sum(seen.values())


def sample(
    hosts: Mapping[str, Mapping[str, Any]], seen: dict[str, dict[int, float]] | None = None
) -> list[dict[str, Any]]:
    """One sample per host (see the module docstring); ``seen`` carries each host's
    per-process CPU from sample to sample."""
    now = time.time()
    seen = {} if seen is None else seen
    out = []
    for name, info in hosts.items():
        group = Path(info["cgroup"])
        stat = _stat_fields(_read(group / "cpu.stat"))
        net = Path("/sys/class/net") / info["veth"] / "statistics"
        rx, tx = _read(net / "rx_bytes"), _read(net / "tx_bytes")
        out.append(
            {
                "time": round(now, 4),
                "host": name,
                "cpu_seconds": round(cpu_seconds(group, seen.setdefault(name, {})), 4),
                "periods": stat.get("nr_periods"),
                "throttled": stat.get("nr_throttled"),
                "rx_bytes": int(rx) if rx else None,
                "tx_bytes": int(tx) if tx else None,
            }
        )
    return out


class HostMonitor:
    """Samples an emulated cluster's hosts during one run (a RunObserver)."""

    def __init__(self, emulation: Mapping[str, Any], interval: float = 0.5) -> None:
        self.hosts = dict(emulation.get("hosts") or {})
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._path: Path | None = None
        self._seen: dict[str, dict[int, float]] = {}

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        if not self.hosts:
            return
        self._path = Path(run_dir) / HOSTS_FILE
        head = {"kind": "hosts", "hosts": self.hosts}
        self._path.write_text(json.dumps(head) + "\n")
        self._thread = threading.Thread(target=self._loop, name="lab-host-monitor", daemon=True)
        self._thread.start()

    def on_line(self, line: Any) -> None:
        return None

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._write()  # the last sample, after the ranks ended

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._write()

    def _write(self) -> None:
        if self._path is None:
            return
        try:
            lines = "".join(json.dumps(s) + "\n" for s in sample(self.hosts, self._seen))
            with open(self._path, "a", encoding="utf-8") as fh:
                fh.write(lines)
        except OSError as e:  # the host is being taken down; the run goes on
            log.debug("host sample failed: %s", e)
