"""Step times measured by the lab on stand-ins for the paper's GPUs and workloads.

Until EST runs on real devices give the step-time table, the lab measures one: each
device type is stood in for by a CPU share of this machine (a one-host emulated cluster
with a cgroup CPU quota, or the plain local machine with a thread count), each of the
paper's workloads by a PyTorch workload (``lab.bench.torch_synthetic``) of some input
size, and k ESTs on one device by ``--micro-batches k``: k mini-batches one after another
per step on the same device, as ESTs time-share it. Every measurement is a real run
through ``lab.cluster.launch``, kept as a run directory and resumed from there.

The shares are the lab's choice, not the GPUs' published speed ratios: they make device
types differ in speed so the policies have something to choose between.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.easyscale.standin_runs import EXPERIMENT, startup_seconds, step_seconds
from lab.experiments.easyscale.steptimes import COLUMNS

log = logging.getLogger(__name__)

__all__ = ["EXPERIMENT", "measure", "points", "standin_table", "startup_seconds", "step_seconds"]


@dataclass(frozen=True)
class DeviceStandIn:
    """What stands in for one device type.

    Args:
        device_type: the name the trace and cluster use (``v100`` ...).
        cpu: cores of an emulated host's CPU quota (needs root); None runs on the local
            machine without a quota.
        threads: intra-op threads of the run (``OMP_NUM_THREADS``).
    """

    device_type: str
    cpu: float | None = None
    threads: int = 1

    @property
    def label(self) -> str:
        share = f"{self.cpu:g} core quota" if self.cpu else "no quota"
        return f"{self.device_type} ← CPU, {share}, {self.threads} thread(s)"


@dataclass(frozen=True)
class WorkloadStandIn:
    """What stands in for one of the paper's workloads: a torch_synthetic model and size."""

    workload: str
    model: str = "tiny_cnn"
    image_size: int = 128
    batch_size: int = 32

    @property
    def config(self) -> tuple[str, int, int]:
        return (self.model, self.image_size, self.batch_size)

    @property
    def label(self) -> str:
        m, s, b = self.config
        return f"{m} {s}×{s}, batch {b}"


# Smoke: three CPU shares for the three GPU types, and three input sizes of the lab's tiny
# CNN for the paper's eight workloads (lighter and heavier per-step compute; every step
# long enough, tens of ms, that 20 of them average over the quota's 100 ms periods).
SMOKE_DEVICES = (
    DeviceStandIn("v100", cpu=1.0),
    DeviceStandIn("p100", cpu=0.6),
    DeviceStandIn("t4", cpu=0.35),
)
_LIGHT, _MEDIUM, _HEAVY = (128, 32), (176, 32), (224, 32)
SMOKE_WORKLOADS = tuple(
    WorkloadStandIn(w, image_size=s, batch_size=b)
    for w, (s, b) in {
        "shufflenetv2": _LIGHT,
        "ncf": _LIGHT,
        "bert": _MEDIUM,
        "electra": _MEDIUM,
        "swintransformer": _MEDIUM,
        "resnet50": _HEAVY,
        "vgg19": _HEAVY,
        "yolov3": _HEAVY,
    }.items()
)


def points(
    workloads: Sequence[WorkloadStandIn], devices: Sequence[DeviceStandIn], ests: Sequence[int]
) -> list[dict[str, Any]]:
    """One point per distinct (stand-in config, device stand-in, k): workloads sharing a
    stand-in share its runs."""
    configs = sorted({w.config for w in workloads})
    return [
        {
            "model": m,
            "image_size": s,
            "batch_size": b,
            "ests_per_device": int(k),
            **{f"device_{key}": v for key, v in asdict(d).items()},
        }
        for (m, s, b) in configs
        for d in devices
        for k in ests
    ]


def _cluster(device: DeviceStandIn) -> Any:
    if device.cpu is None:
        return "local"
    from lab.cluster.inventory import cluster_from_dict

    name = f"standin-{device.device_type}"
    spec = {"hosts": 1, "slots": 1, "cpu": device.cpu}
    return cluster_from_dict({"name": name, "emulated": spec}, name)


