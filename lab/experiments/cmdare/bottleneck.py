"""The parameter server as the bottleneck: real TF parameter servers on emulated hosts.

One emulated cluster per point: ``workers`` worker hosts, ``ps`` server hosts whose CPU
share and link are set small (so that one server saturates within the sweep), and a chief
host. With two servers TF places the variables on both, and splits the large ones
(``MinSizePartitioner``). Each run records its hosts' CPU and link use (hostload.jsonl);
``speeds`` compares each point's measured speed with the speed it would have without a
bottleneck (one worker's speed times the workers, the linear cluster model) and with the
servers' measured utilisation, and names the bottleneck.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.sweeps import room_sweep
from lab.metrics.shares import past_warmup

if TYPE_CHECKING:
    from lab.bench.synthetic import Config as SyntheticConfig

SCALES: dict[str, dict[str, Any]] = {
    # smoke: 15 steps a worker measured 2PS/1PS 1.38-1.51 at 3 workers (bar 1.15) and one
    # server at 51% of linear (bar 85%) in three make runs; a run was ~27 s, ~12 of them
    # start-up, so 10 steps keep those margins for ~1/3 less measuring
    "smoke": {"model": "small_cnn", "batch_size": 16, "steps": 10, "warmup_steps": 3,
              "worker_cpu": 0.25, "ps_cpu": 0.1, "ps_link": "30mbit", "timeout": 150},
    "paper": {"model": "cifar_resnet20", "batch_size": 128, "steps": 200, "warmup_steps": 20,
              "worker_cpu": 1.0, "ps_cpu": 0.5, "ps_link": "1gbit", "timeout": 1800},
}  # fmt: skip
EXPERIMENT = "cmdare/ps_bottleneck"
KEY = ["workers", "ps", "scale"]
MIN_TIMED_STEPS = 3  # a point's speed needs two intervals between timed step ends
# The fewest steps a rehearsal may cut a point to: its reading needs 3 timed steps after the
# hosts' shares apply (a step before is not timed: flag_before_shares) and two host-load
# samples (0.5 s apart) inside them; rehearsals with 2, 3 and 5 steps of ~60 ms failed on
# one or the other. 40 steps (~2.5 s) failed once beside another notebook: the shares
# applied 3 s after the first step record was printed, after the last; 80 leave ~5 s
REHEARSAL_STEPS = 80
SCALES_WITH = 0.85  # measured / predicted speed at or above this: no bottleneck
BUSY = 0.8  # a resource used at or above this fraction is saturated


def check_cluster(cluster: Any) -> None:
    """Every point builds its own emulated hosts (their shares and links are part of the
    experiment); other clusters are refused before anything starts."""
    if cluster != "emulated":
        raise ParameterError("cluster", cluster, "'emulated' (each point builds its own hosts)")


def settings(scale: str) -> dict[str, Any]:
    """The scale's settings as they run: the paper's cut where a rehearsal says so (its
    steps and per-rank batch: lab.experiments.rehearsal), unchanged otherwise."""
    from lab.experiments import rehearsal

    if scale not in SCALES:
        raise ParameterError("scale", scale, ", ".join(SCALES))
    return rehearsal.apply(SCALES[scale], scale, floors={"steps": REHEARSAL_STEPS})


def points(workers: Iterable[int], servers: Iterable[int], scale: str = "smoke") -> list[dict]:
    """Every (workers, ps) pair, checked; one worker is always included (the prediction
    needs it). In a rehearsal the worker counts are sampled as every sweep's are."""
    from lab.experiments import rehearsal

    workload_config(scale)
    workers = rehearsal.apply({"workers": sorted(set(workers))}, scale)["workers"]
    ws, ps = sorted(set(workers) | {1}), sorted(set(servers))
    for name, values in (("workers", ws), ("servers", ps)):
        if not values or any(not isinstance(v, int) or v < 1 for v in values):
            raise ParameterError(name, values, "integers >= 1")
    return [{"workers": w, "ps": p, "scale": scale} for p in ps for w in ws]


def cluster(workers: int, ps: int, scale: str) -> Any:
    """h1..hW workers, then the servers, then the chief's host."""
    from lab.cluster.inventory import cluster_from_dict

    s = settings(scale)
    servers = {f"h{workers + i + 1}": {"cpu": s["ps_cpu"], "link": {"bandwidth": s["ps_link"]}}
               for i in range(ps)}  # fmt: skip
    spec = {"hosts": workers + ps + 1, "slots": 1, "cpu": s["worker_cpu"],
            "link": {"bandwidth": "1gbit"}, "overrides": servers}  # fmt: skip
    return cluster_from_dict({"name": f"cmdare-ps-w{workers}-p{ps}", "emulated": spec}, "x")


