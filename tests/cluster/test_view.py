"""The run views: RunView fed from real threads, HeadlessProgress's lines, make_view, and
the Stop button clicked through a real kernel while the launching cell still blocks."""

from __future__ import annotations

import html
import io
import json
import os
import queue
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lab.cluster.launchers.base import Line
from lab.cluster.view import HeadlessProgress, RunView, make_view
from lab.cluster.view_render import PLOTLY_MIME, plot_bundle, status_text
from lab.cluster.view_state import RunTracker, throughput_of
from lab.errors import ParameterError
from lab.metrics.records import format_record

REPO = Path(__file__).resolve().parents[2]


class Control:
    """A RunControl that remembers why it was cancelled."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.cancelled = threading.Event()

    def cancel(self, reason: str = "cancelled") -> None:
        self.reasons.append(reason)
        self.cancelled.set()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (format_record("step", rank=1, step=3, samples=64, seconds=0.5), (1, 128.0)),
        ("[1,0]<stdout>:" + format_record("step", step=3, samples=10, seconds=4), (None, 2.5)),
        (format_record("step", rank=0, step=3, samples=64, seconds=0), None),
        (format_record("header", rank=0, model="resnet50"), None),
        ("@lab {not json", None),
        ("Iter #3: 152.4 img/sec per GPU", (None, 152.4)),
        ("[127.0.0.1.10001::stdout] Iter #2: 48.7 img/sec per /gpu:0", (None, 48.7)),
        ("Img/sec per GPU: 75.6 +-1.2", None),
        ("rank 0 says hello", None),
    ],
)
def test_throughput_of_lines(text: str, expected: tuple[int | None, float] | None) -> None:
    assert throughput_of(text) == expected


def shown_lines(value: str) -> list[str]:
    """The text lines an HTML log pane shows."""
    return html.unescape(re.sub(r"<[^>]+>", "", value)).split("\n")


def feed(observer: RunView | HeadlessProgress, rank: int, lines: int) -> None:
    for i in range(lines):
        observer.on_line(Line(rank, "stdout", f"rank {rank} line {i}"))
        if i % 50 == 0:
            rec = format_record("step", rank=rank, step=i, samples=100 * (rank + 1), seconds=1.0)
            observer.on_line(Line(rank, "stdout", rec))


def test_run_view_from_many_threads() -> None:
    view = RunView(log_lines=40, display=False, refresh=0.05)
    control = Control()
    view.on_start("/tmp/results/runs/adhoc/20260101-000000-abcd", [0, 1, 2], control)
    try:
        threads = [threading.Thread(target=feed, args=(view, r, 3000)) for r in (0, 1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        view.on_line(Line(None, "stderr", "launcher: warning"))
        view.refresh()

        assert view.tabs.titles == ("rank 0", "rank 1", "rank 2", "other")
        for rank in (0, 1, 2):
            lines = shown_lines(view.logs[rank].value)
            assert len(lines) == 40  # bounded: the last 40 lines only
            shown = [ln for ln in lines if ln.startswith(f"rank {rank} line")]
            assert shown[-1] == f"rank {rank} line 2999"
            assert len(shown) + sum(ln.startswith("@lab ") for ln in lines) == 40
            numbers = [int(ln.rsplit(" ", 1)[1]) for ln in shown]
            assert numbers == sorted(numbers)  # one rank's lines keep their order
        assert "launcher: warning" in view.logs[None].value
        status = view.status.value
        assert "running" in status
        assert "r0 100.0 samples/s" in status and "r2 300.0 samples/s" in status
        assert f"{3 * (3000 + 60) + 1} lines" in status

        view.stop_button.click()
        assert control.reasons == ["stopped from the view"]
        assert view.stop_button.disabled
    finally:
        view.on_end("cancelled", 143, {0: -15, 1: -15, 2: 0})
    assert not view._thread.is_alive()
    assert "cancelled" in view.status.value
    assert "r0=-15" in view.status.value
    assert view.stop_button.layout.display == "none"


def test_run_view_refresher_draws_by_itself() -> None:
    view = RunView(display=False, refresh=0.05)
    view.on_start("/tmp/run", [0], Control())
    try:
        view.on_line(Line(0, "stdout", "rank 0 says hello"))
        end = time.monotonic() + 10
        while "says hello" not in view.logs[0].value and time.monotonic() < end:
            time.sleep(0.05)
        assert "rank 0 says hello" in view.logs[0].value
    finally:
        view.on_end("succeeded", 0, {0: 0})
    assert "succeeded" in view.status.value


def test_plot_has_one_trace_per_rank() -> None:
    tracker = RunTracker()
    tracker.start("/tmp/run", [0, 1])
    for rank in (0, 1):
        for step in range(5):
            rec = format_record("step", rank=rank, step=step, samples=32, seconds=0.5)
            tracker.add(Line(rank, "stdout", rec))
    fig = plot_bundle(tracker.snapshot())[PLOTLY_MIME]
    assert [t["name"] for t in fig["data"]] == ["rank 0", "rank 1"]
    assert fig["data"][1]["y"] == [64.0] * 5
    json.dumps(fig)  # what goes to the frontend must be plain JSON


def test_headless_progress_lines() -> None:
    out = io.StringIO()
    progress = HeadlessProgress(interval=0.0, stream=out)
    progress.on_start("/r/runs/adhoc/20260101-000000-abcd", [0, 1], Control())
    progress.on_line(Line(0, "stdout", "Iter #1: 152.4 img/sec per GPU"))
    progress.on_line(Line(1, "stdout", format_record("step", rank=1, samples=64, seconds=0.5)))
    progress.on_end("failed", 3, {0: 0, 1: 3})
    lines = out.getvalue().splitlines()
    assert (
        lines[0]
        == "[run 20260101-000000-abcd] started 2 ranks in /r/runs/adhoc/20260101-000000-abcd"
    )
    assert lines[1].startswith("[run 20260101-000000-abcd] running ")
    assert lines[1].endswith("r0 152.4/s  lines 1")
    assert lines[-1].startswith("[run 20260101-000000-abcd] failed ")
    assert lines[-1].endswith("r0 152.4/s  r1 128.0/s  lines 2  exit r1=3")


def test_headless_progress_is_throttled() -> None:
    out = io.StringIO()
    progress = HeadlessProgress(interval=3600, stream=out)
    progress.on_start("/r/run", [0, 1], Control())
    threads = [threading.Thread(target=feed, args=(progress, r, 2000)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    progress.on_end("succeeded", 0, {0: 0, 1: 0})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # the start and the end, nothing in between
    assert "succeeded" in lines[1] and f"lines {2 * 2040}" in lines[1]
    assert status_text(progress._tracker.snapshot()) == lines[1]


def test_make_view_modes() -> None:
    assert make_view("none") is None
    assert make_view(None) is None
    assert isinstance(make_view("auto"), HeadlessProgress)  # no notebook frontend here
    assert isinstance(make_view("headless"), HeadlessProgress)
    assert isinstance(make_view("widget"), RunView)
    with pytest.raises(ParameterError, match="view"):
        make_view("fancy")


# -- a real kernel: the Stop button works while the cell that launched the run blocks ----

BLOCKING_CELL = r"""
import threading, time
from lab.cluster.view import RunView
from lab.cluster.launchers.base import Line
from lab.metrics.records import format_record
stopped = threading.Event()
class Control:
    def cancel(self, reason="cancelled"):
        stopped.set()
