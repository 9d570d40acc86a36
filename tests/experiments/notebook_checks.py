"""What a notebook's own runs must show beyond having run: checks the smoke-scale notebook
test makes on the runs the notebook launched, each in place of an end-to-end test that would
launch the same runs again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from lab.metrics.layout import read_manifest
from lab.metrics.records import parse_record


def fig7_runs_resize_and_fill_their_bins(results: Path) -> None:
    """Fig 7's runs (Horovod Elastic under horovodrun --gloo, KungFu through its config
    server; 1 -> 2 -> 1 workers on the notebook's timed schedule): each system ran, asked
    for 1, 2 and 1 workers as the schedule came due, both resizes are served with a
    latency, steps ran at both sizes, and every bin of its figure holds the samples the
    ranks logged as ending in it; the schedule's stop ended it."""
    from lab.bench.elastic import resize_latencies, throughput_by_size
    from lab.experiments.kungfu import fig7

    runs = [d for d in (results / "runs" / fig7.EXPERIMENT).iterdir() if d.is_dir()]
    runs = [d for d in runs if read_manifest(d).get("state") == "succeeded"]
    assert {fig7.system_of(d) for d in runs} == {fig7.SYSTEM, fig7.KUNGFU}, runs
    for run in runs:
        records = fig7._records(run)  # the ranks' records and the driver's host changes
        asks = [int(e["slots"]) for e in fig7.host_changes(run) if e.get("name") == "discovery"]
        assert asks == [1, 2, 1], (run, asks)
        latencies = resize_latencies(records)
        assert [(r["old_size"], r["new_size"]) for r in latencies] == [(1, 2), (2, 1)], run
        assert all(r["latency"] is not None and r["latency"] > 0 for r in latencies), latencies
        assert set(throughput_by_size(records)) == {1, 2}, run
        (trace,) = fig7.figure(str(run)).data
        logged = _logged_steps(run)
        t0 = min(float(e["time"]) for e in fig7.host_changes(run))
        for mid, total in zip(trace.x, trace.y, strict=True):
            ended = logged[(logged["time"] - t0 >= mid - 0.5) & (logged["time"] - t0 < mid + 0.5)]
            assert total == pytest.approx(ended["samples"].sum()), (run, mid)
        rates = (logged["samples"] / logged["seconds"]).groupby(logged["rank"]).median()
        assert 0 < max(trace.y) <= 1.2 * rates.sum(), run
        stop = read_manifest(run)["params"]["schedule"].rsplit(",", 1)[-1]
        assert stop.endswith(":stop"), stop
        span = logged["time"].max() - t0
        assert span < float(stop.split(":")[0]) + 15, (run, span)  # the schedule stopped it


def _logged_steps(run: Path) -> pd.DataFrame:
    """The step records of a run's rank logs (launcher tags and other lines skipped)."""
    rows = [
        rec
        for log in run.glob("rank-*.log")
        for line in log.read_text(errors="replace").splitlines()
        if (rec := parse_record(line)) and rec.get("kind") == "step" and rec.get("samples")
    ]
    return pd.DataFrame(rows)


CHECKS: dict[str, Callable[[Path], None]] = {
    "kungfu/fig7_scaling.ipynb": fig7_runs_resize_and_fill_their_bins,
}
