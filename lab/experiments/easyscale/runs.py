"""Running EasyScale stages and baselines, and reading their losses back.

A stage is one ``lab.bench.easyscale.config.Config`` launched as ``np`` local ranks; its
device types come from the cluster profile: named per process (checked against the
profile's ``device_types``) or inherited from each rank's host. A device type of ``kind:
cuda`` (or ``Config.device="cuda"``) runs the stage on GPUs; where this machine's torch sees
none, that is refused before launch too. Everything is checked before launch, so a bad
placement, level, device type or device raises ParameterError and starts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.bench.easyscale.config import Config, DeviceSpec
from lab.cluster.inventory import Cluster, allocate, as_cluster
from lab.errors import ParameterError

EST_LABEL = "EasyScaleThreads (lab, torch.distributed gloo)"
DDP_LABELS = {
    "canonical": "DDP, rank-order sum hook (torch.distributed gloo)",
    "vanilla": "DDP, gloo ring all-reduce (torch.distributed gloo)",
}
DEFAULT_DEVICE = DeviceSpec("cpu", 1, "native")


def devices_for(
    cluster: str | Cluster, np: int, names: Sequence[str] | None = None
) -> tuple[DeviceSpec, ...]:
    """One DeviceSpec per process: the named types, or each rank's host's type.

    Raises:
        ParameterError: a name is not among the profile's device types, or the number of
            names is not ``np``.
    """
    target = as_cluster(cluster)
    if names is None:
        slots = allocate(target, np)
        names = [s.host.device_type for s in slots]  # type: ignore[misc]
    elif len(names) not in (1, np):
        raise ParameterError("device_types", list(names), f"1 or np={np} device type names")
    out = []
    for name in names:
        if name is None:
            out.append(DEFAULT_DEVICE)
            continue
        dt = target.device_type(str(name))
        out.append(DeviceSpec(dt.name, dt.threads, dt.isa))
    return tuple(out)


def device_kind(
    cluster: str | Cluster, np: int, requested: str = "cpu", names: Sequence[str] | None = None
) -> str:
    """``cuda`` if the stage asks for it or its device types are GPU kinds, else ``cpu``.

    Raises:
        ParameterError: the device types mix CPU and GPU kinds (``device_types``), or
            ``cuda`` where ``torch.cuda.is_available()`` is false on this machine
            (``device``): the stage's ranks are local.
    """
    target = as_cluster(cluster)
    if names is None:
        names = [s.host.device_type for s in allocate(target, np)]  # type: ignore[misc]
    kinds = {target.device_type(str(n)).kind for n in names if n is not None}
    if len(kinds) > 1:
        raise ParameterError("device_types", list(names), "types of one kind (all cpu or all cuda)")
    kind = "cuda" if requested == "cuda" or kinds == {"cuda"} else requested
    if kind == "cuda":
        from lab.bench.easyscale.device import cuda_available

        declared = target.emulated and all(h.gpus > 0 for h in target.hosts)
        if not cuda_available() and not declared:  # a rehearsal's hosts fall back, and say so
            raise ParameterError("device", kind, "cpu: torch.cuda.is_available() is False here")
    return kind


def gpu_backend(cluster: str | Cluster, np: int) -> str:
    """``nccl`` where every rank has a GPU of its own, ``gloo`` where hosts run more ranks
    than their ``gpus`` (NCCL refuses two ranks on one GPU), ``auto`` where the profile does
    not count its hosts' GPUs (the rank then compares with the GPUs it sees)."""
    slots = allocate(as_cluster(cluster), np)
    if any(s.host.gpus <= 0 for s in slots):
        return "auto"
    per_host: dict[str, int] = {}
    for s in slots:
        per_host[s.host.name] = per_host.get(s.host.name, 0) + 1
    shared = any(per_host[s.host.name] > s.host.gpus for s in slots)
    return "gloo" if shared else "nccl"


