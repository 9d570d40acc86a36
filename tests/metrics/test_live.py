"""MetricTrace follows metric records from rank output lines."""

from __future__ import annotations

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
