"""The systems the benchmark notebooks compare, and how one sweep point is run.

Ties the layers together for notebooks (DESIGN.md: logic two notebooks share lives in
lab/): a *system* is a launcher plus a workload backend (e.g. Horovod over Gloo is the
``horovod`` launcher running ``lab.bench.synthetic --backend horovod``); a *point* is a
dict of parameters (system, model, batch size, workers, ...) that becomes one run.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab import kungfu_artifact
from lab.cluster.launchers.base import find_program
from lab.errors import ParameterError

# Workload settings per scale. Smoke: small inputs that run in seconds on 2 CPU cores.
# Paper: the artifacts' settings (224x224 ImageNet-sized inputs, 10 warm-up steps).
SCALE_DEFAULTS: dict[str, dict[str, Any]] = {
    "smoke": {"image_size": 32, "steps": 15, "warmup_steps": 3, "timeout": 300},
    "paper": {"image_size": 224, "steps": 100, "warmup_steps": 10, "timeout": 3600},
}


@dataclass(frozen=True)
class System:
    """A distribution system as the figures name it.

    Args:
        name: the key used in sweeps and tables.
        label: the legend text; the lab's own implementations say so.
        launcher: the lab.cluster launcher that starts it.
        backend: the ``--backend`` of the workload (None for workloads without one).
        module: the workload module run by every rank.
        options: launcher options.
        requires: what must be there: a Python module name, ``exe:NAME`` or ``env:VAR``.
        min_workers: the smallest number of workers it runs with.
        command: builds the rank's argv from (point, python) instead of ``module`` and
            flags (for upstream scripts such as the KungFu artifact's).
    """

    name: str
    label: str
    launcher: str
    backend: str | None
    module: str = "lab.bench.synthetic"
    options: Mapping[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    min_workers: int = 1
    command: Callable[[Mapping[str, Any], str], list[str]] | None = None

    def unavailable(self) -> str | None:
        """Why this system cannot run here, or None when it can."""
        for need in self.requires:
            if need.startswith("exe:"):
                exe = need[4:]
                if find_program(exe) is None:
                    return f"{exe} is not installed"
            elif need.startswith("env:"):
                if not os.environ.get(need[4:]):
                    return f"{need[4:]} is not set"
            elif importlib.util.find_spec(need) is None:
                return f"Python package {need!r} is not installed"
        return None


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("single", "ideal (one worker, no communication)", "local", "single"),
        System(
            "horovod-gloo",
            "Horovod (Gloo)",
            "horovod",
            "horovod",
            options={"controller": "gloo"},
            requires=("horovod",),
        ),
        System(
            "horovod-mpi",
            "Horovod (MPI)",
            "mpi",
            "horovod",
            requires=("horovod", "exe:mpirun"),
        ),
        System("mwms", "TF MultiWorkerMirroredStrategy", "local", "mwms"),
        System(
            "kungfu-sync",
            "KungFu sync SGD",
            "kungfu",
            "kungfu-sync",
            requires=("kungfu", "exe:kungfu-run"),
        ),
        System("ps", "TF parameter server (1 PS)", "ps", "ps", options={"num_ps": 1}),
        System(
            "kungfu-async",
            "KungFu pair averaging",
            "kungfu",
            "kungfu-async",
            requires=("kungfu", "exe:kungfu-run"),
        ),
        System(
            "kungfu-artifact-monitoring",
            "KungFu (artifact's monitoring benchmark)",
            "kungfu",
            None,
            requires=("exe:kungfu-run", "env:KUNGFU_ARTIFACT"),
            command=kungfu_artifact.monitoring_argv,
        ),
        System(
            "kungfu-artifact-sync",
            "KungFu sync SGD (artifact's benchmark)",
            "kungfu",
            None,
            requires=("exe:kungfu-run", "env:KUNGFU_ARTIFACT"),
            command=kungfu_artifact.benchmark_argv("sync-sgd"),
        ),
        System(
            "kungfu-artifact-async",
            "KungFu pair averaging (artifact's benchmark)",
            "kungfu",
            None,
            requires=("exe:kungfu-run", "env:KUNGFU_ARTIFACT"),
            command=kungfu_artifact.benchmark_argv("async-sgd"),
            min_workers=2,
        ),
        System(
            "pair-avg",
            "pair averaging (lab, MPI one-sided)",
            "mpi",
            None,
            module="lab.bench.pair_averaging",
            requires=("mpi4py", "exe:mpirun"),
            min_workers=2,
        ),
    )
}


def get_system(name: str) -> System:
    try:
        return SYSTEMS[name]
    except KeyError:
        raise ParameterError("system", name, ", ".join(SYSTEMS)) from None


def split_available(names: Iterable[str], cluster: Any = None) -> tuple[list[str], dict[str, str]]:
    """The systems that can run here (on ``cluster``, when given: its launcher is asked
    whether it can start a job there), and why each of the others cannot."""
    runnable, skipped = [], {}
    for name in names:
        system = get_system(name)
        reason = system.unavailable() or (
            _launcher_refuses(system, cluster) if cluster is not None else None
        )
        if reason:
            skipped[name] = reason
        else:
            runnable.append(name)
    return runnable, skipped


def _launcher_refuses(system: System, cluster: Any) -> str | None:
    """The launcher's own pre-launch check (e.g. horovodrun on an emulated cluster)."""
    from lab.cluster.inventory import load_profile
    from lab.cluster.launchers.base import Job, get_launcher
    from lab.errors import LabError

    c = load_profile(cluster) if isinstance(cluster, str) else cluster
    job = Job(command=("true",), np=1, cluster=c, options=dict(system.options))
    try:
        get_launcher(system.launcher).check(job)
    except LabError as e:
        return str(e).split(":", 1)[0] if len(str(e)) > 120 else str(e)
    return None


def python_for(cluster: Any) -> str:
    """The interpreter ranks run: this one on local and emulated clusters, else the
    profile's ``python`` (or ``python3``)."""
    from lab.cluster.inventory import load_profile

    c = load_profile(cluster) if isinstance(cluster, str) else cluster
    if c.is_local or c.emulated:
        return sys.executable
    return c.python or next((h.python for h in c.hosts if h.python), None) or "python3"


WORKLOAD_FLAGS = (
    "model",
    "batch_size",
    "image_size",
    "steps",
    "warmup_steps",
    "monitor",
    "interval",
    "seed",
    "optimizer",
    "lr",
    "num_classes",
)


def workload_argv(point: Mapping[str, Any], python: str) -> list[str]:
    """The rank command for one point: ``python -m <module> --backend ... --model ...``."""
    system = get_system(point["system"])
    if system.command is not None:
        return system.command(point, python)
    argv = [python, "-m", system.module]
    if system.backend:
        argv += ["--backend", system.backend]
    for key in WORKLOAD_FLAGS:
        if key in point and point[key] is not None:
            argv += [f"--{key.replace('_', '-')}", str(point[key])]
    return argv


def complete_point(point: Mapping[str, Any], scale: str = "smoke") -> dict[str, Any]:
    """The point with the scale's defaults filled in (what the manifest records)."""
    if scale not in SCALE_DEFAULTS:
        raise ParameterError("scale", scale, ", ".join(SCALE_DEFAULTS))
    defaults = {k: v for k, v in SCALE_DEFAULTS[scale].items() if k != "timeout"}
    full = {**defaults, "workers": 1, **point, "scale": scale}
    get_system(full["system"])
    if int(full["workers"]) < 1:
        raise ParameterError("workers", full["workers"], "an integer >= 1")
    return full


def run_point(
    point: Mapping[str, Any],
    experiment: str,
    scale: str = "smoke",
    cluster: Any = "local",
    view: Any = "auto",
    out: Any = None,
    results_root: Any = None,
    timeout: float | None = None,
    observe: Any = None,
) -> Any:
    """Run one point of a benchmark sweep and return its RunResult (failed runs too).

    Args:
        point: at least ``system``; ``workers`` (default 1), model, batch_size, ...
        experiment: the run directory's group (e.g. ``"benchmark/sync_sgd"``).
        scale: ``"smoke"`` or ``"paper"``; fills in image size, steps and warm-up.
        cluster: a profile name, path or Cluster.
        view: as for ``lab.cluster.launch``.
        out: an ``ipywidgets.Output`` to show the live view in (used by Controls).
        timeout: seconds for the whole run (default: the scale's).
        observe: another RunObserver to feed beside the view (e.g. a MetricTrace).
    """
    from lab.cluster import launch

    full = complete_point(point, scale)
    system = get_system(full["system"])
    reason = system.unavailable()
    if reason:
        raise ParameterError("system", system.name, f"an installed system ({reason})")
    if int(full["workers"]) < system.min_workers:
        raise ParameterError(
            "workers", full["workers"], f">= {system.min_workers} for {system.name}"
        )
    if out is not None and view == "auto":
        view = ShownIn(out)
    if observe is not None:
        from lab.cluster.observers import FanOut
        from lab.cluster.view import make_view

        view = FanOut(make_view(view) if isinstance(view, str) or view is None else view, observe)
    return launch(
        workload_argv(full, python_for(cluster)),
        np=int(full["workers"]),
        launcher=system.launcher,
        cluster=cluster,
        experiment=experiment,
        options=dict(system.options),
        params=full,
        view=view,
        results_root=results_root,
        timeout=timeout or SCALE_DEFAULTS[scale]["timeout"],
        check=False,
    )


def grid(**axes: Sequence[Any] | Any) -> list[dict[str, Any]]:
    """Every combination of the given axes (scalars are held fixed), in order."""
    import itertools

    keys = list(axes)
    values = [v if isinstance(v, list | tuple) else [v] for v in axes.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]


class ShownIn:
    """A RunView drawn inside an ``ipywidgets.Output`` (for runs started by a button, in a
    worker thread, where ``display`` would not know which output to use)."""

    def __init__(self, out: Any) -> None:
        from lab.cluster.view import RunView

        self.out = out
        self.view = RunView(display=False)

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        self.view.on_start(run_dir, ranks, control)
        self.out.append_display_data(self.view.box)

    def on_line(self, line: Any) -> None:
        self.view.on_line(line)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, Any]) -> None:
        self.view.on_end(state, exit_code, rank_exit_codes)


