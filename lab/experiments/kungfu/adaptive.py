"""KungFu Fig 4: the batch size adapted from the gradient noise scale while training runs.

The adaptive policy (``lab.bench.adaptive``, after KungFu's ``gns_policy``) and
fixed-batch baselines train on Horovod; every curve and number here is read back from the
runs' records. The task (``lab.bench.teacher_task``) is one where the noise scale grows as
the loss falls, the setting KungFu's policy is built for (KungFu OSDI'20, Fig 4, after
McCandlish et al., "An Empirical Model of Large-Batch Training", arXiv:1812.06162): softmax
regression taught by a softmax teacher on fresh samples, run to 1.1 × the teacher's loss,
so the policy has a growing noise scale to act on. The smoke baselines are the policy's
start and its cap: the question is whether growing beats staying at either end.

This module sets up and launches the runs; reading them (``adaptive_tables``), drawing
(``adaptive_figure``) and judging (``adaptive_verdict``, which states the rule) live in
modules of their own, and their names are re-exported here for the notebook.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lab.bench.adaptive import Config
from lab.errors import ParameterError
from lab.experiments.kungfu.adaptive_figure import (
    figure,
    legend_name,
    robust_log_range,
    run_traces,
)
from lab.experiments.kungfu.adaptive_tables import (
    FINAL_COLUMNS,
    NOISE_WINDOW,
    PANELS,
    curves,
    finals,
    loss_rises,
    noise_medians,
    times,
)
from lab.experiments.kungfu.adaptive_verdict import (
    FIGURE,
    published,
    seed_differences,
    status_of,
    verdict,
)

__all__ = [
    "DEFAULTS",
    "EXPERIMENT",
    "FIGURE",
    "FINAL_COLUMNS",
    "NOISE_WINDOW",
    "PANELS",
    "SYSTEM",
    "argv",
    "config",
    "curves",
    "figure",
    "finals",
    "legend_name",
    "loss_rises",
    "noise_medians",
    "point_for",
    "points",
    "published",
    "robust_log_range",
    "run_one",
    "run_traces",
    "runner",
    "seed_differences",
    "status_of",
    "times",
    "verdict",
]

EXPERIMENT = "kungfu/adaptive_batch"
SYSTEM = "horovod-gloo"
DEFAULTS: dict[str, dict[str, Any]] = {
    "smoke": {
        "workers": 2,
        "start_batch": 32,
        "fixed_batches": [32, 1024],
        "max_batch": 1024,
        # the teacher's input width sets what a step costs: at 128 a step took ~6 ms at any
        # batch on a 2-core container (the allreduce and Python dominate), so time to target
        # followed steps, adaptive and fixed 1024 took as many (~170), and the policy's
        # saving in samples (half or less) could not show (adaptive − fixed = -0.06 ± 0.09
        # s); at 512 a step's compute grows with the batch, as on a GPU at large batches
        "features": 512,
        "steps": 300,  # fixed 1024 took 205-220 steps to the target at 512 features
        # a seed takes ~7 s under the three arms (evaluation included); 8 seeds gave
        # adaptive − fixed 1024 = -0.64 ± 0.12 s (sd ~0.14 s), so 6 (t 2.57 over sqrt(6))
        # resolve a difference of ~0.15 s. Since then 6 seeds read -1.19 ± 0.21 and
        # -1.12 ± 0.32 s, and 4 seeds -0.91 ± 0.23 s (2-core machine at 18-20 M loops/s,
        # a seed's difference spreads ~0.15-0.3 s): 3 (t 4.30 over sqrt(3)) resolve a
        # difference of ~0.5-0.75 s, and save ~24 s of make run. But two make runs in a row
        # (2026-12-02, cores 18-27) read -0.65 ± 0.36 and -0.57 ± 0.66 s (sd 0.27): the
        # status flipped between reproduced and not resolved; 5 seeds (t 2.78 over
        # sqrt(5)) hold ±0.33 s at that spread, for ~14 s more
        "seeds": 5,
    },
    "paper": {
        "workers": 8,
        "start_batch": 32,
        "fixed_batches": [32, 256, 1024, 8192],
        "max_batch": 8192,
        "features": 512,
        "steps": 3000,
        "seeds": 5,
    },
}


def points(p: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One launch that trains every seed under the adaptive policy and each fixed batch in
    turn (``arms``; lab.bench.adaptive alternates their order seed by seed): the times a
    seed compares are taken seconds apart, not a launch or two apart. The batch sizes (each
    a multiple of the workers) and the workers (two at least: the noise scale compares two
    batch sizes) are checked here, named as the notebook names them, before anything
    starts (a rehearsal's 3 workers once reached the ranks with a batch of 32)."""
    for name, values in (
        ("start_batch", [p["start_batch"]]),
        ("fixed_batches", list(p["fixed_batches"])),
        ("max_batch", [p["max_batch"]]),
    ):
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(name, value, "integers >= 1")
    workers = p["workers"]
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
        raise ParameterError("workers", workers, "an integer >= 2 (the noise scale needs two)")
    if p["max_batch"] < p["start_batch"]:
        raise ParameterError("max_batch", p["max_batch"], f">= start_batch={p['start_batch']}")
    for name in ("start_batch", "fixed_batches"):  # each rank takes an equal share
        for value in p[name] if name == "fixed_batches" else [p[name]]:
            if value % workers:
                raise ParameterError(name, value, f"multiples of the {workers} workers")
    arms = [f"adaptive:{p['start_batch']}", *(f"fixed:{b}" for b in p["fixed_batches"])]
    return [
        {
            "arms": ",".join(arms),
            "workers": p["workers"],
            "steps": p["steps"],
            "max_batch": p["max_batch"],
            "features": p["features"],
            "seeds": p["seeds"],
            "system": SYSTEM,
        }
    ]


