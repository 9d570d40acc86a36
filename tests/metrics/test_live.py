"""MetricTrace follows metric records from rank output lines."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from lab.metrics.live import MetricTrace
from lab.metrics.records import format_record


@dataclass(frozen=True)
class L:
    rank: int | None
    stream: str
    text: str


def test_trace_keeps_named_metrics_per_run_and_rank() -> None:
    trace = MetricTrace(["noise_scale"], display=False).for_run("noise scale")
    trace.on_start("/r/run-1", [0, 1], control=None)
    for step in range(3):
        for rank in (0, 1):
            trace.on_line(
                L(
                    rank,
                    "stdout",
                    format_record(
                        "metric", rank=rank, name="noise_scale", value=10.0 * step + rank, step=step
                    ),
                )
            )
    trace.on_line(L(0, "stdout", format_record("metric", rank=0, name="variance", value=1, step=0)))
    trace.on_line(L(0, "stdout", "Iter #1: 10 img/sec per CPU"))
    trace.on_end("succeeded", 0, {0: 0, 1: 0})
    assert trace.points == {
        ("noise scale", "noise_scale", 0): [(0, 0.0), (1, 10.0), (2, 20.0)],
        ("noise scale", "noise_scale", 1): [(0, 1.0), (1, 11.0), (2, 21.0)],
    }
    fig = trace.figure()
    assert len(fig.data) == 2 and list(fig.data[1].y) == [1.0, 11.0, 21.0]
    assert trace.label == ""  # the next run names its own lines


def test_trace_reads_fields_of_step_records() -> None:
    trace = MetricTrace(["noise_scale", "batch_size"], display=False).for_run("adaptive")
    trace.on_line(
        L(
            0,
            "stdout",
            format_record(
                "step", rank=0, step=4, samples=8, seconds=0.1, noise_scale=12.5, batch_size=16
            ),
        )
    )
    assert trace.points == {
        ("adaptive", "noise_scale", 0): [(4, 12.5)],
        ("adaptive", "batch_size", 0): [(4, 16.0)],
    }


def test_split_fields_name_the_lines_of_a_run_with_several_arms() -> None:
    trace = MetricTrace(["noise_scale"], display=False, split=("policy", "start_batch"))
    trace.for_run("fig 4")
    for policy, batch, value in (("adaptive", 32, 1.0), ("fixed", 1024, 2.0)):
        rec = format_record("step", rank=0, step=0, policy=policy, start_batch=batch,
                            seconds=0.1, noise_scale=value)  # fmt: skip
        trace.on_line(L(0, "stdout", rec))
    trace.on_line(L(0, "stdout", format_record("step", rank=0, step=1, noise_scale=3.0)))
    assert trace.points == {
        ("adaptive:32", "noise_scale", 0): [(0, 1.0)],
        ("fixed:1024", "noise_scale", 0): [(0, 2.0)],
        ("fig 4", "noise_scale", 0): [(1, 3.0)],  # without the fields: the run's label
    }


class Sink:
    """Records what was drawn, and from which thread (a LiveFigure stands here in a kernel)."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, list[list[float]]]] = []

    def show(self, fig) -> None:
        self.shown.append((threading.current_thread().name, [list(t.y) for t in fig.data]))


def test_reader_threads_only_append_and_a_refresher_draws(monkeypatch) -> None:
    built: list[str] = []
    original = MetricTrace.figure

    def counting_figure(self):
        built.append(threading.current_thread().name)
        return original(self)

    monkeypatch.setattr(MetricTrace, "figure", counting_figure)
    sink = Sink()
    trace = MetricTrace(["noise_scale"], every=0.01, sink=sink).for_run("ns")
    trace.on_start("/r/run-2", [0], control=None)
    assert sink.shown == [("MainThread", [])]  # first display: in the launching thread

    def reader(steps: range) -> None:
        for step in steps:
            text = format_record("metric", rank=0, name="noise_scale", value=step, step=step)
            trace.on_line(L(0, "stdout", text))

    t = threading.Thread(target=reader, args=(range(5),), name="lab-stdout-(0,)")
    t.start()
    t.join()
    whole = ("distlab-trace", [[0.0, 1.0, 2.0, 3.0, 4.0]])
    deadline = time.monotonic() + 10
    while sink.shown[-1] != whole and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sink.shown[-1] == whole, "the refresher did not draw the new points"
    t = threading.Thread(target=reader, args=(range(5, 8),), name="lab-stdout-(0,)")
    t.start()
    t.join()
    trace.on_end("succeeded", 0, {0: 0})
    assert sink.shown[-1] == ("MainThread", [[float(s) for s in range(8)]])
    assert "lab-stdout-(0,)" not in built and "lab-stdout-(0,)" not in [n for n, _ in sink.shown]
    assert not any(th.name == "distlab-trace" for th in threading.enumerate())