def run_sweep(
    experiment: str,
    points: Sequence[Mapping[str, Any]],
    scale: str = "smoke",
    cluster: Any = "local",
    figure: Any = None,
    rerun: bool = False,
    view: Any = "auto",
    run: Any = None,
    trace: Any = None,
    label: Any = None,
) -> Any:
    """Run every point (resuming finished ones) with a progress bar, the live run view and
    a live summary figure; return the summary table (one row per point).

    Args:
        experiment: the run directories' group.
        points: parameter dicts (see ``run_point``); the scale's defaults are filled in.
        figure: builds a plotly figure from the summary so far; redrawn after each point.
        rerun: run finished points again.
        run: runs one completed point (default: ``run_point`` with these settings).
        trace: a ``lab.metrics.live.MetricTrace`` fed by every run (a live monitor line).
        label: names a point's lines in ``trace`` (default: its parameters).
    """
    from lab.metrics import LiveFigure, Sweep

    full = [complete_point(p, scale) for p in points]
    live = LiveFigure(figure) if figure is not None else None

    def one(point: dict[str, Any]) -> Any:
        if run is not None:
            return run(point)
        if trace is not None:
            trace.for_run(
                label(point) if label else ", ".join(f"{k}={v}" for k, v in point.items())
            )
        return run_point(point, experiment, scale=scale, cluster=cluster, view=view, observe=trace)

    sweep = Sweep(experiment, full, one, on_point_done=live)
    return sweep.run(rerun=rerun)