def config(point: Mapping[str, Any]) -> Config:
    """The workload's checked config for a point with ``arms``, or one ``policy`` and
    ``batch`` (the controls' single run); ParameterError naming the config's field."""
    values: dict[str, Any] = {"max_batch_size": point["max_batch"], "steps": point["steps"]}
    if point.get("arms"):
        values["arms"] = point["arms"]
    else:
        values |= {"policy": point["policy"], "batch_size": point["batch"]}
    values |= {k: point[k] for k in ("seeds", "features") if k in point}
    return Config.from_values({**values, "until_target": True})


def argv(point: Mapping[str, Any]) -> list[str]:
    """The rank command of a point (a bare ``python``: the cluster's interpreter)."""
    return config(point).command("python")


def runner(
    cluster: Any = "local", trace: Any = None, timeout: float = 600
) -> Callable[[dict[str, Any]], Any]:
    """What ``run_sweep(run=...)`` calls: one Horovod launch per point (ranks pinned to
    cores as ``run_point`` pins them), its monitored values fed to ``trace`` (a
    ``lab.metrics.live.MetricTrace``) when given, its live view shown in ``out`` (an
    ``ipywidgets.Output``, from the controls) when given."""
    from lab.cluster import launch
    from lab.experiments.points import pinning

    def run(point: dict[str, Any], out: Any = None) -> Any:
        from lab.experiments.points import recorded_tags

        view: Any = "auto"
        if out is not None:
            from lab.cluster.view import ShownIn

            view = ShownIn(out)
        elif trace is not None:
            from lab.cluster.observers import FanOut
            from lab.cluster.view import make_view

            view = FanOut(make_view("auto"), trace.for_run(_label(point)))
        command, pinned = pinning(point, cluster, argv(point))
        return launch(
            command,
            np=int(point["workers"]),
            launcher="horovod",
            cluster=cluster,
            experiment=EXPERIMENT,
            params={**point, "pin_cpus": pinned, **recorded_tags()},
            view=view,
            timeout=timeout,
            check=False,
        )

    return run


def point_for(p: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep's point (``points``) with the controls' values over the parameters ``p``
    (start and largest batch, workers, steps, features, seeds); the fixed batches stay
    the sweep's. Raises ParameterError as ``points`` does."""
    return points({**p, **values})[0]


def run_one(
    point: Mapping[str, Any], scale: str = "smoke", cluster: Any = "local", out: Any = None
) -> Any:
    """Run one point from the controls, completed as the sweep completes its points (the
    scale's defaults, the cluster's name), so the sweep finds it done."""
    from lab.experiments.points import cluster_name, complete_point

    full = complete_point({"cluster": cluster_name(cluster), **point}, scale)
    return runner(cluster)(full, out=out)


def _label(point: Mapping[str, Any]) -> str:
    return str(point["arms"]) if point.get("arms") else f"{point['policy']}:{point['batch']}"
