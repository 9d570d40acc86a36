"""Step times measured by the lab on stand-ins for the paper's GPUs and workloads.

Until EST runs on real devices give the step-time table, the lab measures one: each
device type is stood in for by a CPU share of this machine (an emulated host with a cgroup
CPU quota, or the plain local machine with a thread count), each of the paper's workloads
by the lab's tiny CNN at some input size, and k ESTs on one device by k mini-batches one
after another per step on the same device, as ESTs time-share it.

One real run through ``lab.cluster.launch`` measures the whole table: one rank of
``lab.bench.torch_step_sweep`` per device type, each on its own emulated host with that
type's quota, side by side, each measuring every (input size, k) in turn, in a few rounds,
in one process. So the table costs one start-up per device type, not one per cell. Device types
without a quota run one at a time on this machine (side by side they would share its
cores). The runs are kept as run directories and resumed from there.

The shares are the lab's choice, not the GPUs' published speed ratios: they make device
types differ in speed so the policies have something to choose between.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.easyscale.standin_runs import EXPERIMENT, measured, startup_of, startup_seconds
from lab.experiments.easyscale.steptimes import COLUMNS

if TYPE_CHECKING:
    from lab.bench.torch_step_sweep import Config as StepSweepConfig

log = logging.getLogger(__name__)

__all__ = [
    "EXPERIMENT",
    "measure",
    "measured",
    "points",
    "standin_table",
    "startup_of",
    "startup_seconds",
]


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
# long enough, tens of ms, that a window of 0.3 s averages over the quota's periods).
# The three run side by side, so together they leave room on a 2-core machine for the
# launcher and other work: a quota of a whole core is not had on a busy machine, and its
# device then measures no faster than the next (seen with 1.0/0.6/0.35 cores).
SMOKE_DEVICES = (
    DeviceStandIn("v100", cpu=0.8),
    DeviceStandIn("p100", cpu=0.5),
    DeviceStandIn("t4", cpu=0.3),
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


# Visits to each cell. The Fig 14 verdicts take their interval over visits
# (lab.experiments.easyscale.standin_visits), and the seconds are shared among them, so
# more visits cost no time. Three measurements each: with 3 visits (t = 4.3) the
# homo/heter makespan ratio read 1.13 ± 0.14, 1.11 ± 0.11, 1.10 ± 0.12, with 6
# (t = 2.57) 1.10 ± 0.05, 0.96 ± 0.11, 1.08 ± 0.10; the other ratios' intervals were
# narrower or alike. A first visit ran slow (its steps before the cell's steady state are
# now left out of the visit tables): with that, 1.16 ± 0.03 and 1.14 ± 0.08
ROUNDS = 6


def _groups(devices: Sequence[DeviceStandIn]) -> list[list[DeviceStandIn]]:
    """Devices measured side by side: all with a quota in one run, each without alone."""
    quota = [d for d in devices if d.cpu is not None]
    return ([quota] if quota else []) + [[d] for d in devices if d.cpu is None]


def points(
    workloads: Sequence[WorkloadStandIn],
    devices: Sequence[DeviceStandIn],
    ests: Sequence[int],
    seconds: float = 2.0,
    min_steps: int = 3,
    rounds: int = ROUNDS,
) -> list[dict[str, Any]]:
    """One point per run: per (model, batch size) of the stand-ins and group of devices
    measured side by side, every input size of those stand-ins × every k. Workloads sharing
    a stand-in share its measurement."""
    by_model: dict[tuple[str, int], set[int]] = {}
    for m, s, b in {w.config for w in workloads}:
        by_model.setdefault((m, b), set()).add(s)
    return [
        {
            "model": m,
            "batch_size": b,
            "image_sizes": sorted(sizes),
            "ests": sorted({int(k) for k in ests}),
            "device_types": [d.device_type for d in group],
            "device_cpus": [d.cpu for d in group],
            "device_threads": [d.threads for d in group],
            "seconds": float(seconds),
            "min_steps": int(min_steps),
            "rounds": int(rounds),
            "in_step": len(group) > 1,  # side by side: every round starts together
            "allocator": "keep",  # freed blocks kept for the next step (lab.bench.allocator)
        }
        for (m, b), sizes in sorted(by_model.items())
        for group in _groups(devices)
    ]


def _cluster(point: dict[str, Any]) -> Any:
    """This machine for one device without a quota; else one emulated host per device."""
    cpus = point["device_cpus"]
    if cpus == [None]:
        return "local"
    from lab.cluster.inventory import cluster_from_dict

    name = "standin-" + "-".join(point["device_types"])
    spec: dict[str, Any] = {"hosts": len(cpus), "slots": 1, "cpu": cpus[0]}
    overrides = {f"h{i + 1}": {"cpu": c} for i, c in enumerate(cpus) if i and c != cpus[0]}
    if overrides:
        spec["overrides"] = overrides
    return cluster_from_dict({"name": name, "emulated": spec}, name)


def workload_config(point: dict[str, Any]) -> StepSweepConfig:
    """The ranks' ``lab.bench.torch_step_sweep`` config of a point, checked (ParameterError
    naming the setting, before anything starts)."""
    from lab.bench.torch_step_sweep import Config

    return Config.from_values(
        {
            "model": point["model"],
            "batch_size": point["batch_size"],
            "image_sizes": point["image_sizes"],
            "micro_batches": point["ests"],
            "seconds": point["seconds"],
            "min_steps": point["min_steps"],
            "rounds": point["rounds"],
            "threads": point["device_threads"],
            "in_step": bool(point.get("in_step")),
            "allocator": point.get("allocator", "system"),
        }
    )


def run_point(
    point: dict[str, Any],
    experiment: str = EXPERIMENT,
    results_root: str | os.PathLike[str] | None = None,
) -> Any:
    """One stand-in run (a rank per device of the point); returns its RunResult, failed
    ones too."""
    from lab.cluster import launch

    argv = workload_config(point).command()
    configs = len(point["image_sizes"]) * len(point["ests"])
    return launch(
        argv,
        np=len(point["device_types"]),
        launcher="local",
        cluster=_cluster(point),
        experiment=experiment,
        params=point,
        view=None,
        timeout=120.0 + configs * (10 * float(point["seconds"]) + 10),
        check=False,
        results_root=results_root,
    )


def measure(
    workloads: Sequence[WorkloadStandIn] = SMOKE_WORKLOADS,
    devices: Sequence[DeviceStandIn] = SMOKE_DEVICES,
    ests: Sequence[int] = (1, 2, 4),
    seconds: float = 2.0,
    min_steps: int = 3,
    rounds: int = ROUNDS,
    experiment: str = EXPERIMENT,
    results_root: str | os.PathLike[str] | None = None,
    rerun: bool = False,
) -> pd.DataFrame:
    """Run the points that have no succeeded run yet; return the sweep's summary.

    Args:
        seconds: timed seconds of steps per configuration on each device (at least).
        min_steps: timed steps per configuration (at least).
        rounds: visits to each configuration, its seconds and steps shared among them.

    Raises:
        ParameterError: a setting is bad (before anything starts).
        NothingMeasured: no point succeeded (lab.experiments.sweeps.run_sweep).
    """
    from lab.experiments.sweeps import run_sweep

    if not ests or min(ests) < 1 or not seconds > 0 or min(min_steps, rounds) < 1:
        raise ParameterError(
            "ests/seconds/min_steps/rounds",
            (tuple(ests), seconds, min_steps, rounds),
            "ests >= 1, seconds > 0, min_steps >= 1, rounds >= 1",
        )
    names = [d.device_type for d in devices]
    if not names or len(set(names)) != len(names):
        raise ParameterError("devices", names, "one stand-in per device type")
    if any(d.cpu is not None for d in devices):
        from lab.cluster.emulation import missing

        why = missing()
        if why:
            raise ParameterError("devices", "CPU quotas", f"devices with cpu=None here ({why})")
    pts = points(workloads, devices, ests, seconds, min_steps, rounds)
    for p in pts:  # every rank command checked before the first run starts
        workload_config(p)
    return run_sweep(
        experiment,
        pts,
        rerun=rerun,
        view=None,
        run=lambda p: run_point(p, experiment, results_root),
        strict=False,  # a failed stand-in leaves its row out of the table, as before
        retries=0,
        complete=dict,
        key=list(pts[0]),
        results_root=results_root,
        progress=False,
    )


def standin_table(
    workloads: Sequence[WorkloadStandIn] = SMOKE_WORKLOADS,
    experiment: str = EXPERIMENT,
    results_root: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """The step-time table from the stand-in runs' records, one row per (workload, device
    type, k) with the columns of ``throughput_table`` (workload, device_type,
    ests_per_device, step_seconds) plus batch_size, measured_as and run_dir.

    Raises:
        NothingMeasured: no succeeded run measured a stand-in of ``workloads``.
    """
    by_config: dict[tuple, list[WorkloadStandIn]] = {}
    for w in workloads:
        by_config.setdefault(w.config, []).append(w)
    rows = []
    for m in measured(experiment, results_root).itertuples(index=False):
        cpu = None if pd.isna(m.device_cpu) else float(m.device_cpu)
        device = DeviceStandIn(m.device_type, cpu, int(m.device_threads))
        for w in by_config.get((m.model, m.image_size, m.batch_size), []):
            rows.append(
                {
                    "workload": w.workload,
                    "device_type": device.device_type,
                    "ests_per_device": m.micro_batches,
                    "step_seconds": m.step_seconds,
                    "batch_size": w.batch_size,
                    "measured_as": f"{w.label} on {device.label}",
                    "run_dir": m.run_dir,
                }
            )
    if not rows:
        raise NothingMeasured(f"no stand-in of these workloads under results/runs/{experiment}")
    df = pd.DataFrame(rows)
    # The newest run of a (workload, device type, k) is the measurement.
    df = df.drop_duplicates(["workload", "device_type", "ests_per_device"], keep="last")
    return df[[*COLUMNS, "batch_size", "measured_as", "run_dir"]].reset_index(drop=True)
