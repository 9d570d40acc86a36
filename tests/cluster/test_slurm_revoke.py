"""CM-DARE's revocation through the scheduler, against a real two-node Slurm
(lab.cluster.slurm.testbed, one slurmd per node): a fault plan takes the second node of
the run's job away with ``scontrol ... State=DOWN`` (then resumes it) or cancels the job's
steps there with ``scancel``; the rank on it ends at once (under 2 s: left alone it would
run 4 s more), the rank on the other node runs to its end, and the node comes back, even
when the lab is killed (``kill -9``) while the node is DOWN."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import Watch, slurm_profile

from lab.cluster.faults import Revocation, read_events
from lab.cluster.launching import launch
from lab.cluster.slurm.testbed import LocalSlurm
from lab.errors import ParameterError

TICKS = 30  # 0.2 s apart: a rank runs ~6 s when nothing takes its node
RANK = (
    "import os, time\n"
    "print('pid', os.getpid(), 'job', os.environ['SLURM_JOB_ID'], 'node',"
    " os.environ['SLURMD_NODENAME'], flush=True)\n"
    f"for i in range({TICKS}):\n"
    "    print('tick', i, time.time(), flush=True)\n"
    "    time.sleep(0.2)\n"
)


class NodeWatch(Watch):
    """The states (and reasons) sinfo gave one node, every 0.1 s, while the block ran."""

    every = 0.1

    def __init__(self, slurm: LocalSlurm, node: str) -> None:
        super().__init__(slurm)
        self.node, self.seen = node, list[str]()

    def look(self) -> None:
        said = self.slurm.run("sinfo", "-h", "-n", self.node, "-o", "%T|%E").stdout.strip()
        if said and (not self.seen or self.seen[-1] != said):
            self.seen.append(said)


def _log(run_dir: Path, rank: int) -> list[list[str]]:
    return [ln.split() for ln in (run_dir / f"rank-{rank}.log").read_text().splitlines()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run(slurm: LocalSlurm, tmp_path: Path, revocation: Revocation) -> tuple[Path, NodeWatch]:
    profile = slurm_profile(tmp_path / "slurm-two.yaml", tasks_per_node=1, nodes=2)
    with NodeWatch(slurm, slurm.nodes[1]) as watch:
        result = launch(
            ["python", "-c", RANK],
            np=2,
            cluster=str(profile),
            view=None,
            timeout=60,
            results_root=tmp_path / "results",
            faults=[revocation],
        )
    assert result.ok, result.reason
    return Path(result.run_dir), watch


@pytest.mark.slow
def test_a_node_taken_down_ends_its_rank_and_comes_back(
    slurm_two_nodes: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm = slurm_two_nodes
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    plan = Revocation("slurm-node-2", at_time=2.0, replace="none", delay=1.0, via="scontrol")
    run_dir, watch = _run(slurm, tmp_path, plan)
    events = {e["event"]: e for e in read_events(run_dir)}
    revoked, restored = events["revoked"], events["restored"]
    assert revoked["node"] == slurm.nodes[1] and revoked["ranks"] == [1], revoked
    assert restored["time"] - revoked["time"] >= 1.0
    first = _log(run_dir, 1)[0]
    last = [ln for ln in _log(run_dir, 1) if ln[0] == "tick"][-1]
    assert first[0] == "pid" and first[5] == slurm.nodes[1]
    assert int(last[1]) < TICKS - 5, "rank 1 ran on after its node went"
    ended = events["revoked_exited"]["seconds_since_revoked"]
    assert ended < 2.0, f"rank 1's process ended {ended:.2f} s after its node went DOWN"
    assert not _alive(int(first[1])), "the revoked rank's process outlived its node"
    ticks0 = [ln for ln in _log(run_dir, 0) if ln[0] == "tick"]
    assert int(ticks0[-1][1]) == TICKS - 1  # the other node's rank ran to its end
    downs = [s for s in watch.seen if s.startswith("down")]
    assert downs and "distlab revoked it" in downs[0], watch.seen
    assert watch.seen[-1].startswith("idle"), f"the node did not come back: {watch.seen}"
    assert slurm.queue_within(5.0) == []
    print(f"scontrol: rank 1 ended {ended:.2f} s after DOWN; node states {watch.seen}")


@pytest.mark.slow
def test_cancelled_steps_end_the_rank_and_a_cold_one_starts_there(
    slurm_two_nodes: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm = slurm_two_nodes
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    plan = Revocation("slurm-node-2", at_time=2.0, replace="cold", delay=0.5, via="scancel")
    run_dir, watch = _run(slurm, tmp_path, plan)
    events = {e["event"]: e for e in read_events(run_dir)}
    revoked = events["revoked"]
    assert revoked["node"] == slurm.nodes[1] and len(revoked["steps"]) == 1, revoked
    assert events["replaced"]["mode"] == "cold"
    lines = _log(run_dir, 1)
    starts = [ln for ln in lines if ln[0] == "pid"]
    assert len(starts) == 2, "the rank did not start again on its node"
    (_, pid1, _, job1, _, node1), (_, pid2, _, job2, _, node2) = starts
    assert pid1 != pid2 and job1 == job2 and node1 == node2 == slurm.nodes[1]
    assert not _alive(int(pid1))
    ended = events["revoked_exited"]["seconds_since_revoked"]
    assert ended < 2.0, f"rank 1's process ended {ended:.2f} s after its steps were cancelled"
    before = [ln for ln in lines[: lines.index(starts[1])] if ln[0] == "tick"]
    assert int(before[-1][1]) < TICKS - 5, "rank 1 ran on after its steps were cancelled"
    assert all(not s.startswith("down") for s in watch.seen), watch.seen
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["faults"][0]["via"] == "scancel"
    assert slurm.queue_within(5.0) == []
    print(f"scancel: rank 1 ended {ended:.2f} s after; replaced on {node2}")


LAB = r"""
import sys
from lab.cluster.faults import Revocation
from lab.cluster.launching import launch
revocation = Revocation("slurm-node-2", at_time=2.0, replace="none", delay=120.0, via="scontrol")
launch(["python", "-c", sys.argv[3]], np=2, cluster=sys.argv[1], results_root=sys.argv[2],
       view=None, timeout=120, faults=[revocation])
