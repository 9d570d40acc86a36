"""A run whose Slurm job must wait: the view says "queued (reason: <squeue's reason>)"
while it waits, then the run starts; the manifest keeps how long and why. Against a real
single-node Slurm (lab.cluster.slurm.testbed): another allocation holds the node's CPUs,
so Slurm itself gives the reason."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import pytest
from slurm_helpers import slurm_profile

from lab.cluster.launching import launch
from lab.cluster.observers import FanOut
from lab.cluster.slurm.testbed import LocalSlurm
from lab.cluster.view import HeadlessProgress, RunView

RANK = "import os; print('rank', os.environ['RANK'], 'job', os.environ.get('SLURM_JOB_ID'))"


class Waits:
    """Records what the run said while it waited; frees the node once it heard a reason."""

    def __init__(self, release) -> None:  # type: ignore[no-untyped-def]
        self.release = release
        self.said: list[tuple[float, str]] = []
        self.started_at: float | None = None

    def on_pending(self, words: str, control=None) -> None:  # type: ignore[no-untyped-def]
        self.said.append((time.monotonic(), words))
        if len(self.said) == 1:
            self.release()

    def on_start(self, run_dir, ranks, control) -> None:  # type: ignore[no-untyped-def]
        self.started_at = time.monotonic()

    def on_line(self, line) -> None:  # type: ignore[no-untyped-def]
        pass

    def on_end(self, state, exit_code, rank_exit_codes) -> None:  # type: ignore[no-untyped-def]
        pass


def test_a_waiting_job_is_shown_queued_with_squeues_reason_then_runs(
    slurm: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    profile = slurm_profile(tmp_path / "slurm-test.yaml", tasks_per_node=slurm.cpus)
    holder = _hold_every_cpu(slurm)
    freed = threading.Event()

    def release() -> None:
        slurm.run("scancel", holder)
        freed.set()

    waits = Waits(release)
    printed = io.StringIO()
    view = RunView(display=False, refresh=0.05)
    try:
        result = launch(
            ["python", "-c", RANK],
            np=slurm.cpus,
            cluster=str(profile),
            view=FanOut(HeadlessProgress(stream=printed), view, waits),
            timeout=60,
            results_root=tmp_path / "results",
        )
    finally:
        if not freed.is_set():
            release()
    assert result.ok, result.reason
    words = [w for _, w in waits.said]
    assert words and words[0] == "queued (reason: Resources)", words
    assert waits.started_at is not None and waits.started_at > waits.said[0][0]
    text = printed.getvalue()
    started = text.find(f"started {slurm.cpus} ranks")
    assert 0 <= text.find("queued (reason: Resources)") < started, text
    assert "waited" in view.waiting.value and "queued (reason: Resources)" in view.waiting.value
    info = json.loads((Path(result.run_dir) / "manifest.json").read_text())["slurm"]
    assert info["pending_reasons"][0] == "Resources" and info["queued_seconds"] > 0
    log = (Path(result.run_dir) / "rank-0.log").read_text()
    assert f"job {info['job_id']}" in log and info["job_id"] != holder
    print(f"queued {info['queued_seconds']} s, reasons {info['pending_reasons']}")
    assert slurm.queue_within(5.0) == []


def test_the_status_line_of_a_queued_run() -> None:
    from lab.cluster.view_render import status_html, status_text
    from lab.cluster.view_state import RunTracker

    tracker = RunTracker()
    tracker.pending("queued (reason: Priority)")
    snap = tracker.snapshot()
    assert snap.state == "queued"
    assert "queued (reason: Priority)" in status_text(snap)
    assert "queued (reason: Priority)" in status_html(snap) and "<code>" not in status_html(snap)
    tracker.start("/r/runs/x/20260101-000000-abc", [0, 1])
    assert tracker.snapshot().state == "running"


class ClicksStop:
    """Clicks the view's Stop once the run has waited ``after`` seconds in the queue."""

    def __init__(self, view: RunView, after: float = 1.5) -> None:
        self.view, self.after = view, after
        self.first: float | None = None
        self.clicked_at: float | None = None
        self.ended: tuple[str, int] | None = None

    def on_pending(self, words, control=None) -> None:  # type: ignore[no-untyped-def]
        self.first = self.first or time.monotonic()
        threading.Timer(self.after, self.click).start()

    def click(self) -> None:
        if self.clicked_at is None and self.view.stop_button is not None:
            assert not self.view.stop_button.disabled
            self.clicked_at = time.monotonic()
            self.view.stop_button.click()

    def on_start(self, run_dir, ranks, control) -> None:  # type: ignore[no-untyped-def]
        raise AssertionError("the run started although its node was held")

    def on_line(self, line) -> None:  # type: ignore[no-untyped-def]
        pass

    def on_end(self, state, exit_code, rank_exit_codes) -> None:  # type: ignore[no-untyped-def]
        self.ended = (state, exit_code)


def test_stop_while_queued_cancels_the_waiting_job(
    slurm: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that cannot start (another allocation holds the node's CPUs): the view shows
    Stop beside "queued (reason: Resources)"; Stop ends the run as cancelled and the job
    leaves squeue within 5 s; the holder's job is untouched."""
    from lab.errors import RanksFailed

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    profile = slurm_profile(tmp_path / "slurm-test.yaml", tasks_per_node=slurm.cpus)
    holder = _hold_every_cpu(slurm)
    view = RunView(display=False, refresh=0.05)
    stopper = ClicksStop(view)
    try:
        with pytest.raises(RanksFailed) as failed:
            launch(
                ["python", "-c", RANK],
                np=slurm.cpus,
                cluster=str(profile),
                view=FanOut(view, stopper),
                timeout=60,
                results_root=tmp_path / "results",
            )
        returned = time.monotonic()
        left = slurm.queue()
    finally:
        slurm.run("scancel", holder)
    assert stopper.clicked_at is not None, "the view never had a Stop while queued"
    took = returned - stopper.clicked_at
    assert took < 5.0, f"Stop took {took:.2f} s to end the queued run"
    assert left == [holder], f"after Stop squeue still lists {left} (holder {holder})"
    result = failed.value.result  # type: ignore[attr-defined]
    assert result.state.value == "cancelled" and result.exit_code == 130
    assert result.reason == "stopped from the view while queued (reason: Resources)"
    assert stopper.ended == ("cancelled", 130)
    assert "(cancelled)" in view.waiting.value and "stopped from the view" in view.waiting.value
    assert view.stop_button.layout.display == "none"
    manifest = json.loads((Path(result.run_dir) / "manifest.json").read_text())
    assert manifest["state"] == "cancelled" and manifest["processes"] == []
    assert manifest["slurm"]["job_id"] is None and manifest["slurm"]["pending_reasons"] == [
        "Resources"
    ]
    assert manifest["slurm"]["queued_seconds"] >= 1.0
    assert not list(Path(result.run_dir).glob("rank-*.log"))
    print(f"Stop while queued: run ended {took:.2f} s after the click, queue empty of it")
    assert slurm.queue_within(5.0) == []


def _hold_every_cpu(slurm: LocalSlurm) -> str:
    """Another allocation on every CPU of the node (a job named holder); its job id."""
    held = slurm.run(
        "salloc", "--no-shell", "-N1", f"-n{slurm.cpus}", "--time=00:02:00", "--job-name=holder"
    )
    assert "Granted job allocation" in held.stderr, held.stderr
    return held.stderr.split("Granted job allocation")[1].split()[0]
