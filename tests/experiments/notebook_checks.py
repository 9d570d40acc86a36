"""What a notebook's own runs must show beyond having run: checks the smoke-scale notebook
test makes on the runs the notebook launched, each in place of an end-to-end test that would
launch the same runs again."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def adaptive_runs_grow_the_batch_with_the_noise_scale(results: Path) -> None:
    """Fig 4's runs (the teacher task under horovodrun, 2 ranks, through the notebook's
    runner): both ranks pinned to a core of their own behind the affinity wrapper; in every
    seed the adaptive arm's smoothed noise scale grows many-fold as the loss falls, its
    batch grows with it (never shrinking, the same decisions on both ranks) until the
    target loss, which its summary reports; the garbage is frozen before each arm's first
    timed step."""
    from lab.experiments.kungfu import adaptive

    runs = [d for d in (results / "runs" / adaptive.EXPERIMENT).iterdir() if d.is_dir()]
    runs = [d for d in runs if read_manifest(d).get("state") == "succeeded"]
    assert runs, f"no succeeded run under {adaptive.EXPERIMENT}"
    for run in runs:
        manifest = read_manifest(run)
        assert manifest["params"]["pin_cpus"] is True
        assert manifest["command"][1:3] == ["-m", "lab.cluster.affinity"], manifest["command"]
        logs = [(run / f"rank-{r}.log").read_text() for r in (0, 1)]
        assert ["pinned to CPU" in log for log in logs] == [True, True]
        recs = [r for log in logs for line in log.splitlines() if (r := parse_record(line))]
        arms = [r for r in recs if r["kind"] == "step" and r["rank"] == 0]
        for seed in sorted({r["seed"] for r in arms}):
            steps = [r for r in arms if r["seed"] == seed and r["policy"] == "adaptive"]
            _adapted(steps, [r for r in recs if r.get("seed") == seed])
        mine = [r for r in recs if r["rank"] == 0 and r["kind"] in ("step", "event")]
        frozen = [i for i, r in enumerate(mine) if r.get("name") == "gc_frozen"]
        assert frozen and all(mine[i + 1]["kind"] == "step" for i in frozen), run
        assert all(mine[i + 1]["step"] == 0 for i in frozen), run


def _adapted(steps: list[dict[str, Any]], seed_recs: list[dict[str, Any]]) -> None:
    """One seed's adaptive arm grew its batch with the noise scale (rank 0's steps)."""
    noise = [r["noise_scale"] for r in steps]
    assert len(steps) >= 60 and all(math.isfinite(x) for x in noise), len(steps)
    early, late = statistics.median(noise[5:25]), statistics.median(noise[-20:])
    assert late > 5 * early > 0, (early, late)  # grows as the loss falls (McCandlish et al.)
    assert steps[-1]["eval_loss"] < steps[0]["eval_loss"]
    batches = [r["batch_size"] for r in steps]
    assert batches == sorted(batches) and batches[-1] >= 8 * batches[0]  # grew, never shrank
    assert all(r["samples"] * 2 == r["batch_size"] for r in steps)
    changes = {
        (r["rank"], r["step"], r["new"])
        for r in seed_recs
        if r.get("name") == "batch_size" and r.get("policy", "adaptive") == "adaptive"
    }
    assert {(s, n) for rk, s, n in changes if rk == 0} == {
        (s, n) for rk, s, n in changes if rk == 1
    }
    summary = next(
        r for r in seed_recs if r["kind"] == "summary" and r["rank"] == 0
        and r["policy"] == "adaptive"
    )  # fmt: skip
    assert summary["steps_to_target"] == len(steps) and summary["time_to_target"] > 0
    assert summary["eval_loss"] <= summary["target_loss"]


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
    "kungfu/adaptive_batch.ipynb": adaptive_runs_grow_the_batch_with_the_noise_scale,
}