def run_point(
    point: dict[str, Any],
    steps: int,
    experiment: str = EXPERIMENT,
    results_root: str | os.PathLike[str] | None = None,
    timeout: float = 300.0,
) -> Any:
    """One stand-in measurement as a real run; returns its RunResult (failed ones too)."""
    from lab.cluster import launch

    device = DeviceStandIn(
        point["device_device_type"], point["device_cpu"], int(point["device_threads"])
    )
    argv = [
        "python",
        "-m",
        "lab.bench.torch_synthetic",
        "--device",
        "cpu",
        "--model",
        str(point["model"]),
        "--image-size",
        str(point["image_size"]),
        "--batch-size",
        str(point["batch_size"]),
        "--micro-batches",
        str(point["ests_per_device"]),
        "--steps",
        str(steps),
        "--warmup-steps",
        "2",
    ]
    threads = str(device.threads)
    return launch(
        argv,
        np=1,
        launcher="local",
        cluster=_cluster(device),
        experiment=experiment,
        env={"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads},
        params={**point, "steps": steps},
        view=None,
        timeout=timeout,
        check=False,
        results_root=results_root,
    )


def measure(
    workloads: Sequence[WorkloadStandIn] = SMOKE_WORKLOADS,
    devices: Sequence[DeviceStandIn] = SMOKE_DEVICES,
    ests: Sequence[int] = (1, 2, 4),
    steps: int = 20,
    experiment: str = EXPERIMENT,
    results_root: str | os.PathLike[str] | None = None,
    rerun: bool = False,
) -> pd.DataFrame:
    """Run the points that have no succeeded run yet; return the sweep's summary."""
    from lab.metrics import Sweep

    if steps < 1 or not ests or min(ests) < 1:
        raise ParameterError("ests/steps", (tuple(ests), steps), "ests >= 1 and steps >= 1")
    if any(d.cpu is not None for d in devices):
        from lab.cluster.emulation import missing

        why = missing()
        if why:
            raise ParameterError("devices", "CPU quotas", f"devices with cpu=None here ({why})")
    pts = points(workloads, devices, ests)
    sweep = Sweep(
        experiment,
        pts,
        lambda p: run_point(p, steps, experiment, results_root),
        key=list(pts[0]),
        results_root=results_root,
        progress=False,
    )
    return sweep.run(rerun=rerun)


def standin_table(
    workloads: Sequence[WorkloadStandIn] = SMOKE_WORKLOADS,
    experiment: str = EXPERIMENT,
    results_root: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """The step-time table from the stand-in runs' directories, one row per (workload,
    device type, k) with the columns of ``throughput_table`` (workload, device_type,
    ests_per_device, step_seconds) plus batch_size, measured_as and run_dir.

    Raises:
        NothingMeasured: no succeeded run matches a stand-in.
    """
    from lab.metrics.store import list_runs, read_manifest

    by_config: dict[tuple, list[WorkloadStandIn]] = {}
    for w in workloads:
        by_config.setdefault(w.config, []).append(w)
    rows = []
    for run_dir in list_runs(experiment, results_root):
        manifest = read_manifest(run_dir)
        p = manifest.get("params") or {}
        if manifest.get("state") != "succeeded" or "device_device_type" not in p:
            continue
        config = (p.get("model"), int(p.get("image_size", 0)), int(p.get("batch_size", 0)))
        seconds = step_seconds(run_dir) if config in by_config else float("nan")
        if not seconds > 0:
            continue
        device = DeviceStandIn(
            p["device_device_type"], p.get("device_cpu"), int(p.get("device_threads", 1))
        )
        for w in by_config[config]:
            rows.append(
                {
                    "workload": w.workload,
                    "device_type": device.device_type,
                    "ests_per_device": int(p["ests_per_device"]),
                    "step_seconds": seconds,
                    "batch_size": w.batch_size,
                    "measured_as": f"{w.label} on {device.label}",
                    "run_dir": str(Path(run_dir)),
                }
            )
    if not rows:
        raise NothingMeasured(f"no succeeded stand-in run under results/runs/{experiment}")
    df = pd.DataFrame(rows)
    # The newest run of a (workload, device type, k) is the measurement.
    df = df.drop_duplicates(["workload", "device_type", "ests_per_device"], keep="last")
    return df[[*COLUMNS, "batch_size", "measured_as", "run_dir"]].reset_index(drop=True)
