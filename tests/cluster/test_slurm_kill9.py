"""``kill -9`` of the lab during a Slurm run: its keeper (lab.cluster.slurm.keeper) cancels
the job within 5 s, whether it was running or still waiting in the queue, and nothing of
the run is left (its ranks, salloc). Against a real single-node Slurm
(lab.cluster.slurm.testbed); the lab is a child process run by this test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import slurm_profile

from lab.cluster.slurm.testbed import LocalSlurm

LIMIT_S = 5.0  # the most a killed lab's job may outlive it
RANK = "import os, time; print('ready', os.environ['RANK'], flush=True); time.sleep(300)"
LAB = r"""
import sys
from lab.cluster import launch
launch(["python", "-c", sys.argv[3]], np=int(sys.argv[4]), cluster=sys.argv[1],
       results_root=sys.argv[2], view=None, timeout=600)
"""


def _start_lab(profile: Path, results: Path, np: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    return subprocess.Popen(
        [sys.executable, "-c", LAB, str(profile), str(results), RANK, str(np)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: killing the group hits nothing else
    )


def _ours(slurm: LocalSlurm, exclude: set[str]) -> list[str]:
    return [j for j in slurm.queue() if j not in exclude]


def _processes_with(marker: str) -> list[int]:
    """Live processes whose command line or environment holds ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            data = b""
            for part in ("cmdline", "environ"):
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    data += f.read()
        except (OSError, IndexError):
            continue
        if marker.encode() in data and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _wait(cond, within: float) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    while not cond() and time.monotonic() - start < within:
        time.sleep(0.1)
    return time.monotonic() - start


def _kill_group(lab: subprocess.Popen[str]) -> float:
    os.killpg(lab.pid, signal.SIGKILL)
    killed = time.monotonic()
    lab.wait(10)
    return killed


def test_kill9_of_a_running_lab_cancels_its_job_within_5s(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    profile = slurm_profile(tmp_path / "slurm-test.yaml")
    lab = _start_lab(profile, tmp_path / "results", 2)
    try:
        assert _wait(lambda: len(list(tmp_path.glob("results/runs/*/*/rank-*.log"))) == 2, 60) < 60
        logs = list(tmp_path.glob("results/runs/*/*/rank-*.log"))
        ready = _wait(lambda: all("ready" in p.read_text() for p in logs), 60)
        assert ready < 60, "ranks never said ready"
        (job,) = slurm.queue()
        run_id = json.loads((logs[0].parent / "manifest.json").read_text())["run_id"]
        assert _processes_with(f"LAB_RUN_ID={run_id}"), "no rank found running"
        killed = _kill_group(lab)
        took = _wait(lambda: not slurm.queue(), 2 * LIMIT_S)
        print(f"kill -9 (running) to empty queue: {took:.2f} s (job {job})")
        assert slurm.queue() == [] and time.monotonic() - killed <= LIMIT_S + 1
        assert took <= LIMIT_S, f"job {job} outlived the lab by {took:.1f} s"
        left = _wait(lambda: not _processes_with(f"LAB_RUN_ID={run_id}"), LIMIT_S)
        assert _processes_with(f"LAB_RUN_ID={run_id}") == [], f"ranks left after {left:.1f} s"
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(10)


def test_kill9_of_a_lab_whose_job_waits_withdraws_it_within_5s(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    held = slurm.run("salloc", "--no-shell", "-N1", f"-n{slurm.cpus}", "--time=00:02:00")
    assert "Granted job allocation" in held.stderr, held.stderr
    holder = held.stderr.split("Granted job allocation")[1].split()[0]
    profile = slurm_profile(tmp_path / "slurm-test.yaml", tasks_per_node=slurm.cpus)
    lab = _start_lab(profile, tmp_path / "results", slurm.cpus)
    try:
        waited = _wait(lambda: bool(_ours(slurm, {holder})), 60)
        assert waited < 60, "the lab's job never reached the queue"
        (job,) = _ours(slurm, {holder})
        state = slurm.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
        assert state == "PENDING", state
        salloc = [p for p in _processes_with("--job-name=distlab-") if _parent(p) == lab.pid]
        assert salloc, "no salloc of the lab's found"
        _kill_group(lab)
        took = _wait(lambda: not _ours(slurm, {holder}), 2 * LIMIT_S)
        print(f"kill -9 (queued) to withdrawn: {took:.2f} s (job {job})")
        assert _ours(slurm, {holder}) == [] and took <= LIMIT_S
        # the lab's salloc, orphaned while it waited, gives up once its job is withdrawn
        assert _wait(lambda: not any(map(_alive, salloc)), LIMIT_S) <= LIMIT_S
        assert slurm.queue() == [holder]  # the other allocation is not the lab's to touch
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(10)
        slurm.run("scancel", holder)
    assert slurm.queue_within(10.0) == []


@pytest.mark.parametrize("how", ["release", "exit"])
def test_the_keeper_leaves_a_released_job_and_cancels_an_abandoned_one(
    slurm: LocalSlurm, how: str
) -> None:
    """The keeper alone: ``release`` lets it exit without a word to Slurm; its lab's exit
    (here: its pipe closed without ``release``) cancels the job of its name."""
    from lab.cluster.slurm.keeper import JobKeeper

    name = f"distlab-keeper-{how}"
    held = slurm.run("salloc", "--no-shell", "-N1", "-n1", f"--job-name={name}")
    assert "Granted" in held.stderr, held.stderr
    keeper = JobKeeper.start(name)
    if how == "release":
        keeper.release()
        assert keeper.proc.returncode == 0 and len(slurm.queue()) == 1
        slurm.run("scancel", f"--name={name}")
    else:
        assert keeper.proc.stdin is not None
        keeper.proc.stdin.close()
        keeper.proc.wait(15)
    assert slurm.queue_within(10.0) == []
