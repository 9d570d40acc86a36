"""The slurm cluster kind against a real single-machine Slurm (lab.cluster.slurm.testbed):
ranks start through srun, the job is in squeue while they run and gone after, Stop
cancels it within seconds, and a run inside an allocation uses that allocation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from slurm_helpers import slurm_profile

from lab.cluster.inventory import load_profile
from lab.cluster.launching import launch
from lab.cluster.slurm.testbed import LocalSlurm

FAIL = "import os, sys, time; time.sleep(1 if os.environ['RANK'] == '1' else 60); sys.exit(3)"
RANK = "import os, time; print('rank', os.environ['RANK'], 'job', os.environ.get('SLURM_JOB_ID'))"


@pytest.fixture
def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return slurm_profile(tmp_path / "slurm-test.yaml")


def _manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "manifest.json").read_text())


def _watch_queue(bed: LocalSlurm, seen: set[str], stop: threading.Event) -> threading.Thread:
    def loop() -> None:
        while not stop.is_set():
            seen.update(bed.queue())
            time.sleep(0.2)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def test_profile_places_ranks_on_placeholder_nodes(profile: Path) -> None:
    cluster = load_profile(profile)
    assert cluster.slurm is not None and cluster.slurm["partition"] == "debug"
    assert cluster.slots == 2


def test_two_ranks_run_through_srun(slurm: LocalSlurm, profile: Path, tmp_path: Path) -> None:
    seen: set[str] = set()
    stop = threading.Event()
    watcher = _watch_queue(slurm, seen, stop)
    try:
        result = launch(
            ["python", "-c", RANK + "; time.sleep(2)"],
            np=2,
            cluster=str(profile),
            view=None,
            timeout=60,
            results_root=tmp_path / "results",
        )
    finally:
        stop.set()
        watcher.join(5)
    assert result.ok, result.reason
    info = _manifest(result.run_dir)["slurm"]
    assert info["allocated_by_run"] is True and info["nodes"] == [slurm.node]
    assert info["job_id"] in seen, f"squeue never showed job {info['job_id']} (saw {seen})"
    for r in (0, 1):
        log = (Path(result.run_dir) / f"rank-{r}.log").read_text()
        assert f"rank {r} job {info['job_id']}" in log
    assert slurm.queue() == []


def test_stop_cancels_the_job_within_5s(slurm: LocalSlurm, profile: Path, tmp_path: Path) -> None:
    class Stopper:
        def __init__(self) -> None:
            self.control = None
            self.started = threading.Event()

        def on_start(self, run_dir, ranks, control) -> None:  # type: ignore[no-untyped-def]
            self.control = control

        def on_line(self, line) -> None:  # type: ignore[no-untyped-def]
            if line.text.startswith("rank"):
                self.started.set()

        def on_end(self, state, exit_code, rank_exit_codes) -> None:  # type: ignore[no-untyped-def]
            pass

    stopper = Stopper()
    out: dict = {}
    t = threading.Thread(
        target=lambda: out.setdefault(
            "r",
            launch(
                ["python", "-c", RANK + "; time.sleep(120)"],
                np=2,
                cluster=str(profile),
                view=stopper,
                check=False,
                timeout=100,
                grace=1.0,
                results_root=tmp_path / "results",
            ),
        ),
        daemon=True,
    )
    t.start()
    assert stopper.started.wait(60), "ranks never printed"
    assert slurm.queue(), "the job is not in squeue while its ranks run"
    stopped = time.monotonic()
    stopper.control.cancel("test stop")  # type: ignore[union-attr]
    while slurm.queue() and time.monotonic() - stopped < 10:
        time.sleep(0.1)
    took = time.monotonic() - stopped
    t.join(20)
    assert not t.is_alive()
    print(f"stop to empty queue: {took:.2f} s")
    assert slurm.queue() == [] and took < 5.0, f"job still queued {took:.1f} s after Stop"
    assert not out["r"].ok


def test_run_inside_salloc_uses_that_allocation(slurm: LocalSlurm, profile: Path) -> None:
    script = (
        "import json, os, sys\n"
        "from lab.cluster.launching import launch\n"
        f"r = launch(['python', '-c', {RANK!r}], np=2, cluster={str(profile)!r}, view=None,"
        " timeout=60, results_root=sys.argv[1])\n"
        "m = json.load(open(r.run_dir / 'manifest.json'))['slurm']\n"
        "print('OUTER', os.environ['SLURM_JOB_ID'], 'RUN', m['job_id'], m['allocated_by_run'])\n"
        "print('LOG', open(r.run_dir / 'rank-1.log').read().strip())\n"
    )
    done = subprocess.run(
        ["salloc", "-N1", "-n2", "--time=00:05:00", sys.executable, "-c", script, "res"],
        cwd=profile.parent,
        env={**os.environ, "SLURM_CONF": str(slurm.conf)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    words = next(ln for ln in done.stdout.splitlines() if ln.startswith("OUTER")).split()
    outer, run_job, owned = words[1], words[3], words[4]
    assert run_job == outer and owned == "False"
    assert f"rank 1 job {outer}" in done.stdout
    assert slurm.queue_within(10.0) == []  # salloc's own job, released as salloc exits


def test_failed_rank_and_timeout_leave_nothing_queued(
    slurm: LocalSlurm, profile: Path, tmp_path: Path
) -> None:
    failed = launch(
        ["python", "-c", FAIL],
        np=2,
        cluster=str(profile),
        view=None,
        check=False,
        timeout=60,
        results_root=tmp_path / "results",
    )
    # rank 1 fails; rank 0 is ended by the lab long before its 60 s sleep is over
    assert not failed.ok and failed.rank_exit_codes.get(1) == 3
    assert failed.rank_exit_codes.get(0) != 0 and failed.seconds < 40
    assert slurm.queue() == []
    started = time.monotonic()
    timed = launch(
        ["python", "-c", RANK + "; time.sleep(120)"],
        np=2,
        cluster=str(profile),
        view=None,
        check=False,
        timeout=4,
        grace=1.0,
        results_root=tmp_path / "results",
    )
    assert timed.exit_code == 124 and time.monotonic() - started < 30
    assert slurm.queue() == []


def test_profile_refuses_unknown_slurm_keys_and_mixed_kinds(tmp_path: Path) -> None:
    from lab.errors import HostSpecError

    bad = tmp_path / "bad.yaml"
    bad.write_text("slurm: {partiton: gpu}\n")
    with pytest.raises(HostSpecError, match="partiton"):
        load_profile(bad)
    bad.write_text("hosts: 'a:1'\nslurm: {nodes: 1}\n")
    with pytest.raises(HostSpecError, match="only one of"):
        load_profile(bad)


def test_salloc_asks_for_what_the_profile_says() -> None:
    from lab.cluster.slurm.allocation import salloc_argv

    argv = salloc_argv(
        {
            "partition": "gpu",
            "account": "a1",
            "time": "1:00:00",
            "nodes": 2,
            "tasks_per_node": 4,
            "gpus_per_node": 4,
            "options": ["--exclusive"],
        },
        "distlab-x",
    )
    assert argv[:2] == ["salloc", "--no-shell"]
    for flag in (
        "--partition=gpu",
        "--account=a1",
        "--time=1:00:00",
        "--nodes=2",
        "--ntasks-per-node=4",
        "--gres=gpu:4",
        "--exclusive",
        "--job-name=distlab-x",
        "--no-kill",
    ):
        assert flag in argv


def test_a_launcher_not_wired_to_slurm_is_refused_before_any_job(
    slurm: LocalSlurm, profile: Path, tmp_path: Path
) -> None:
    from lab.cluster.launchers.base import find_program
    from lab.errors import LaunchError

    if find_program("horovodrun") is None:  # horovodrun's own check would come first
        pytest.skip("horovodrun is not installed (make setup)")
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho localhost:2\n")
    script.chmod(0o755)
    with pytest.raises(LaunchError, match="launcher 'horovod-elastic' is not wired to Slurm"):
        launch(
            ["python", "-c", "pass"],
            np=2,
            launcher="horovod-elastic",
            cluster=str(profile),
            options={"discovery_script": str(script)},
            view=None,
            results_root=tmp_path / "results",
        )
    assert slurm.queue() == [] and not (tmp_path / "results").exists()


def test_an_allocation_slurm_refuses_is_a_launch_error_and_leaves_nothing(
    slurm: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lab.errors import LaunchError

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    p = tmp_path / "too-big.yaml"
    p.write_text(f"python: {sys.executable}\nslurm: {{nodes: 2, tasks_per_node: 1, wait: 3}}\n")
    with pytest.raises(LaunchError, match="salloc"):
        launch(
            ["python", "-c", "pass"],
            np=2,
            cluster=str(p),
            view=None,
            timeout=30,
            results_root=tmp_path / "results",
        )
    assert slurm.queue() == []
    assert not (tmp_path / "results" / "runs").exists() or not any(
        (tmp_path / "results" / "runs").rglob("manifest.json")
    )
