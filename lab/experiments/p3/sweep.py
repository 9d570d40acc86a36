"""Running P3's points: a link rate per point on an emulated cluster, the bandwidth rule,
and the measured compute time it starts from.

The bandwidth rule: with ``bits`` the bytes each host must send per step (x 8) and ``T`` one
host's measured compute time per step, the point for a communication/compute ratio ``r``
is ``bits / (r * T)``; ratios 4, 1, 1/4 (smoke) or 4 down to 1/8 (paper) make the sweep span
communication well above compute to well below it, whatever the machine's speed.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from lab.bench.p3.config import P3Config
from lab.bench.p3.schedule import SCHEDULES
from lab.cluster.emulation.spec import parse_rate
from lab.cluster.inventory import Cluster, as_cluster
from lab.errors import NothingMeasured, ParameterError
from lab.metrics.shares import past_warmup

ARMS = SCHEDULES  # the lab's arms: the schedules lab.bench.p3 runs
LABELS = {s: f"{s} (lab, torch + TCP)" for s in ARMS}
LABELS |= {  # the engines themselves (lab.experiments.systems names them the same)
    "mxnet-baseline": "baseline (MXNet 1.9.1 KVStore)",
    "mxnet-slicing": "slicing (MXNet, MXNET_KVSTORE_BIGARRAY_BOUND=40000)",
    "p3-mxnet-fork": "P3 (its MXNet fork, train_imagenet.py, dist_device_sync)",
}
RATIOS = {"smoke": (4.0, 1.0, 0.25), "paper": (4.0, 2.0, 1.0, 0.5, 0.25, 0.125)}
RANK_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
CONFIG_KEYS = P3Config.field_names()


def with_link(cluster: str | Cluster, bandwidth: Any, hosts: int | None = None) -> Cluster:
    """``cluster`` with its first ``hosts`` hosts and every link at ``bandwidth``.

    Raises:
        ParameterError: the bandwidth does not parse, the cluster is not emulated (its
            links cannot be shaped here), or it has fewer hosts than asked for.
    """
    c = as_cluster(cluster)
    n = len(c.hosts) if hosts is None else hosts
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(c.hosts):
        raise ParameterError("hosts", hosts, f"1 to the {len(c.hosts)} hosts of {c.name}")
    if bandwidth is None:
        rate = None
    else:
        rate = parse_rate(bandwidth, "bandwidth")
        if not c.emulated:
            allowed = "None: the links of a cluster without emulation cannot be shaped"
            raise ParameterError("bandwidth", bandwidth, allowed)
    if not c.emulated:
        return dataclasses.replace(c, hosts=c.hosts[:n])
    link = dict(c.emulated.get("link") or {})
    link["bandwidth"] = None if rate is None else f"{int(rate)}bit"
    if rate is None:
        link.pop("bandwidth")
    emulated = {**c.emulated, "hosts": n, "link": link}
    return dataclasses.replace(c, hosts=c.hosts[:n], emulated=emulated)


def sockbuf_for(rate_bits: float | None) -> int:
    """Kernel socket buffer for a link: about 4 ms of it, at least 64 KiB, so TCP keeps the
    link busy while little waits below the lab's queues."""
    if rate_bits is None:
        return 1 << 20
    return max(65_536, int(rate_bits / 8 * 0.004))


def bits_per_step(params: int, hosts: int) -> float:
    """Bits each host sends per step: its worker pushes the (hosts-1)/hosts of the model held
    by other servers, its server returns its 1/hosts share to the hosts-1 other workers."""
    return 2 * (hosts - 1) / hosts * params * 32


def bandwidth_points(
    compute_seconds: float, params: int, hosts: int, ratios: Sequence[float]
) -> list[str]:
    """Link rates, slowest first, at which communication takes ``ratio`` x compute."""
    if not compute_seconds > 0:
        raise NothingMeasured(f"no compute time to derive bandwidths from ({compute_seconds})")
    bits = bits_per_step(params, max(hosts, 2))
    return [f"{int(bits / (r * compute_seconds) / 1e6)}mbit" for r in sorted(ratios, reverse=True)]


def config_of(point: Mapping[str, Any], hosts: int) -> P3Config:
    """The rank settings of a point (keys other than P3Config's fields are the lab's)."""
    cfg = P3Config.from_values({k: v for k, v in point.items() if k in CONFIG_KEYS})
    return cfg.check(hosts)


