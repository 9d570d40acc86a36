"""Supervision with real processes: streaming, failure, timeout, cancel, interrupt, kill -9."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.launchers.base import Line, RunControl
from lab.cluster.rundir import read_manifest
from lab.cluster.supervisor import LineSplitter, RunState, exit_status, poll
from lab.errors import HostSpecError, ParameterError, RanksFailed

# -- pure parts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codes", "state"),
    [
        ([], RunState.PENDING),
        ([None, None], RunState.RUNNING),
        ([0, None], RunState.RUNNING),
        ([0, 0, 0], RunState.SUCCEEDED),
        ([0, 3, None], RunState.FAILED),
        ([None, 143], RunState.FAILED),
    ],
)
def test_poll(codes: list[int | None], state: RunState) -> None:
    assert poll(codes) is state


@pytest.mark.parametrize(
    ("returncode", "expected"),
    [
        (0, (0, None)),
        (3, (3, None)),
        (-9, (137, "SIGKILL")),
        (143, (143, "SIGTERM")),
        (130, (130, "SIGINT")),
        (255, (255, None)),
    ],
)
def test_exit_status(returncode: int, expected: tuple[int, str | None]) -> None:
    assert exit_status(returncode) == expected


def test_line_splitter_handles_cr_crlf_and_split_utf8() -> None:
    s = LineSplitter()
    euro = "€".encode()
    out = s.feed(b"a\r\nb\rc\nd\r")
    out += s.feed(b"\ne" + euro[:1])
    out += s.feed(euro[1:] + b"\n\nlast")
    out += s.feed(b"", final=True)
    assert out == ["a", "b", "c", "d", "e€", "", "last"]


# -- real runs -------------------------------------------------------------------------------


def test_logs_complete_and_in_order(tmp_path: Path, probe) -> None:
    n = 2000
    result = launch(
        probe.rank_command("--lines", str(n), "--progress"),
        np=4,
        hosts="localhost:4",
        results_root=tmp_path,
        view=None,
        experiment="stream",
    )
    assert result.state is RunState.SUCCEEDED and result.exit_code == 0
    assert result.rank_exit_codes == {0: 0, 1: 0, 2: 0, 3: 0}
    assert result.run_dir.parent == tmp_path / "runs" / "stream"
    for r in range(4):
        lines = (result.run_dir / f"rank-{r}.log").read_text().splitlines()
        body = [x for x in lines if " line " in x]
        assert body == [f"rank {r} line {i}" for i in range(n)]
        progress = [x for x in lines if "progress" in x]
        assert progress == [f"rank {r} progress {i}/5" for i in range(1, 6)]
        # stdout keeps its order; the stderr line may land anywhere between stdout lines
        assert f"rank {r} stderr note" in lines
        assert [x for x in lines if "stderr" not in x][-1] == f"rank {r} done"
    manifest = read_manifest(result.run_dir)
    assert manifest["state"] == "succeeded" and manifest["exit_code"] == 0
    assert [p["argv"] for p in manifest["processes"]] == [list(c) for c in result.commands]
    assert manifest["ranks"]["3"]["exit_code"] == 0
    probe.assert_nothing_left(result.run_dir)


@pytest.mark.slow
def test_failing_rank_ends_run_and_every_process(tmp_path: Path, probe) -> None:
    cmd = probe.rank_command(
        "--exitcode", "3@2", "--sleep", "120", "--ignore-term", "1",
        "--spawn-child", "0", "--setsid-child", "3",
    )  # fmt: skip
    with pytest.raises(RanksFailed) as info:
        launch(cmd, np=4, hosts="localhost:4", results_root=tmp_path, view=None, grace=1.5)
    err = info.value
    result = err.result  # type: ignore[attr-defined]
    assert result.state is RunState.FAILED and result.exit_code == 3 and err.exit_code == 3
    root = err.root_cause
    assert root is not None and root.rank == 2 and root.exit_code == 3
    assert root.pid is not None and any("failing with 3" in t for t in root.tail)
    assert {f.rank for f in err.failures} == {0, 1, 2, 3}
    assert err.run_dir == str(result.run_dir)
    # The run ended within 5 s of the failure, although rank 1 ignores SIGTERM.
    assert result.ended - root.ended_at < 5.0
    signals = {f.rank: f.signal for f in err.failures}
    assert signals[1] == "SIGKILL" and signals[0] == "SIGTERM"
    escapees = probe.logged_pids(result.run_dir)
    assert len(escapees) == 2
    probe.assert_nothing_left(result.run_dir, escapees)
    manifest = read_manifest(result.run_dir)
    assert manifest["state"] == "failed" and manifest["failures"][0]["rank"] == 2


def test_a_rank_killed_by_a_signal_leaves_its_python_stack(tmp_path: Path) -> None:
    """A rank that segfaults (TF's PS chief did once in make test, with an empty log)
    prints its threads' Python stacks through the fault handler, and the run still
    names the signal."""
    import sys

    crash = "import ctypes\ndef deep_in_the_step():\n    ctypes.string_at(0)\ndeep_in_the_step()"
    with pytest.raises(RanksFailed) as info:
        launch([sys.executable, "-c", crash], np=1, results_root=tmp_path, view=None, timeout=60)
    root = info.value.root_cause
    assert root is not None and root.signal == "SIGSEGV"
    log = (Path(info.value.run_dir) / "rank-0.log").read_text()
    assert "Fatal Python error: Segmentation fault" in log and "deep_in_the_step" in log


@pytest.mark.slow
def test_timeout_ends_everything(tmp_path: Path, probe) -> None:
    cmd = probe.rank_command("--sleep", "120", "--ignore-term", "0", "--setsid-child", "1")
    started = time.time()
    result = launch(cmd, np=2, results_root=tmp_path, view=None, timeout=2, grace=1, check=False)
    assert result.state is RunState.TIMED_OUT and result.exit_code == 124
    assert "timed out" in result.reason
    assert result.ended - started < 2 + 5.0
    probe.assert_nothing_left(result.run_dir, probe.logged_pids(result.run_dir))
    assert read_manifest(result.run_dir)["state"] == "timed_out"


class _StopAfter:
    """An observer that presses Stop from another thread once every rank is ready."""

    def __init__(self, ranks: int) -> None:
        self.ranks, self.ready, self.ended = ranks, 0, None
        self.lock = threading.Lock()

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        self.control = control

    def on_line(self, line: Line) -> None:
        if line.text.endswith("ready"):
            with self.lock:
                self.ready += 1
                if self.ready == self.ranks:
                    threading.Thread(target=self.control.cancel, args=("stop pressed",)).start()

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        self.ended = (state, exit_code, dict(rank_exit_codes))


@pytest.mark.slow
def test_cancel_from_another_thread(tmp_path: Path, probe) -> None:
    stop = _StopAfter(ranks=3)
    cmd = probe.rank_command("--sleep", "120", "--spawn-child", "2")
    with pytest.raises(RanksFailed) as info:
        launch(cmd, np=3, hosts="localhost:3", results_root=tmp_path, view=stop, grace=1)
    result = info.value.result  # type: ignore[attr-defined]
    assert result.state is RunState.CANCELLED and result.exit_code == 130
    assert result.reason == "stop pressed"
    assert stop.ended is not None and stop.ended[:2] == ("cancelled", 130)
    assert set(stop.ended[2]) == {0, 1, 2}
    probe.assert_nothing_left(result.run_dir, probe.logged_pids(result.run_dir))


@pytest.mark.slow
def test_keyboard_interrupt_tears_down_and_writes_manifest(start_driver, probe) -> None:
    cmd = probe.rank_command("--sleep", "120", "--ignore-term", "0", "--spawn-child", "1")
    driver = start_driver(command=cmd, np=2, grace=1)
    run_dir = driver.wait_ready(2)
    driver.proc.send_signal(signal.SIGINT)
    _, err = driver.proc.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["state"] == "cancelled" and manifest["exit_code"] == 130
    assert "interrupted" in manifest["reason"]
    probe.assert_nothing_left(run_dir, probe.logged_pids(run_dir))


@pytest.mark.slow
def test_a_second_interrupt_skips_the_grace_period(start_driver, probe) -> None:
    """The first SIGINT cancels (ranks get SIGTERM and 30 s of grace, which they ignore);
    the second kills them at once."""
    cmd = probe.rank_command("--sleep", "120", "--ignore-term")
    driver = start_driver(command=cmd, np=2, grace=30)
    run_dir = driver.wait_ready(2)
    started = time.monotonic()
    driver.proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert driver.proc.poll() is None  # still in the grace period
    driver.proc.send_signal(signal.SIGINT)
    _, err = driver.proc.communicate(timeout=25)
    assert time.monotonic() - started < 20 and "KeyboardInterrupt" in err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["state"] == "cancelled" and "interrupted" in manifest["reason"]
    probe.assert_nothing_left(run_dir, probe.logged_pids(run_dir))


@pytest.mark.slow
def test_kill_9_of_launcher_ends_ranks(start_driver, probe) -> None:
    cmd = probe.rank_command("--sleep", "120", "--spawn-child", "0", "--setsid-child", "1")
    driver = start_driver(command=cmd, np=2, grace=1)
    run_dir = driver.wait_ready(2)
    run_id = json.loads((run_dir / "manifest.json").read_text())["run_id"]
    assert len(probe.marked_pids(run_id)) >= 6  # 2 guards, 2 ranks, a child, an escapee
    driver.proc.kill()
    driver.proc.communicate(timeout=10)
    assert probe.wait_gone(lambda: probe.marked_pids(run_id), within=5.0) == []
    assert not [p for p in probe.logged_pids(run_dir) if probe.alive(p)]
    assert json.loads((run_dir / "manifest.json").read_text())["state"] == "running"
    assert read_manifest(run_dir)["state"] == "orphaned"  # the launcher died mid-run


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"np": 0}, ParameterError, "np=0"),
        ({"np": 3, "hosts": "localhost:2"}, HostSpecError, "more ranks than the 2 slots"),
        ({"launcher": "nope"}, ParameterError, "launcher='nope'"),
        ({"hosts": "h1:2,,"}, HostSpecError, "empty entry"),
        ({"cluster": "no-such-profile"}, HostSpecError, "not found"),
        ({"hosts": "localhost:2", "hostfile": "x"}, HostSpecError, "only one of"),
        ({"timeout": -1}, ParameterError, "timeout"),
        ({"env": {"A=B": "1"}}, ParameterError, "env"),
        ({"command": []}, ParameterError, "command"),
    ],
)
def test_launch_rejects_bad_input_before_starting(tmp_path: Path, kwargs, error, message) -> None:
    args = {"command": ["true"], **kwargs}
    with pytest.raises(error, match=re.escape(message)):
        launch(args.pop("command"), results_root=tmp_path, view=None, **args)
    assert not (tmp_path / "runs").exists()


def test_headless_progress_is_the_default_outside_a_kernel(tmp_path: Path, capsys) -> None:
    pytest.importorskip("lab.cluster.view")
    result = launch(["true"], np=1, results_root=tmp_path)
    out = capsys.readouterr().out
    assert result.ok and result.run_dir.name in out


@pytest.mark.root
@pytest.mark.slow
def test_emulated_cluster_runs_each_rank_in_its_namespace(tmp_path: Path, probe) -> None:
    emulation = pytest.importorskip("lab.cluster.emulation")
    if emulation.missing():
        pytest.skip(emulation.missing())
    cmd = ["sh", "-c", 'echo "ns=$(ip netns identify $$)"']
    result = launch(cmd, np=2, cluster="emulated-2", results_root=tmp_path, view=None)
    namespaces = [
        (result.run_dir / f"rank-{r}.log").read_text().strip().removeprefix("ns=") for r in (0, 1)
    ]
    assert namespaces[0].endswith("-h1") and namespaces[1].endswith("-h2")
    hosts = read_manifest(result.run_dir)["cluster"]["hosts"]
    assert [h["namespace"] for h in hosts] == namespaces
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    assert not [ns for ns in namespaces if ns in listed.stdout]
    probe.assert_nothing_left(result.run_dir)
