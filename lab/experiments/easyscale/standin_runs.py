"""What the stand-in step-time runs measured, read back from their run directories.

A stand-in run (``lab.bench.torch_step_sweep``) has one rank per device stand-in, in the
order of its ``device_types`` parameter, and each rank prints one ``step_seconds`` metric
record per configuration (image size, micro-batches k) it measured.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured

EXPERIMENT = "easyscale/standin_steptimes"
MEASURED = ("model", "image_size", "batch_size", "micro_batches", "step_seconds")


def _succeeded(experiment: str, results_root: str | os.PathLike[str] | None) -> list[tuple]:
    """(run dir, manifest) of every succeeded stand-in run, oldest first."""
    from lab.metrics.store import list_runs, read_manifest

    out = []
    for run_dir in list_runs(experiment, results_root):
        manifest = read_manifest(run_dir)
        params = manifest.get("params") or {}
        if manifest.get("state") == "succeeded" and "device_types" in params:
            out.append((Path(run_dir), manifest))
    return out


def measured(
    experiment: str = EXPERIMENT, results_root: str | os.PathLike[str] | None = None
) -> pd.DataFrame:
    """One row per (run, rank, configuration) of the succeeded stand-in runs, oldest run
    first: ``MEASURED`` columns plus device_type, device_cpu, device_threads and run_dir.

    Raises:
        NothingMeasured: no succeeded stand-in run, or none printed a step time.
    """
    from lab.metrics import load_run

    rows: list[dict[str, Any]] = []
    for run_dir, manifest in _succeeded(experiment, results_root):
        p = manifest["params"]
        records = load_run(run_dir)
        if "name" not in records:
            continue
        metrics = records[(records["kind"] == "metric") & (records["name"] == "step_seconds")]
        for r in metrics.itertuples(index=False):
            rank = int(r.rank)
            if not 0 <= rank < len(p["device_types"]) or not float(r.value) > 0:
                continue
            rows.append(
                {
                    "model": r.model,
                    "image_size": int(r.image_size),
                    "batch_size": int(r.batch_size),
                    "micro_batches": int(r.micro_batches),
                    "step_seconds": float(r.value),
                    "device_type": p["device_types"][rank],
                    "device_cpu": p["device_cpus"][rank],
                    "device_threads": int(p["device_threads"][rank]),
                    "run_dir": str(run_dir),
                }
            )
    if not rows:
        raise NothingMeasured(f"no succeeded stand-in run under results/runs/{experiment}")
    return pd.DataFrame(rows)


def startup_seconds(
    experiment: str = EXPERIMENT, results_root: str | os.PathLike[str] | None = None
) -> float:
    """Median seconds from a stand-in run's start to a rank's first step: what starting (or
    restarting) a job on a device costs here — processes, imports, model — measured, not
    assumed."""
    runs = [run_dir for run_dir, _ in _succeeded(experiment, results_root)]
    return startup_of(runs, f"no succeeded stand-in run under results/runs/{experiment}")


def startup_of(run_dirs: Iterable[str | os.PathLike[str]], none: str = "") -> float:
    """Median seconds from a run's start to a rank's first step, over ``run_dirs`` (any
    runs: the stand-ins', or EST runs at paper scale).

    Raises:
        NothingMeasured: no run has a start time and a step (``none`` says where).
    """
    import statistics

    from lab.metrics import load_run
    from lab.metrics.store import read_manifest

    waits = []
    for run_dir in run_dirs:
        started = (read_manifest(run_dir).get("started") or {}).get("epoch")
        records = load_run(run_dir)
        steps = records[records["kind"] == "step"]
        if not started or steps.empty or "time" not in steps:
            continue
        first = steps.groupby("rank")["time"].min().astype(float)
        waits.extend(float(t) - float(started) for t in first)
    if not waits:
        raise NothingMeasured(none or "no run with a start time and a step")
    return float(statistics.median(waits))