def run_point(
    point: Mapping[str, Any],
    experiment: str,
    cluster: str | Cluster = "emulated-2",
    view: Any = None,
    timeout: float = 300,
    python: str = "python",
) -> Any:
    """Run one point (``schedule``, ``model``, ``bandwidth``, ``hosts``, ...) and return its
    RunResult. Every setting is checked before anything starts."""
    from lab.cluster import launch
    from lab.experiments.p3 import mxnet_arms

    c = with_link(cluster, point.get("bandwidth"), point.get("hosts"))
    if mxnet_arms.is_mxnet(point.get("schedule")):
        return mxnet_arms.run_point(point, experiment, c, view, timeout, RANK_ENV)
    rate = c.emulated and (c.emulated.get("link") or {}).get("bandwidth")
    sockbuf = point.get("sockbuf", sockbuf_for(parse_rate(rate) if rate else None))
    cfg = config_of({**point, "sockbuf": sockbuf}, len(c.hosts))
    return launch(
        cfg.command(python),
        np=len(c.hosts),
        launcher="local",
        cluster=c,
        experiment=experiment,
        env=RANK_ENV,
        params=dict(point),
        view=view,
        timeout=timeout,
        check=False,
    )


def compute_probe(
    point: Mapping[str, Any], experiment: str, cluster: str | Cluster, view: Any = None
) -> tuple[float, int]:
    """One host's time per step with no network at all (its own server holds every key),
    the median of the timed steps of a one-host run, and the model's parameter count."""
    from lab.metrics.store import load_run

    probe = {**point, "schedule": "baseline", "hosts": 1, "bandwidth": None}
    result = run_point(probe, experiment, cluster, view=view)
    if not result.ok:
        raise NothingMeasured(f"the compute-time probe failed: {result.run_dir}")
    records = load_run(result.run_dir)
    steps = past_warmup(records[records["kind"] == "step"])
    if steps.empty:
        raise NothingMeasured(f"the compute-time probe printed no steps: {result.run_dir}")
    header = records[records["kind"] == "header"]
    params = int(header["params"].iloc[0])
    return float(statistics.median(steps["seconds"].astype(float))), params


def run_sweep(
    experiment: str,
    points: Sequence[Mapping[str, Any]],
    cluster: str | Cluster,
    figure: Any = None,
    rerun: bool = False,
    view: Any = "auto",
    scale: str = "smoke",
) -> Any:
    """Run every point (resuming finished ones, on this cluster) with a progress bar and a
    live figure; the summary, one row per point. Raises NothingMeasured when no point
    succeeded (and, in a batch run, when any failed): ``lab.experiments.run_sweep``."""
    from lab.experiments.sweeps import run_sweep as sweep

    return sweep(
        experiment,
        points,
        scale=scale,
        cluster=cluster,
        figure=figure,
        rerun=rerun,
        run=lambda p: run_point(p, experiment, cluster, view=view),
    )


DEFAULTS = {
    "smoke": {
        "models": ["vgg_like"],
        "batch_size": 32,
        # 4 steps after 1 warm-up never resolved the gain (± 51-127% over eleven make runs).
        # The first step after the warm-up still ran on the quota a host saves while it
        # starts (0.1 s against 0.35 s at ~1.7 Gbit/s), and a baseline step at ~100 Mbit/s
        # now and then took 2.2 s against 1.5: with 2 warm-up steps and 6 timed ones the
        # runs of one make run read +29% ± 19% at the slowest link (4 timed: ± 36%). ~20 s.
        "steps": 6,
        "warmup_steps": 2,
        "ratios": list(RATIOS["smoke"]),
        # MXNet's arms at one point only (communication = compute): each MXNet run starts a
        # scheduler and a server beside every worker, which on 0.4-core hosts costs seconds
        "mxnet_systems": ["mxnet-baseline", "mxnet-slicing"],
        "mxnet_ratios": [1.0],
        "mxnet_steps": 6,  # its per-step rates vary little; start-up (5 processes) dominates
    },
    "paper": {
        "models": ["vgg19", "resnet50", "inception_v3"],
        "batch_size": 32,
        "steps": 100,
        "warmup_steps": 10,
        "ratios": list(RATIOS["paper"]),
        "mxnet_systems": ["mxnet-baseline", "mxnet-slicing", "p3-mxnet-fork"],
        "mxnet_ratios": list(RATIOS["paper"]),
        "mxnet_steps": 100,
    },
}
ONE_ITERATION_DEFAULTS = {
    "smoke": {"model": "vgg_like", "batch_size": 32},
    "paper": {"model": "vgg19", "batch_size": 32},
}


def covered(points: Sequence[Mapping[str, Any]], scale: str) -> list[dict[str, Any]]:
    """The points a rehearsal runs: the first model's p3 and baseline at every link (the
    verdict's gains), and few more that run every model, link and arm once (8 of the
    paper's 30 VGG-19/ResNet-50/Inception-v3 points at two links; the first full rehearsal
    spent over 15 min on all of them); every point otherwise."""
    from lab.experiments import rehearsal

    first = points[0]["model"] if points else None

    def gains(q: Mapping[str, Any]) -> bool:
        return q["model"] == first and q["schedule"] in ("p3", "baseline")

    return rehearsal.cover(points, scale, keep=gains)