view = RunView(refresh=0.1, plot_every=0.2)
view.on_start("/tmp/run", [0, 1], Control())
print("STOP-BUTTON", view.stop_button.model_id, flush=True)
def ranks():
    i = 0
    while not stopped.is_set() and i < 2000:
        for r in (0, 1):
            view.on_line(Line(r, "stdout", f"rank {r} says hello {i}"))
            view.on_line(Line(r, "stdout", format_record("step", rank=r, samples=8, seconds=0.1)))
        i += 1
        time.sleep(0.02)
t = threading.Thread(target=ranks)
t.start()
stopped.wait(40)  # the launching call blocks like this until its ranks end
t.join()
view.on_end("cancelled" if stopped.is_set() else "succeeded", 0, {0: 0, 1: 0})
print("RUN-ENDED", view.snapshot().state, flush=True)
"""


@pytest.fixture
def kernel(tmp_path: Path):
    """A real ipykernel of this interpreter, its directories under tmp_path."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    spec = tmp_path / "kernels" / "distlab-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "distlab test", "language": "python"})
    )
    km = KernelManager(
        kernel_name="distlab-test",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]),
        connection_file=str(tmp_path / "connection.json"),
    )
    env = {
        **os.environ,
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "PYTHONPATH": str(REPO),
    }
    km.start_kernel(env=env, cwd=str(REPO))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
        assert not km.is_alive()


