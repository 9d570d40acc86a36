"""``kill -9`` of the lab during an emulated run: its keeper removes every host within 5 s.

Each case starts a real run in a child Python process (2 emulated hosts with sshds, a
``sleep`` per rank), kills that process with SIGKILL (alone, or its whole process group)
while its keeper starts, while the hosts are being built or while the run runs, then
checks, polling, that nothing of the run is left: no namespace, veth, bridge, cgroup,
process (sshds, ranks, guards, the keeper itself) or file outside the run directory, and
how long that took. A run killed while running must then read as ``orphaned``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from lab.cluster import emulation
from lab.cluster.emulation import netns, state
from lab.metrics.layout import read_manifest

REPO = Path(__file__).resolve().parents[2]
WHY = emulation.missing()
T = TypeVar("T")
LIMIT_S = 5.0  # the most a killed lab's hosts may outlive it
DRIVER = r"""
import dataclasses, sys
from lab.cluster import launch
from lab.cluster.inventory import load_profile
cluster = load_profile("emulated-2")
cluster = dataclasses.replace(cluster, emulated={**cluster.emulated, "sshd": True})
launch(["sleep", "300"], np=2, cluster=cluster, results_root=sys.argv[1], view=None)
"""


def leftovers(tag: str) -> dict[str, list[str]]:
    """Everything carrying ``tag`` that still exists, as the tools show it: ``ip netns``,
    ``ip link``, the cgroup trees, ``pgrep -f`` (sshds, guards, the keeper) and the files
    in the lab's state directory."""
    links = json.loads(netns.run(["ip", "-j", "link", "show"]) or "[]")
    pgrep = subprocess.run(
        ["pgrep", "-a", "-f", tag], capture_output=True, text=True, timeout=10, check=False
    )
    found = {
        "netns": [n for n in netns.list_netns() if tag in n],
        "links": [link["ifname"] for link in links if tag in link["ifname"]],
        "cgroups": _cgroups(tag),
        "processes": pgrep.stdout.splitlines(),
        "files": [str(p) for p in state.state_dir().iterdir() if tag in p.name],
    }
    return {k: v for k, v in found.items() if v}


def quick_leftovers(tag: str) -> dict[str, list[str]]:
    """The same, read from /run/netns, /sys/class/net and /proc in this process: a look
    takes milliseconds, so the time to an empty one is the time to the cleanup, not to
    starting ``ip`` and ``pgrep`` on a busy machine."""
    me = str(os.getpid())
    procs = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != me:
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                if tag.encode() in argv and alive(int(pid)):
                    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    wchan = Path(f"/proc/{pid}/wchan").read_text()
                    words = argv.replace(b"\0", b" ")[:120].decode(errors="replace")
                    procs.append(f"{pid} {stat} {wchan} {words}")
    run_netns = Path("/run/netns")
    found = {
        "netns": [n for n in os.listdir(run_netns) if tag in n] if run_netns.is_dir() else [],
        "links": [n for n in os.listdir("/sys/class/net") if tag in n],
        "cgroups": _cgroups(tag),
        "processes": procs,
        "files": [n for n in os.listdir(state.state_dir()) if tag in n],
    }
    return {k: v for k, v in found.items() if v}


def _cgroups(tag: str) -> list[str]:
    groups = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{state.cgroup_dir(tag)}")]
    return groups + [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/*/{state.cgroup_dir(tag)}")]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def record_of(pid: int) -> state.Record | None:
    """The emulation record that process ``pid`` owns, once its keeper is noted in it."""
    for rec in state.records():
        if rec.pid == pid and rec.keeper_pid is not None:
            return rec
    return None


def running_manifest(results: Path) -> Path | None:
    for path in results.glob("results/runs/*/*/manifest.json"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text()).get("state") == "running":
                return path.parent
    return None


def wait_for(what: str, probe: Callable[[], T], lab: subprocess.Popen, timeout: float = 120.0) -> T:
    """``probe()``'s first true answer, polled while the lab lives."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        if lab.poll() is not None:
            raise AssertionError(f"the lab exited ({lab.returncode}) before its {what}")
        time.sleep(0.02)
    raise AssertionError(f"no {what} within {timeout:g} s")


def run_processes(rec: state.Record) -> list[int]:
    """Every process in the run's hosts: its cgroups (ranks, sshds) and namespaces."""
    pids = []
    for group in rec.cgroups:
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (Path(group) / "cgroup.procs").read_text().split()]
    for ns in rec.netns:
        pids += netns.netns_pids(ns)
    return sorted(set(pids))


