"""EST stages on emulated devices, for the real replay of a trace.

A device type of the replay is an emulated host with that type's CPU quota; a stage of a
job is one launch of ``lab.bench.easyscale`` on as many such hosts as the job holds
devices, its ESTs split over them as the simulator's ``Speed`` would split them. The same
stages, one device and k ESTs at a time, measure the step-time table the simulator is
given, so simulation and replay rest on the same runtime and the same devices.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lab.bench.easyscale.config import Config
from lab.errors import NothingMeasured

EXPERIMENT = "easyscale/replay"
WORKLOAD = "bn_cnn"
# Smoke: what a job's mini-batch is (each EST's), and the device types' CPU quotas; three
# devices side by side leave room on a 2-core machine for the launcher.
SMOKE_JOB = {"batch_size": 32, "image_size": 64, "dataset_size": 2048}
SMOKE_TYPES = {"v100": 0.8, "p100": 0.5, "t4": 0.3}


@dataclass
class Stage:
    """One launch of a job's EST stage, running in a thread (``launch`` blocks)."""

    job: str
    counts: dict[str, int]
    split: tuple[tuple[str, int], ...]
    cfg: Config
    launched: float
    result: Any = None
    error: BaseException | None = None
    ended: float | None = None
    thread: threading.Thread | None = None
    taken: bool = False  # the driver has read its end

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def stage_cluster(name: str, split: Sequence[tuple[str, int]], types: Mapping[str, float]) -> Any:
    """An emulated cluster of one host per device of ``split``, each with its type's quota."""
    from lab.cluster.inventory import cluster_from_dict

    data = {
        "name": name,
        "emulated": {"hosts": len(split), "slots": 1},
        "device_types": {t: {"threads": 1, "isa": "native", "cpu": c} for t, c in types.items()},
        "host_device_types": {f"h{i + 1}": t for i, (t, _) in enumerate(split)},
    }
    return cluster_from_dict(data, name)


def start_stage(
    job: str,
    counts: Mapping[str, int],
    split: Sequence[tuple[str, int]],
    cfg: Config,
    types: Mapping[str, float],
    params: Mapping[str, Any],
    results_root: str | os.PathLike[str] | None = None,
    timeout: float = 600.0,
) -> Stage:
    """Launch one stage in a thread; ``Stage.result`` holds its RunResult once it ends."""
    from lab.experiments.easyscale.runs import launch_stage

    stage = Stage(job, dict(counts), tuple(split), cfg, time.time())
    cluster = stage_cluster(f"replay-{job}", split, types)

    def work() -> None:
        try:
            stage.result = launch_stage(
                cfg,
                cluster=cluster,
                experiment=EXPERIMENT,
                timeout=timeout,
                params={**params, "job": job, "launched": stage.launched},
                view=None,
                results_root=results_root,
            )
        except BaseException as e:  # the driver reports it; a thread cannot raise to it
            stage.error = e
        stage.ended = time.time()

    stage.thread = threading.Thread(target=work, name=f"stage-{job}", daemon=True)
    stage.thread.start()
    return stage


def stage_config(ests: int, split: Sequence[tuple[str, int]], steps: int, **more: Any) -> Config:
    """The Config of a stage of a job of ``ests`` ESTs placed as ``split``."""
    placement = ",".join(str(k) for _, k in split)
    return Config(
        ests=ests, processes=len(split), placement=placement, steps=steps, **SMOKE_JOB, **more
    )


def reached_step(run_dir: str | os.PathLike[str]) -> int | None:
    """The step a stage checkpointed at (its next step), from its records."""
    from lab.metrics.store import load_run

    df = load_run(run_dir)
    if "name" not in df:
        return None
    ck = df[(df["kind"] == "event") & (df["name"] == "checkpoint")]
    return int(ck["step"].astype(int).min()) if len(ck) else None


def first_step_after(run_dir: str | os.PathLike[str], launched: float) -> float:
    """Seconds from a stage's launch call to its first step: its restart cost."""
    from lab.metrics.store import load_run

    df = load_run(run_dir)
    steps = df[df["kind"] == "step"]
    return float(steps["time"].astype(float).min()) - launched if len(steps) else float("nan")


def measure_table(
    types: Mapping[str, float] = SMOKE_TYPES,
    ests: Sequence[int] = (1, 2, 3),
    steps: int = 10,
    results_root: str | os.PathLike[str] | None = None,
) -> tuple[pd.DataFrame, float]:
    """EST step times per (device type, ESTs on one device), one single-device stage per
    cell, the device types side by side; and the median restart cost (launch call to
    first step) of those stages.

    Returns:
        (table with the simulator's columns plus batch_size and run_dir, restart seconds).

    Raises:
        NothingMeasured: a stage failed or timed nothing.
    """
    from lab.experiments.easyscale.throughput_table import throughput_table

    stages = []
    for k in ests:
        batch = [
            start_stage(
                f"table-{t}-{k}",
                {t: 1},
                [(t, k)],
                stage_config(k, [(t, k)], steps),
                types,
                {"purpose": "table"},
                results_root,
            )
            for t in types
        ]
        for s in batch:
            s.thread.join()  # type: ignore[union-attr]
        stages += batch
    bad = [s for s in stages if s.error is not None or not (s.result and s.result.ok)]
    if bad:
        raise NothingMeasured(f"EST table stage {bad[0].job} failed: {bad[0].error}")
    dirs = [s.result.run_dir for s in stages]
    table = throughput_table(dirs, warmup=2)
    if table.empty:
        raise NothingMeasured("the EST table stages timed no step")
    table["batch_size"] = SMOKE_JOB["batch_size"]
    restart = float(
        pd.Series([first_step_after(s.result.run_dir, s.launched) for s in stages]).median()
    )
    return table.assign(run_dir=str(Path(dirs[0]).parent)), restart
