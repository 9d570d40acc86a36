"""What a stand-in step-time run measured, read back from its run directory."""

from __future__ import annotations

import os

import pandas as pd

from lab.errors import NothingMeasured

EXPERIMENT = "easyscale/standin_steptimes"


def step_seconds(run_dir: str | os.PathLike[str], window_s: float = 0.3) -> float:
    """Seconds per timed step of a run: the median over consecutive windows of at least
    ``window_s`` of each window's mean. A window's mean, not one step's time, because a CPU
    quota throttles within 100 ms periods; the median of windows, because other work on a
    shared machine comes in bursts."""
    import numpy as np

    from lab.metrics import load_run

    records = load_run(run_dir)
    warm = records.get("warmup", pd.Series(False, index=records.index))
    timed = ~warm.astype("boolean").fillna(False).astype(bool)
    seconds = records.loc[(records["kind"] == "step") & timed, "seconds"].astype(float)
    if seconds.empty:
        return float("nan")
    means, total, n = [], 0.0, 0
    for s in seconds:
        total, n = total + s, n + 1
        if total >= window_s:
            means.append(total / n)
            total, n = 0.0, 0
    if not means:  # the whole run is shorter than one window
        return float(seconds.mean())
    return float(np.median(means))


def startup_seconds(
    experiment: str = EXPERIMENT, results_root: str | os.PathLike[str] | None = None
) -> float:
    """Median seconds from a stand-in run's start to its first step: what starting (or
    restarting) a job costs here — processes, imports, model — measured, not assumed."""
    import statistics

    from lab.metrics import load_run
    from lab.metrics.store import list_runs, read_manifest

    waits = []
    for run_dir in list_runs(experiment, results_root):
        manifest = read_manifest(run_dir)
        started = (manifest.get("started") or {}).get("epoch")
        if manifest.get("state") != "succeeded" or not started:
            continue
        records = load_run(run_dir)
        steps = records[records["kind"] == "step"]
        if len(steps) and "time" in steps:
            waits.append(float(steps["time"].astype(float).min()) - float(started))
    if not waits:
        raise NothingMeasured(f"no succeeded stand-in run under results/runs/{experiment}")
    return float(statistics.median(waits))