def workload_config(scale: str) -> SyntheticConfig:
    """The ranks' ``lab.bench.synthetic --backend ps`` config at ``scale``, checked."""
    from lab.bench.synthetic import Config

    keys = ("model", "batch_size", "steps", "warmup_steps")
    s = settings(scale)
    return Config.from_values({"backend": "ps", **{k: s[k] for k in keys}})


def launch_point(point: Mapping[str, Any], view: Any = "auto") -> Any:
    """Run one point; its RunResult (not raising when the run failed)."""
    from lab.cluster import launch

    s = settings(point["scale"])
    w, ps = int(point["workers"]), int(point["ps"])
    servers = [f"h{w + i + 1}" for i in range(ps)]
    return launch(
        workload_config(point["scale"]).command(sys.executable),
        np=w,
        launcher="ps",
        cluster=cluster(w, ps, point["scale"]),
        experiment=EXPERIMENT,
        options={"num_ps": ps, "ps_hosts": servers, "chief_host": f"h{w + ps + 1}"},
        params=dict(point),
        view=view,
        timeout=s["timeout"],
        check=False,
    )


# every point, resumably, through the lab's one run_sweep; the succeeded runs' summary
run_sweep = room_sweep(EXPERIMENT, launch_point, KEY)


def _measure(run_dir: str, workers: int, ps: int) -> dict[str, Any]:
    from lab.metrics import load_run
    from lab.metrics.hostload import utilisation

    df = load_run(run_dir)
    steps = past_warmup(df[df["kind"] == "step"], unflagged_is_warmup=True)
    ends = steps["ended_at"].astype(float).sort_values()
    if len(ends) < MIN_TIMED_STEPS:
        raise NothingMeasured(f"{run_dir}: fewer than {MIN_TIMED_STEPS} timed steps")
    start, end = float(ends.iloc[0]), float(ends.iloc[-1])
    use = utilisation(run_dir, start, end).set_index("host")
    servers = [f"h{workers + i + 1}" for i in range(ps)]
    mine = [f"h{i + 1}" for i in range(workers)]
    return {
        "speed": (len(ends) - 1) / (end - start),
        "ps_cpu_util": float(use.loc[servers, "cpu_util"].max()),
        "ps_throttled": float(use.loc[servers, "throttled"].max()),
        "ps_link_util": float(use.loc[servers, "link_util"].max()),
        "ps_mbit": float(use.loc[servers, ["sent_mbit", "received_mbit"]].max(axis=1).max()),
        "worker_cpu_util": float(use.loc[mine, "cpu_util"].mean()),
        "chief_cpu_util": float(use.loc[f"h{workers + ps + 1}", "cpu_util"]),
    }


def bottleneck(row: Mapping[str, Any]) -> str:
    """What held a point back: nothing when it scales, else the most used of the servers'
    CPU and link, the workers' CPU and the chief's CPU (each as a fraction of its share or
    bandwidth); "(below 80%)" when even that one is not close to full."""
    if row["ratio"] >= SCALES_WITH:
        return "none (scales)"
    busy = {"PS link": row["ps_link_util"], "PS CPU": row["ps_cpu_util"],
            "worker CPU": row["worker_cpu_util"], "chief CPU": row["chief_cpu_util"]}  # fmt: skip
    name, value = max(busy.items(), key=lambda kv: kv[1] if kv[1] == kv[1] else -1)
    return name if value >= BUSY else f"{name} (below {BUSY:.0%})"


def speeds(summary: Any) -> Any:
    """Per point: measured global steps/s, the linear prediction (one worker's speed with
    as many servers, times the workers), their ratio, the servers' and workers' use, and
    the bottleneck named."""
    import pandas as pd

    rows = []
    for _, r in summary.iterrows():
        w, ps = int(r["workers"]), int(r["ps"])
        rows.append({"workers": w, "ps": ps, **_measure(r["run_dir"], w, ps),
                     "run_dir": r["run_dir"]})  # fmt: skip
    df = pd.DataFrame(rows).sort_values(["ps", "workers"]).reset_index(drop=True)
    one = df[df["workers"] == 1].set_index("ps")["speed"]
    if one.empty:
        raise NothingMeasured("no one-worker run: nothing to predict from")
    df["predicted"] = df["ps"].map(one) * df["workers"]
    df["ratio"] = df["speed"] / df["predicted"]
    df["bottleneck"] = [bottleneck(r) for _, r in df.iterrows()]
    return df
