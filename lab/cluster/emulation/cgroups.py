"""CPU shares for emulated hosts: one cgroup per host with a CFS quota.

Supports what the machine has: the cgroup v1 ``cpu`` controller (``cpu.cfs_quota_us``)
or a cgroup v2 hierarchy with ``cpu`` available (``cpu.max``); v1 is preferred when
both are mounted, since v2 mounts beside v1 often have no controllers (hybrid layout).
On v1 the CPU a group used is counted by ``cpuacct``; where that controller is mounted
apart from ``cpu``, each group gets a twin there (``accounting_dir``) that its processes
join too, so a host's CPU time can be read (lab.cluster.emulation.hoststats).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LaunchError

log = logging.getLogger(__name__)
# The quota's accounting period. At the kernel's default 100 ms a 0.4-core host runs 40 ms and
# then waits 60 ms, so a synchronous step took a whole number of periods set by how the
# hosts' periods happened to line up: the same Horovod point ran 0.1, 0.3 or 0.8 s a step
# from run to run, and default vs fair spin settings read 0.84-1.43x over three rounds.
# At 10 ms the steps spread smoothly and the same three rounds read 1.46-1.80x.
PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # the kernel's smallest quota
MIN_CPU = MIN_QUOTA_US / PERIOD_US  # the smallest share a host can be given
GUARANTEE = 16  # weight of a capped slot, in ordinary processes (see weight_for)


@dataclass(frozen=True)
class CgroupDriver:
    """Where and how to make CPU-limited cgroups.

    Args:
        version: 1 or 2.
        base: the directory under which the lab makes its groups (the current process's
            group on v1, the hierarchy root on v2, whose children may enable controllers).
    """

    version: int
    base: Path

    def create(self, path: Path, cpu: float | None, weight: int = 1) -> None:
        """Make ``path`` (under ``base``) and give it ``cpu`` cores (None: no limit).

        ``weight`` is how many ordinary processes the group counts as when the machine is
        busy (see ``weight_for``): a group is one scheduling entity, so with the default
        four emulated hosts together would get the CPU time of one process beside them.
        """
        path.mkdir(exist_ok=True)
        if self.version == 1 and (twin := accounting_dir(path)) and twin.parent.is_dir():
            twin.mkdir(exist_ok=True)
        if self.version == 2:
            _enable_cpu(path.parent)
        self.set_weight(path, weight)
        if cpu is not None:
            self.set_quota(path, cpu)

    def set_weight(self, path: Path, weight: int) -> None:
        """Let ``path`` count as ``weight`` ordinary processes when the machine is busy."""
        if self.version == 1:
            (path / "cpu.shares").write_text(str(1024 * weight))
        else:
            (path / "cpu.weight").write_text(str(min(10_000, 100 * weight)))

    def set_quota(self, path: Path, cpu: float | None) -> None:
        """Cap ``path`` at ``cpu`` cores, or lift its cap (None)."""
        quota = None if cpu is None else max(MIN_QUOTA_US, round(cpu * PERIOD_US))
        if self.version == 1:
            (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(-1 if quota is None else quota))
        else:
            (path / "cpu.max").write_text(f"{'max' if quota is None else quota} {PERIOD_US}")

    def procs(self, path: Path) -> list[int]:
        try:
            return [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    def remove(self, path: Path, grace: float = 5.0) -> None:
        """End what still runs in ``path`` (only the lab puts processes there), then rmdir
        it and its cpuacct twin, if any."""
        twin = accounting_dir(path) if self.version == 1 else None
        self._remove(path, grace)
        if twin is not None:
            self._remove(twin, grace)

    def _remove(self, path: Path, grace: float) -> None:
        if not path.exists():
            return
        deadline = time.monotonic() + grace
        signalled: set[int] = set()
        while True:
            pids = self.procs(path)
            if not pids:
                break
            for pid in pids:
                if pid not in signalled:
                    log.warning("ending pid %d left in %s", pid, path)
                    signalled.add(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise LaunchError(f"processes {pids} would not leave cgroup {path}")
            time.sleep(0.05)
        while True:
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def accounting_dir(path: str | Path) -> Path | None:
    """Where a v1 ``cpu`` group's twin lives in a separate ``cpuacct`` hierarchy (None
    when ``cpuacct`` is mounted with ``cpu``, is not mounted, or ``path`` is not v1)."""
    path = Path(path)
    mounts = _mounts()
    acct = [Path(m) for m, fs, opts in mounts if fs == "cgroup" and "cpuacct" in opts]
    for mount, fstype, opts in mounts:
        if fstype == "cgroup" and "cpu" in opts and path.is_relative_to(mount):
            if "cpuacct" in opts or not acct:
                return None
            return acct[0] / path.relative_to(mount)
    return None


def weight_for(cpu: float | None, slots: int) -> int:
    """Scheduling weight of a host's group, in ordinary processes.

    A host with a quota gets a high weight, so that its share is *fixed*: it gets its
    quota even while other work keeps the machine busy, and the quota stops it taking
    more. A host without a quota competes like ``slots`` ordinary processes.
    """
    return slots * (GUARANTEE if cpu is not None else 1)


def _enable_cpu(parent: Path) -> None:
    control = parent / "cgroup.subtree_control"
    if "cpu" not in control.read_text().split():
        control.write_text("+cpu")


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every cgroup mount."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _src, opts = ([*right.split(), "", "", ""])[:3]
        if fstype in ("cgroup", "cgroup2"):
            out.append((left.split()[4], fstype, set(opts.split(","))))
    return out


def _own_group(controller: str | None) -> str:
    """This process's group path in the v1 ``controller`` hierarchy (None: v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, rel = line.split(":", 2)
        if (controller is None and ctrls == "") or (controller in ctrls.split(",")):
            return rel.lstrip("/")
    return ""


def detect() -> CgroupDriver:
    """The usable CPU controller, or LaunchError saying what is missing."""
    problems = []
    for mount, fstype, opts in _mounts():
        if fstype == "cgroup" and "cpu" in opts:
            base = Path(mount) / _own_group("cpu")
            if (base / "cpu.cfs_quota_us").exists() or (Path(mount) / "cpu.cfs_period_us").exists():
                if os.access(base, os.W_OK):
                    return CgroupDriver(1, base)
                problems.append(f"{base} is not writable")
    for mount, fstype, _ in _mounts():
        if fstype == "cgroup2":
            root = Path(mount)
            ctrls = (root / "cgroup.controllers").read_text().split()
            if "cpu" not in ctrls:
                problems.append(f"cgroup v2 at {mount} has no cpu controller")
            elif not os.access(root, os.W_OK):
                problems.append(f"{mount} is not writable")
            else:
                return CgroupDriver(2, root)
    why = "; ".join(problems) or "no cgroup cpu controller is mounted"
    raise LaunchError(f"emulated hosts need a cgroup cpu controller (v1 or v2): {why}")