def launch_stage(
    cfg: Config,
    cluster: str | Cluster = "easyscale-local",
    device_types: Sequence[str] | None = None,
    experiment: str = "easyscale",
    timeout: float = 300.0,
    params: Mapping[str, Any] | None = None,
    view: Any = "auto",
    results_root: str | Path | None = None,
) -> Any:
    """Check ``cfg`` against the cluster and launch it; returns the RunResult.

    Raises:
        ParameterError: before anything starts, for any bad field or device type.
        RanksFailed: a rank failed.
    """
    from lab.cluster import launch

    target = as_cluster(cluster)
    cfg.checked()
    devices = devices_for(target, cfg.processes, device_types)
    kind = device_kind(target, cfg.processes, cfg.device, device_types)
    backend = gpu_backend(target, cfg.processes) if kind == "cuda" else "auto"
    if cfg.backend != "auto":
        backend = cfg.backend
    cfg = cfg.with_(devices=devices, device=kind, backend=backend).checked()
    record = {
        "system": cfg.system,
        "level": cfg.level,
        "ests": cfg.ests,
        "np": cfg.processes,
        "placement": ",".join(map(str, cfg.counts())),
        "devices": ",".join(d.name for d in devices),
        "reduce": cfg.reduce,
        "device": cfg.device,
        "model": cfg.model,
        "switch": cfg.switch,
        "start_step": cfg.start_step,
        "steps": cfg.steps,
        "batch_size": cfg.batch_size,
        **dict(params or {}),
    }
    return launch(
        cfg.command("python"),  # its process count travels as np (WORLD_SIZE), not a flag
        np=cfg.processes,
        launcher="local",
        cluster=target,
        timeout=timeout,
        experiment=experiment,
        params=record,
        view=view,
        results_root=results_root,
        env={"PYTHONHASHSEED": "0"},
        options={"master_port": free_port()},
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def est_losses(run_dirs: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """Every logical worker's loss per mini-batch from one or more runs.

    Columns: est, step, loss, loss_hex, rank, seconds (and the EST timing fields), run_id,
    sorted by step then est. Raises ValueError when the runs hold no loss record.
    """
    from lab.metrics.store import load_run

    dirs = [run_dirs] if isinstance(run_dirs, str | Path) else list(run_dirs)
    frames = []
    for d in dirs:
        df = load_run(d)
        if "name" in df.columns:
            frames.append(df[(df["kind"] == "event") & (df["name"] == "est")])
    if not frames or all(f.empty for f in frames):
        raise ValueError(f"no EST loss records in {[str(d) for d in dirs]}")
    out = pd.concat(frames, ignore_index=True)
    out["est"] = out["est"].astype(int)
    out["step"] = out["step"].astype(int)
    return out.sort_values(["step", "est"]).reset_index(drop=True)


def step_digests(run_dirs: str | Path | Sequence[str | Path]) -> pd.Series:
    """The parameters' digest after each mini-batch (runs made with ``digest=True``),
    indexed by step; ValueError when ranks of one step disagree or no digest was recorded."""
    from lab.metrics.store import load_run

    dirs = [run_dirs] if isinstance(run_dirs, str | Path) else list(run_dirs)
    frames = [load_run(d) for d in dirs]
    steps = pd.concat([f[f["kind"] == "step"] for f in frames], ignore_index=True)
    if "params_digest" not in steps.columns or steps["params_digest"].isna().all():
        raise ValueError(f"no parameter digests in {[str(d) for d in dirs]}")
    per_step = steps.groupby(steps["step"].astype(int))["params_digest"]
    if (per_step.nunique() > 1).any():
        raise ValueError("processes of one step hold different parameters")
    return per_step.first()


def hardware() -> str:
    """Where the lab measured: this machine's CPU model and core count."""
    import os
    import platform

    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            name = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), name
            )
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores, CPU device types (lab)"


def measured(verdict: Any) -> Any:
    """The verdict, if it could be computed; NothingMeasured if its status says it was not
    (a level, variant or worker count it needs was not run), so a notebook run fails."""
    from lab.errors import NothingMeasured
    from lab.experiments.verdicts import Status

    claims = verdict if isinstance(verdict, list | tuple) else [verdict]
    for v in claims:
        if v.status is Status.NOT_MEASURED:
            raise NothingMeasured(f"{v.paper} {v.figure}: {v.claim}: {v.why or 'not measured'}")
    return verdict