def overhead_table(
    summary: Any,
    setting: str = "setting",
    baseline: str = "baseline",
    within: Sequence[str] = ("model",),
    y: str = "throughput_per_rank",
) -> Any:
    """Overhead ``1 − with/without`` of every setting against the baseline run of the
    same group (e.g. the same model), with the 95% CI propagated from both throughputs.
    ``summary`` may be one row per run or per setting (``lab.metrics.aggregate_runs``).

    Returns:
        One row per (group, setting) other than the baseline: the group's columns,
        ``setting``, the throughputs, ``overhead`` and ``overhead_ci`` (fractions).
    """
    import pandas as pd

    from lab.metrics.stats import Estimate, overhead

    ok = summary[summary["state"] == "succeeded"] if "state" in summary else summary
    rows = []
    for keys, group in ok.groupby(list(within)):
        base = group[group[setting] == baseline]
        if base.empty:
            continue
        b = base.iloc[-1]
        for _, row in group[group[setting] != baseline].iterrows():
            est = overhead(Estimate(row[y], row[f"{y}_ci"]), Estimate(b[y], b[f"{y}_ci"]))
            rows.append(
                {
                    **dict(zip(within, keys if isinstance(keys, tuple) else (keys,), strict=True)),
                    setting: row[setting],
                    "throughput": row[y],
                    "baseline_throughput": b[y],
                    "overhead": est.mean,
                    "overhead_ci": est.ci,
                }
            )
    return pd.DataFrame(rows)
