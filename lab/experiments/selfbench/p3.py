"""P3's parameter server measured against itself: what its scheduling costs, what it moves.

- ``scheduling_cost``: p3 against baseline on loopback (two local ranks, no shaping), where
  the network is fast and priority has nothing to win, so any difference is the cost of
  slicing, priority queues and one message in flight. Target: p3 at most 3% slower. Each
  rank is pinned to a core of its own, as the lab pins ranks on this machine
  (lab.experiments.points.pinning): unpinned, in 3 of 5 repeats both p3 ranks' backward
  passes took 28% more CPU time than in the others (the kernels, not the parameter
  server's Python, whose threads then shared the other rank's core), read as p3 15% slower.
  Both schedules run in **one job, taking turns** every ``block`` timed steps (P3Config
  ``alternate``; lab.bench.alternation, as KungFu's Fig 8 measures its monitors): runs
  minutes apart on this shared machine differed by 10-20% whatever they ran (a core's
  speed moved between 10 and 26 M loops/s within one bench; one bench's seven pairs of
  separate runs read -22 to +38%), while steps a second apart share the machine's state,
  the ranks' placement and start-up. Each schedule's figures come from its own steps but
  each block's last (which waits for all its values before the other schedule starts).
  One run gives one paired slowdown (baseline/p3 - 1); the target's figure is the
  **median over the repeats**, with a sign-test interval, so that a minority of runs met
  by another tenant's burst does not decide it (the ratio of the schedules' medians is
  kept too, as ``slowdown_of_medians``). Beside the wall clock, the CPU seconds per step
  and rank (all its threads): what the scheduling itself costs. With ``profile``,
  every rank also writes a CPU profile of all its threads (cProfile, thread CPU time) under
  ``<results>/bench/p3-profile/<time>/run-<repeat>/rank<N>.prof``, and the functions
  that took most CPU over all runs (both schedules) are kept in the result.
- ``link_rate``: the payload bytes per second each host's parameter-server traffic
  achieves on an emulated 2-host cluster whose links are shaped to a known rate (tc; needs
  root), against that rate. Payload only (headers of 16 bytes per message included, TCP/IP
  framing not), over the timed steps, compute included: the share of the link the schedule
  keeps busy.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from lab.errors import NothingMeasured
from lab.metrics.stats import median_interval

TARGET_SLOWDOWN = 0.03
EXPERIMENT = "selfbench-p3"


def _point(
    schedule: str, model: str, batch_size: int, steps: int, image_size: int = 32
) -> dict[str, Any]:
    return {  # trace_steps 0: the per-slice records are not part of what is measured
        "schedule": schedule,
        "model": model,
        "batch_size": batch_size,
        "image_size": image_size,
        "steps": steps,
        "warmup_steps": 2,
        "trace_steps": 0,
    }


def _summaries(run_dir: str | Path) -> list[dict[str, Any]]:
    from lab.metrics.store import load_run

    df = load_run(run_dir)
    summ = df[df["kind"] == "summary"]
    if summ.empty:
        raise NothingMeasured(f"no summary records in {run_dir}")
    rows = summ.to_dict("records")
    for row in rows:  # a nested value is stored as JSON text (lab.metrics.run_table)
        if isinstance(row.get("phases"), str):
            row["phases"] = json.loads(row["phases"])
    return rows


def _throughput(rows: list[dict[str, Any]], batch_size: int) -> float:
    """Images per second of the job: each rank's timed steps x batch over its timed time."""
    return sum(batch_size * r["steps"] / r["timed_seconds"] for r in rows)