def clean_up(lab: subprocess.Popen, rec: state.Record | None) -> None:
    """Whatever a failed case left: the lab, its keeper, then the cluster's objects."""
    if lab.poll() is None:
        lab.kill()
        lab.wait(timeout=10)
    if rec is not None and rec.keeper_alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.keeper_pid or 0, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while rec.keeper_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
    emulation.cleanup_stale()


@pytest.mark.skipif(WHY is not None, reason=WHY or "")
@pytest.mark.root
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("moment", "target"),
    [("running", "pid"), ("running", "group"), ("building", "pid"), ("starting", "pid")],
)
def test_kill9_of_the_lab_leaves_nothing_within_5s(
    moment: str, target: str, tmp_path: Path
) -> None:
    errors = tmp_path / "lab.stderr"  # the lab's, and its keeper's, which inherits it
    with errors.open("w") as err:
        lab = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(tmp_path / "results")],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True,  # its own group: killing the group hits nothing else
        )  # fmt: skip
    rec, run_dir, procs = None, None, []
    try:
        rec = wait_for("emulation record", lambda: record_of(lab.pid), lab)
        if moment == "building":  # its first object, the hosts' parent cgroup, exists
            wait_for("cluster's cgroup", lambda: Path(rec.cgroups[-1]).is_dir(), lab)
        if moment == "running":
            run_dir = wait_for("running manifest", lambda: running_manifest(tmp_path), lab)
            procs = wait_for("2 ranks and 2 sshds", lambda: _ranks_and_sshds(rec), lab)
        if target == "group":
            os.killpg(lab.pid, signal.SIGKILL)
        else:
            os.kill(lab.pid, signal.SIGKILL)
        killed, wall = time.monotonic(), time.time()
        lab.wait(timeout=10)
        exited = time.monotonic() - killed
        while True:
            left = quick_leftovers(rec.tag)
            took = time.monotonic() - killed  # when this look ended: all was gone by then
            if not left or took > LIMIT_S:
                break
            time.sleep(0.02)
        print(
            f"{moment}/{target}: {'nothing' if not left else 'something'} left {took:.2f} s "
            f"after kill -9 at {time.strftime('%H:%M:%S', time.localtime(wall))}"
            f".{int(wall % 1 * 1000):03d} (the lab exited after {exited:.2f} s)"
        )
        assert left == {} and took <= LIMIT_S, f"left {took:.1f} s after kill -9: {left}"
        assert leftovers(rec.tag) == {}  # and as the tools see it
        assert not [p for p in procs if alive(p)], "a rank or sshd outlived the lab"
        if run_dir is not None:
            manifest = read_manifest(run_dir)
            assert manifest["state"] == "orphaned", manifest.get("state")
            assert f"pid {lab.pid}" in manifest["reason"]
            on_disk = json.loads((run_dir / "manifest.json").read_text())
            assert on_disk["state"] == "orphaned" and on_disk["owner"]["pid"] == lab.pid
    finally:
        clean_up(lab, rec)
        print(errors.read_text())  # pytest shows it when the case fails


def _ranks_and_sshds(rec: state.Record) -> list[int]:
    """The run's processes once both ranks run ``sleep`` and both sshds listen; else []."""
    pids = run_processes(rec)
    names = [_comm(p) for p in pids]
    return pids if names.count("sleep") == 2 and names.count("sshd") >= 2 else []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