def test_stop_button_works_while_the_cell_blocks(kernel) -> None:
    msg_id = kernel.execute(BLOCKING_CELL)
    seen: dict[str, int] = {}
    text = ""
    clicked_at = None
    plot_updates_from_cell = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            msg = kernel.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        kind, own = msg["msg_type"], msg["parent_header"].get("msg_id") == msg_id
        seen[kind] = seen.get(kind, 0) + 1
        if kind == "error":
            pytest.fail("\n".join(msg["content"]["traceback"]))
        if kind == "update_display_data" and PLOTLY_MIME in msg["content"]["data"] and own:
            plot_updates_from_cell += 1
        if kind == "stream":
            text += msg["content"]["text"]
        if clicked_at is None and "STOP-BUTTON" in text and plot_updates_from_cell >= 2:
            comm_id = text.split("STOP-BUTTON", 1)[1].split()[0]
            click = {"method": "custom", "content": {"event": "click"}}
            kernel.shell_channel.send(
                kernel.session.msg("comm_msg", {"comm_id": comm_id, "data": click})
            )
            clicked_at = time.monotonic()
        if kind == "status" and own and msg["content"]["execution_state"] == "idle":
            break
    assert clicked_at is not None, f"the button never appeared; output: {text!r}"
    # The click was handled while the cell still blocked: the run ended as cancelled, not
    # after its 2000 steps or the cell's 40 s wait.
    assert "RUN-ENDED cancelled" in text, text
    # Redraws from the refresher thread reach the frontend as the running cell's output.
    assert plot_updates_from_cell >= 2
    assert seen.get("comm_msg", 0) > 0


THROTTLED_RUN = REPO / "tests" / "cluster" / "data" / "throttled_run"


def test_host_timeline_of_a_recorded_throttled_run() -> None:
    """A real Fig 9 point's hosts.jsonl: the two busy hosts ran out of quota from the first
    half second on, the idle one never did, and each host knows its rank."""
    from lab.cluster.view_hosts import read_timeline

    timeline = read_timeline(THROTTLED_RUN)
    assert timeline is not None
    h1, h2, h3 = (timeline.totals[h] for h in ("h1", "h2", "h3"))
    assert (h1.nr_throttled, h1.nr_periods, h1.ranks) == (54, 60, (0,))
    assert h2.ranks == (1,) and h2.throttled_fraction > 0.9 and h2.throttled_s > 2.9
    assert h3.nr_throttled == 0 and h3.ranks == ()
    assert timeline.throttled_spans("h1") == [(0.503, 6.028)]  # the first interval was not
    assert timeline.throttled_spans("h3") == []
    assert timeline.intervals["h1"][0] == (0.0, 0.503, 0.0)
    assert 1.0 < sum(v for _, v in timeline.outside) / len(timeline.outside) < 1.5
    assert read_timeline(THROTTLED_RUN / "missing") is None