def scheduling_cost(
    repeats: int = 7,
    steps: int = 64,
    block: int = 8,
    model: str = "vgg_like",
    batch_size: int = 32,
    timeout: float = 300.0,
    results_root: Any = None,
    image_size: int = 32,
    profile: bool = False,
) -> dict[str, Any]:
    """p3's throughput against baseline's on loopback; ``slowdown``: the median over repeats
    of baseline/p3 - 1 (see the module's docstring). ``profile``: each rank writes a CPU
    profile."""
    from lab.bench.p3.config import P3Config
    from lab.cluster import launch
    from lab.experiments.easyscale.runs import free_port
    from lab.experiments.p3.sweep import RANK_ENV
    from lab.experiments.points import pinning
    from lab.metrics.layout import results_root as root_of
    from lab.metrics.machine import cpu_speed

    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "p3": []}
    stamp = time.strftime("%Y%m%d-%H%M%S")  # as write_result names kept results
    profiles = root_of(results_root) / "bench" / "p3-profile" / f"{stamp}-{os.getpid()}"
    for i in range(repeats):
        point = {**_point("p3", model, batch_size, steps, image_size), "alternate": block}
        if profile:
            point["profile"] = str(profiles / f"run-{i}")
        speed, load = cpu_speed(repeats=3), os.getloadavg()[0]
        cfg = P3Config.from_values(point).check(2)
        argv, point["pin_cpus"] = pinning(point, "local", cfg.command())
        result = launch(
            argv,
            np=2,
            launcher="local",
            cluster="local",
            experiment=EXPERIMENT,
            env=RANK_ENV,
            options={"master_port": free_port()},
            params={**point, "bench": "scheduling_cost"},
            view=None,
            timeout=timeout,
            results_root=results_root,
        )
        rows = _summaries(result.run_dir)
        for schedule in ("baseline", "p3"):
            runs[schedule].append(
                {
                    "run": str(result.run_dir),
                    **_phase_figures([r["phases"][schedule] for r in rows]),
                    "load_1min": load,
                    "cpu_speed": speed,
                    **({"profile": point["profile"]} if profile else {}),
                }
            )
    params = {
        "repeats": repeats,
        "steps": steps,
        "alternate": block,
        "model": model,
        "batch_size": batch_size,
        "np": 2,
        "link": "loopback, unshaped",
        "implementation": "P3 (lab, torch + TCP)",
    }
    return {
        "params": params,
        **compare(runs),
        **({"profile_top": _profile_top(runs["p3"])} if profile else {}),
    }


def _phase_figures(phases: list[dict[str, Any]]) -> dict[str, float]:
    """One schedule's figures in one run from its ranks' ``phases`` entries: the job's
    images per second (the ranks' sum), CPU seconds and context switches per step and rank
    (a thread woken for a message costs a switch on the rank's core)."""
    n = sum(int(p["steps"]) for p in phases)
    return {
        "img_per_s": sum(float(p["img_per_sec"]) for p in phases),
        "steps": n,
        "cpu_s_per_step": sum(float(p["cpu_seconds"]) for p in phases) / n,
        **{
            f"{kind}_switches_per_step": sum(int(p[f"{kind}_switches"]) for p in phases) / n
            for kind in ("voluntary", "involuntary")
        },
    }