"""


@pytest.mark.slow
def test_kill9_of_the_lab_while_its_node_is_down_gives_the_node_back(
    slurm_two_nodes: LocalSlurm, tmp_path: Path
) -> None:
    """The lab takes node 2 DOWN for 120 s and is killed 0.1-0.2 s later: its job's keeper
    cancels the job and resumes the node, whose DOWN reason names the job, within 10 s."""
    slurm = slurm_two_nodes
    profile = slurm_profile(tmp_path / "slurm-two.yaml", tasks_per_node=1, nodes=2)
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    lab = subprocess.Popen(
        [sys.executable, "-c", LAB, str(profile), str(tmp_path / "results"), RANK],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: killing the group hits nothing else
    )
    try:
        with NodeWatch(slurm, slurm.nodes[1]) as watch:
            deadline = time.monotonic() + 90
            while not any(s.startswith("down") for s in watch.seen):
                assert lab.poll() is None, f"the lab ended first: {lab.stderr.read()[-2000:]}"
                assert time.monotonic() < deadline, f"the node never went DOWN: {watch.seen}"
                time.sleep(0.1)
            os.killpg(lab.pid, signal.SIGKILL)
            killed = time.monotonic()
            lab.wait(10)
            while time.monotonic() - killed < 15 and (
                not watch.seen[-1].startswith("idle") or slurm.queue()
            ):
                time.sleep(0.1)
            took = time.monotonic() - killed
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(10)
    downs = [s for s in watch.seen if s.startswith("down")]
    assert "(job distlab-" in downs[0], downs
    assert watch.seen[-1].startswith("idle"), f"the node was left DOWN: {watch.seen}"
    assert slurm.queue_within(5.0) == [] and took < 10, (took, watch.seen)
    print(f"kill -9 while DOWN: node back and queue empty {took:.2f} s later; {watch.seen}")


def test_a_slurm_revocation_is_checked_before_anything_starts(tmp_path: Path) -> None:
    """``via`` needs a slurm profile; a node taken DOWN cannot have a cold replacement."""
    from lab.cluster.fault_plan import FaultPlan
    from lab.cluster.inventory import resolve_cluster
    from lab.cluster.launching import LaunchRequest, run_request

    profile = slurm_profile(tmp_path / "slurm-two.yaml", tasks_per_node=1, nodes=2)
    cases = [
        (str(profile), Revocation("slurm-node-2", at_time=1, via="scontrol"), "replace"),
        (str(profile), Revocation("slurm-node-2", at_time=1, via="ssh"), "via"),
        (None, Revocation("h2", at_time=1, replace="none", via="scancel"), "via"),
    ]
    for where, plan, name in cases:
        cluster = resolve_cluster(cluster=where) if where else resolve_cluster(hosts="h1:1,h2:1")
        request = LaunchRequest(command=("true",), where=cluster, np=2)
        with pytest.raises(ParameterError) as refused:
            run_request(request.with_hooks(FaultPlan((plan,))), view=None)
        assert refused.value.name == name, refused.value