def test_views_show_when_a_host_was_throttled(tmp_path: Path) -> None:
    """The plot carries one throttled band per host on a second axis plus the outside load,
    the saved summary a table saying which host was throttled and when, and the progress
    line ends with the hosts' throttling."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(THROTTLED_RUN, run)
    (run / "hosts.jsonl").open("a").write('{"t": 6.5, "host": "h1", "cpu_')  # half-written
    view = RunView(display=False, refresh=10)
    view.on_start(str(run), [0, 1], Control())
    view.on_line(Line(0, "stdout", format_record("step", rank=0, step=1, samples=32, seconds=1)))
    view.on_end("succeeded", 0, {0: 0, 1: 0})
    shown = html.unescape(re.sub(r"<[^>]+>", " ", view.hosts.value))
    assert re.search(r"h1 \(rank 0\)\s+2\.28\s+54/60\s+90%\s+3\.01\s+0\.5–6\.0 s", shown)
    assert re.search(r"h3\s+0\.00\s+0/2\s+0%\s+0\.00\s+—", shown)
    assert "outside load: 1.21 cores on average" in shown
    summary = view._box_bundle(view.snapshot())
    assert "distlab-hosts" in summary["text/html"] and "h2 throttled 92%" in summary["text/plain"]
    fig = plot_bundle(view.snapshot(), read_timeline_of(run))[PLOTLY_MIME]
    bands = {t["name"]: t for t in fig["data"] if t.get("yaxis") == "y2"}
    assert set(bands) == {"h1 throttled %", "h2 throttled %", "h3 throttled %",
                          "outside load % of machine"}  # fmt: skip
    assert max(bands["h1 throttled %"]["y"]) == 100.0 and max(bands["h3 throttled %"]["y"]) == 0
    assert fig["layout"]["yaxis2"]["range"] == [0, 100]
    out = io.StringIO()
    progress = HeadlessProgress(stream=out)
    progress.on_start(str(run), [0, 1], Control())
    progress.on_end("succeeded", 0, {0: 0, 1: 0})
    last = out.getvalue().splitlines()[-1]
    assert "hosts: h1 throttled 90% (3.0 s)" in last and "outside load 1.21 cores" in last


def test_views_without_host_samples_show_no_hosts(tmp_path: Path) -> None:
    tracker = RunTracker()
    tracker.start(str(tmp_path), [0])
    fig = plot_bundle(tracker.snapshot(), read_timeline_of(tmp_path))[PLOTLY_MIME]
    assert fig["data"] == [] and "yaxis2" not in fig["layout"]


def read_timeline_of(run: Path) -> Any:
    from lab.cluster.view_hosts import read_timeline

    return read_timeline(run)


# -- what the view says: clock, stop, words, colours, the compact plot, a sweep's box ------


def test_the_clock_ticks_while_the_ranks_are_silent() -> None:
    view = RunView(display=False, refresh=0.05)
    view.on_start("/tmp/run", [0], Control())
    try:
        first = view.status.value
        end = time.monotonic() + 30
        while view.status.value == first and time.monotonic() < end:
            time.sleep(0.05)
        assert view.status.value != first  # no line came, the elapsed seconds moved on
        assert view.snapshot().lines == 0
    finally:
        view.on_end("succeeded", 0, {0: 0})


def test_after_stop_the_reason_comes_first_and_the_consequences_are_folded(
    tmp_path: Path,
) -> None:
    """Lines from before Stop stay in view; Horovod's traceback and the guard's teardown
    that follow it are folded under one grey line; the status reads the manifest's reason,
    in amber, the exit codes folded too."""
    (tmp_path / "manifest.json").write_text(json.dumps({"reason": "stopped from the view"}))
    view = RunView(display=False, refresh=10)
    control = Control()
    view.on_start(str(tmp_path), [0], control)
    view.on_line(Line(0, "stderr", "distlab: rank pinned to CPU 0"))
    view.on_line(Line(0, "stdout", "rank 0 step 1"))
    view.stop_button.click()
    assert control.reasons == ["stopped from the view"]
    view.refresh()
    assert "stopping (stopped from the view)" in view.status.value
    view.on_line(Line(None, "stderr", "[guard] pid 42 exited; ending the processes it left behind"))
    view.on_line(Line(None, "stderr", "horovod.runner.common.util.network.NoValidAddressesFound"))
    view.on_line(Line(None, "stderr", "Process 0 exit with status code -15."))
    view.on_end("cancelled", 130, {0: -15})
    status = view.status.value
    assert re.search(r'<b style="color:#b26b00">stopped from the view \(cancelled\)</b>', status)
    head, folded = status.split("<details", 1)
    # the signal's code is folded; the head names the run directory, whose temporary path
    # may hold "-15" of its own (pytest-156), so it is left out of the look
    head = re.sub(r"<code>[^<]*</code>", "", head)
    assert "-15" not in head and "exit codes r0=-15" in folded
    rank0, other = view.logs[0].value, view.logs[None].value
    assert "rank 0 step 1" in rank0 and "<details" not in rank0
    assert 'color:#999">distlab: rank pinned to CPU 0' in rank0  # housekeeping is grey
    before, after = other.split("<details", 1)
    assert "NoValidAddressesFound" not in before and "NoValidAddressesFound" in after
    assert "after the stop: 3 lines" in after
    assert "after the stop: 3 lines" in view._box_bundle(view.snapshot())["text/html"]


@pytest.mark.parametrize(
    ("state", "words"),
    [("succeeded", "succeeded"), ("timed_out", "timed out"), ("failed", "failed")],
)
def test_states_are_said_in_words(state: str, words: str) -> None:
    from lab.cluster.runstate import RunState
    from lab.cluster.view_render import state_words

    assert state_words(state) == words == state_words(RunState(state))
    tracker = RunTracker()
    tracker.start("/tmp/run", [0])
    tracker.end(state, 0, {0: 0}, reason="timed out after 300s" if state == "timed_out" else "")
    assert "RunState" not in status_text(tracker.snapshot())
    assert words in status_text(tracker.snapshot())


def test_a_view_inside_another_widget_draws_a_compact_plot() -> None:
    view = RunView(display=False, refresh=10)
    view.on_start("/tmp/run", [0, 1], Control())
    for step in range(4):
        for rank in (0, 1):
            rec = format_record("step", rank=rank, step=step, samples=32 * (rank + 1), seconds=0.5)
            view.on_line(Line(rank, "stdout", rec))
    view.on_end("succeeded", 0, {0: 0, 1: 0})
    svg = view.spark.value
    assert svg.startswith('<svg class="distlab-spark"') and svg.count("<polyline") == 2
    assert "up to 128 samples/s" in svg and ">rank 1</tspan>" in svg
    assert view.spark in view.box.children
    assert view.snapshot().throughput == pytest.approx(64.0 + 128.0)
    assert "distlab-spark" in view._box_bundle(view.snapshot())["text/html"]


def test_a_sweep_shows_one_view_for_the_running_point_and_a_table_of_the_done() -> None:
    from lab.cluster.view_sweep import SweepView, active_sweep

    with SweepView("t/sweep", 3, display=False, widgets=True) as sweep:
        boxes = []
        for i in range(3):
            sweep.running(f"workers={i + 1}")
            assert f"running: workers={i + 1}" in sweep.header.value
            observer = make_view("auto")  # what launch() asks for
            observer.on_start(f"/tmp/run{i}", [0], Control())
            observer.on_line(Line(0, "stdout", f"point {i} says hello"))
            assert sweep.current.children == (observer.view.box,)  # the previous one went
            boxes.append(observer.view.box)
            observer.on_end("succeeded", 0, {0: 0})
            rows = [{"point": f"workers={j + 1}", "state": "succeeded", "samples/s": 10.0 * j}
                    for j in range(i + 1)]  # fmt: skip
            sweep.done(rows)
        assert len(set(map(id, boxes))) == 3
        assert sweep.table.value.count("<tr>") == 4 and "20.0" in sweep.table.value
        assert "3 of 3 done" in sweep.header.value
    assert active_sweep() is None
    assert isinstance(make_view("auto"), HeadlessProgress)  # no sweep, no frontend
    assert "workers=3" in sweep._bundle()["text/html"]
