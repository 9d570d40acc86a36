"""Where a run's noise comes from: each emulated host's CPU use and throttling, and the
machine's load from everything outside the hosts, sampled while the run goes.

A host with 0.4 of a core that wants more is *throttled*: the kernel stops it for the
rest of each quota period (lab.cluster.emulation.cgroups.PERIOD_US) once its quota is
spent. How often that happened, and how busy the machine was with other work, says
whether a slow run was slow because of the system under test or because of its
surroundings. Every ``interval`` seconds one line per host
and one for the machine go to ``hosts.jsonl`` in the run directory (figures since the
run started; ``t`` seconds since then, ``time`` the epoch, as in step records, so CPU
can be matched to steps); when the run ends the totals go into manifest.json as
``hosts_cpu``.

cgroup v1: ``cpu.stat`` (nr_periods, nr_throttled, throttled_time in ns) and
``cpuacct.usage`` (ns; in the cpuacct twin when that controller is mounted apart). v2:
``cpu.stat`` (usage_usec, nr_periods, nr_throttled, throttled_usec).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lab.cluster.emulation.cgroups import accounting_dir

log = logging.getLogger(__name__)
FILE_NAME = "hosts.jsonl"
FIELDS = ("cpu_s", "nr_periods", "nr_throttled", "throttled_s")


def _keyed(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2}
    except (OSError, ValueError):
        return {}


def read_group(group: str | Path) -> dict[str, float]:
    """A cgroup's CPU seconds used and its throttling counters, cumulative since it was
    made (v1 or v2, told from the files present). Missing figures are NaN."""
    group = Path(group)
    stat = _keyed(group / "cpu.stat")
    nan = float("nan")
    if "usage_usec" in stat:  # v2
        cpu_s, throttled = stat["usage_usec"] / 1e6, stat.get("throttled_usec", 0) / 1e6
    else:
        twin = accounting_dir(group) or group
        try:
            cpu_s = int((twin / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            cpu_s = nan
        throttled = stat["throttled_time"] / 1e9 if "throttled_time" in stat else nan
    return {
        "cpu_s": cpu_s,
        "nr_periods": stat.get("nr_periods", nan),
        "nr_throttled": stat.get("nr_throttled", nan),
        "throttled_s": throttled,
    }


def read_machine() -> dict[str, float]:
    """The 1-minute load average and the CPU seconds all cores spent busy since boot."""
    out = {"load1": float("nan"), "busy_s": float("nan")}
    with contextlib.suppress(OSError, ValueError, IndexError):
        out["load1"] = float(Path("/proc/loadavg").read_text().split()[0])
    with contextlib.suppress(OSError, ValueError, IndexError):
        ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        out["busy_s"] = (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    return out


class HostSampler:
    """Samples ``groups`` ({host: cgroup dir}) every ``interval`` s into ``path`` on a
    thread; ``stop()`` returns the totals (see ``summary``)."""

    def __init__(
        self, groups: Mapping[str, str], path: Path, quotas: Mapping[str, Any] | None = None,
        interval: float = 0.5,
    ) -> None:  # fmt: skip
        self.groups, self.path, self.interval = dict(groups), Path(path), interval
        self.quotas = dict(quotas or {})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="host-sampler", daemon=True)
        self._load: list[float] = []

    def start(self) -> HostSampler:
        self._t0 = time.monotonic()
        self._first = {h: read_group(g) for h, g in self.groups.items()}
        self._machine0 = read_machine()
        self._last = (self._t0, self._machine0["busy_s"], self._run_cpu(self._first))
        self._thread.start()
        return self

    def _run_cpu(self, now: Mapping[str, Mapping[str, float]]) -> float:
        return sum(v["cpu_s"] for v in now.values() if v["cpu_s"] == v["cpu_s"])

    def sample(self) -> list[dict[str, Any]]:
        """One line per host and one for the machine, as written to hosts.jsonl."""
        t = time.monotonic()
        now = {h: read_group(g) for h, g in self.groups.items()}
        since, epoch = round(t - self._t0, 3), round(time.time(), 3)  # epoch: as step records
        lines: list[dict[str, Any]] = [
            {"t": since, "time": epoch, "host": h, **self._since_start(now, h)} for h in self.groups
        ]
        machine = read_machine()
        t0, busy0, run0 = self._last
        run = self._run_cpu(now)
        dt = max(t - t0, 1e-9)
        busy_cores = (machine["busy_s"] - busy0) / dt
        outside = busy_cores - (run - run0) / dt
        rates = {"busy_cores": round(busy_cores, 3), "outside_cores": round(outside, 3)}
        lines.append({"t": since, "time": epoch, "host": None, "load1": machine["load1"], **rates})
        self._last = (t, machine["busy_s"], run)
        self._load.append(machine["load1"])
        self._now, self._tend = now, t
        return lines

    def _since_start(self, now: Mapping[str, Mapping[str, float]], host: str) -> dict:
        return {k: _delta(now[host][k], self._first[host][k]) for k in FIELDS}

    def _loop(self) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            while True:
                stopping = self._stop.wait(self.interval)
                try:
                    for line in self.sample():
                        fh.write(json.dumps(line) + "\n")
                    fh.flush()
                except OSError as exc:  # a sample is not worth ending the run for
                    log.warning("host sampling: %s", exc)
                if stopping:
                    return

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """``{"hosts": {h: {cpu, cpu_s, nr_periods, nr_throttled, throttled_s,
        throttled_fraction, used_share}}, "machine": {...}, "seconds", "interval"}``:
        ``used_share`` is cpu_s over what the quota allowed in the run's seconds;
        ``outside_cores``: cores busy with work outside the hosts, on average."""
        now = getattr(self, "_now", None) or {h: read_group(g) for h, g in self.groups.items()}
        seconds = getattr(self, "_tend", time.monotonic()) - self._t0
        hosts = {}
        for h in self.groups:
            row = self._since_start(now, h)
            quota, periods = self.quotas.get(h), row["nr_periods"]
            allowed = quota * seconds if quota and seconds else None
            row.update(
                cpu=quota,
                throttled_fraction=round(row["nr_throttled"] / periods, 4) if periods else 0.0,
                used_share=round(row["cpu_s"] / allowed, 4) if allowed else None,
            )
            hosts[h] = row
        machine = read_machine()
        busy = (machine["busy_s"] - self._machine0["busy_s"]) / max(seconds, 1e-9)
        run = self._run_cpu(now) - self._run_cpu(self._first)
        loads = [x for x in self._load if x == x]
        return {
            "seconds": round(seconds, 3),
            "interval": self.interval,
            "hosts": hosts,
            "machine": {
                "cpus": os.cpu_count(),
                "load1_start": self._machine0["load1"],
                "load1_max": max(loads, default=machine["load1"]),
                "busy_cores": round(busy, 3),
                "outside_cores": round(busy - run / max(seconds, 1e-9), 3),
            },
        }


def _delta(now: float, first: float) -> float:
    d = now - first
    return round(d, 6) if isinstance(d, float) else d


@contextlib.contextmanager
def sampling(cluster: Any, run_dir: str | os.PathLike[str], interval: float = 0.5) -> Iterator[Any]:
    """Sample an emulated cluster's hosts for the duration of the block; afterwards write
    ``hosts_cpu`` into the run's manifest. Clusters that are not emulated: nothing."""
    info = (getattr(cluster, "extra", None) or {}).get("emulation") or {}
    hosts = info.get("hosts") or {}
    if not hosts:
        yield None
        return
    from lab.cluster.rundir import write_manifest

    groups = {h: v["cgroup"] for h, v in hosts.items()}
    quotas = {h: v.get("cpu") for h, v in hosts.items()}
    sampler = HostSampler(groups, Path(run_dir) / FILE_NAME, quotas, interval).start()
    try:
        yield sampler
    finally:
        write_manifest(run_dir, hosts_cpu=sampler.stop())