def compare(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The verdict on ``runs`` (``baseline`` and ``p3``, repeat ``i``'s runs at index ``i``,
    each with ``img_per_s``, ``cpu_s_per_step``, ``load_1min``, ``cpu_speed``): the median of
    the repeats' paired slowdowns against the target, with the figures it is read beside."""

    def paired(key: str, num: str, den: str) -> list[float]:
        return [a[key] / b[key] - 1 for a, b in zip(runs[num], runs[den], strict=True)]

    def median_of(schedule: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[schedule])

    pairs = paired("img_per_s", "baseline", "p3")
    cpu_pairs = paired("cpu_s_per_step", "p3", "baseline")
    slowdown = median_interval(pairs)
    every = [r for rs in runs.values() for r in rs]
    return {
        "baseline_img_per_s": median_of("baseline", "img_per_s"),
        "p3_img_per_s": median_of("p3", "img_per_s"),
        "slowdown": slowdown.median,
        "slowdown_estimator": "median of the repeats' paired slowdowns",
        "slowdown_interval": [slowdown.low, slowdown.high],
        "slowdown_interval_coverage": slowdown.coverage,
        "slowdown_of_medians": median_of("baseline", "img_per_s") / median_of("p3", "img_per_s")
        - 1,
        "slowdown_per_repeat": pairs,
        "baseline_cpu_s_per_step": median_of("baseline", "cpu_s_per_step"),
        "p3_cpu_s_per_step": median_of("p3", "cpu_s_per_step"),
        "cpu_overhead": median_interval(cpu_pairs).median,
        "cpu_overhead_per_repeat": cpu_pairs,
        "load_1min": [min(r["load_1min"] for r in every), max(r["load_1min"] for r in every)],
        "cpu_speed": [min(r["cpu_speed"] for r in every), max(r["cpu_speed"] for r in every)],
        "spread_img_per_s": {
            s: [min(r["img_per_s"] for r in rs), max(r["img_per_s"] for r in rs)]
            for s, rs in runs.items()
        },
        "target_slowdown": TARGET_SLOWDOWN,
        "met_target": bool(slowdown.median <= TARGET_SLOWDOWN),
        "runs": runs,
    }


def _profile_top(runs: list[dict[str, Any]], n: int = 15) -> dict[str, Any]:
    """Over all runs and ranks (both schedules: they alternate within a run): the ``n``
    functions with the most CPU seconds of their own per step (warm-up included), and the
    profiled CPU seconds per step."""
    import pstats

    files = [str(f) for r in runs for f in sorted(Path(r["profile"]).glob("rank*.prof"))]
    if not files:
        return {}
    stats = pstats.Stats(*files)
    steps = sum(_steps_of(r["run"]) for r in runs)
    own = stats.stats.items()  # type: ignore[attr-defined]
    rows = sorted(own, key=lambda kv: kv[1][2], reverse=True)[:n]
    return {
        "baseline and p3, alternating": {
            "files": files,
            "cpu_s_per_step": stats.total_tt / steps,  # type: ignore[attr-defined]
            "top": [
                {
                    "function": pstats.func_std_string(f),
                    "calls": v[1],
                    "own_s_per_step": v[2] / steps,
                }
                for f, v in rows
            ],
        }
    }


def _steps_of(run_dir: str) -> int:
    """Steps of all ranks of a run, warm-up included (what a profile covers)."""
    from lab.metrics.store import load_run

    df = load_run(run_dir)
    return int((df["kind"] == "step").sum())


def link_rate(
    rate: str = "200mbit",
    schedules: tuple[str, ...] = ("baseline", "p3"),
    steps: int = 4,
    model: str = "vgg_like",
    batch_size: int = 4,
    cluster: str = "emulated-2",
    timeout: float = 300.0,
) -> dict[str, Any]:
    """Achieved payload bytes/s per host against the shaped link rate, per schedule; an
    entry ``skipped`` with the reason where the machine cannot emulate hosts (not root)."""
    from lab.cluster.emulation.spec import parse_rate
    from lab.experiments.p3.sweep import run_point

    link_bytes = parse_rate(rate, "rate") / 8
    out: dict[str, Any] = {
        "params": {
            "rate": rate,
            "link_bytes_per_s": link_bytes,
            "cluster": cluster,
            "hosts": 2,
            "model": model,
            "batch_size": batch_size,
            "steps": steps,
            "implementation": "P3 (lab, torch + TCP)",
        },
        "schedules": {},
    }
    if os.geteuid() != 0:
        out["skipped"] = "emulated hosts need root (network namespaces, tc)"
        return out
    for schedule in schedules:
        point = {**_point(schedule, model, batch_size, steps), "bandwidth": rate, "hosts": 2}
        result = run_point(point, EXPERIMENT, cluster, timeout=timeout)
        if not result.ok:
            raise NothingMeasured(f"P3 {schedule} run failed on {cluster}: {result.run_dir}")
        rows = _summaries(result.run_dir)
        per_host = [float(r["wire_bytes_per_s"]) for r in rows]
        out["schedules"][schedule] = {
            "run": str(result.run_dir),
            "bytes_per_s_per_host": per_host,
            "share_of_link": [b / link_bytes for b in per_host],
            "img_per_s": _throughput(rows, batch_size),
        }
    return out
