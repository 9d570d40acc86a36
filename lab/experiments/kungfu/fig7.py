"""KungFu Fig 7: how long a running synchronous job takes to resize.

One elastic run (``lab.experiments.kungfu.scaling``) plays a schedule of worker counts;
everything here is rebuilt from its run directory alone: the ranks' step records and the
host changes the schedule wrote (``events.jsonl``). A resize's latency is the time from
the host change to the first training step finished at the new size.

Status rule (``verdict``): the artifact reports growing 1→2 VMs far slower than
shrinking back. The lab's run *reproduces* that ordering when every requested resize was
served and every grow took longer than every shrink; it does *not reproduce* it when a
shrink took at least as long as a grow; it is *not resolved* when a resize was not
served before the run ended or the schedule did not both grow and shrink.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured
from lab.experiments.evidence import where
from lab.experiments.kungfu.published import KUNGFU_OSDI20
from lab.experiments.kungfu.scaling import read_events, run_resizing
from lab.experiments.verdicts import Status, Verdict

EXPERIMENT = "kungfu/fig7_scaling"
FIGURE = "Fig 7"
SYSTEM = "horovod-gloo"  # horovodrun --gloo in elastic mode
LAB_LABEL = "Horovod Elastic (lab)"
DEFAULTS: dict[str, dict[str, Any]] = {
    # seconds after the first step; a grow on a busy 2-core machine can take a minute
    "smoke": {"schedule": "0:1,20:2,110:1,140:stop", "model": "tiny_cnn", "batch_size": 32},
    "paper": {
        "schedule": "0:1,60:2,120:4,180:2,240:1,300:stop",
        "model": "ResNet50",
        "batch_size": 32,
    },
}
RESIZE_COLUMNS = ["resize", "old_size", "new_size", "latency", "published", "requested"]


def points(p: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The one elastic run: no warm-up, steps until the schedule's stop."""
    return [
        {
            "system": SYSTEM,
            "schedule": p["schedule"],
            "model": p["model"],
            "batch_size": p["batch_size"],
            "warmup_steps": 0,
            "steps": 100_000,
            "threads": 1,
        }
    ]


def runner(cluster: Any = "local", timeout: float = 600) -> Callable[..., Any]:
    """What ``run_sweep(run=...)`` calls for a point: one elastic run on ``cluster``
    (shown in ``out``, an ``ipywidgets.Output``, when one is given)."""

    def run(point: dict[str, Any], out: Any = None) -> Any:
        view: Any = "auto"
        if out is not None:
            from lab.cluster.view import ShownIn

            view = ShownIn(out)
        result, _events = run_resizing(
            point["schedule"], point, EXPERIMENT, cluster=cluster, timeout=timeout, view=view
        )
        return result

    return run


def run_one(
    values: Mapping[str, Any], scale: str = "smoke", cluster: Any = "local", out: Any = None
) -> Any:
    """One run from the controls' values (schedule, model, batch size)."""
    from lab.experiments.points import cluster_name, complete_point

    point = complete_point({"cluster": cluster_name(cluster), **points(values)[0]}, scale)
    return runner(cluster)(point, out=out)


def published() -> pd.DataFrame:
    """The artifact's resize times (the one table)."""
    from lab.experiments.published import published_table

    return published_table(paper=KUNGFU_OSDI20, figure=FIGURE)


def _records(run_dir: str | Path) -> list[dict[str, Any]]:
    from lab.metrics.store import load_run

    records = load_run(run_dir)
    lab = records[records["source"] == "lab"] if "source" in records else records
    return lab.to_dict("records") + read_events(run_dir)


def resizes(run_dir: str | Path) -> pd.DataFrame:
    """Each requested resize of the run with its latency (NaN: not served before the run
    ended) and the published time for the same resize, where there is one."""
    from lab.bench.elastic import resize_latencies

    rows = resize_latencies(_records(run_dir))
    paper = published().set_index("setting")["value"].to_dict()
    out = []
    for r in rows:
        key = f"resize {r['old_size']}→{r['new_size']}"
        latency = math.nan if r["latency"] is None else float(r["latency"])
        out.append({**r, "resize": key, "latency": latency, "published": paper.get(key, math.nan)})
    return pd.DataFrame(out, columns=RESIZE_COLUMNS)


def timeline(run_dir: str | Path) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The job's total throughput per second since the first host change, and the host
    changes on the same clock."""
    from lab.metrics.store import load_run

    events = read_events(run_dir)
    if not events:
        raise NothingMeasured(f"{run_dir}: no host changes recorded (no events.jsonl)")
    t0 = min(float(e["time"]) for e in events)
    records = load_run(run_dir)
    steps = records[(records["kind"] == "step") & (records["source"] == "lab")].copy()
    steps["t"] = (pd.to_numeric(steps["time"]) - t0).round(0)
    line = steps.groupby("t")["throughput"].sum().reset_index()
    return line, [{**e, "t": float(e["time"]) - t0} for e in events]


def figure(run_dir: str | Path, caption: str | None = None) -> Any:
    """Throughput around each resize, with a dashed line at every host change."""
    import plotly.graph_objects as go

    from lab.metrics.figures import add_caption
    from lab.metrics.layout import read_manifest

    line, changes = timeline(run_dir)
    params = read_manifest(run_dir).get("params") or {}
    fig = go.Figure(
        go.Scatter(
            x=line["t"].tolist(),
            y=line["throughput"].tolist(),
            mode="lines+markers",
            name=f"total img/s ({LAB_LABEL})",
        )
    )
    for e in changes:
        if e["t"] > 0:
            fig.add_vline(x=e["t"], line_dash="dash", annotation_text=f"→ {e['slots']} workers")
    fig.update_layout(
        title=f"Throughput around each resize ({params.get('model', '?')}, batch "
        f"{params.get('batch_size', '?')} per worker)",
        xaxis_title="seconds since start",
        yaxis_title="img/s (all workers)",
        template="plotly_white",
    )
    return add_caption(fig, caption)


def status_of(table: pd.DataFrame) -> Status:
    """The rule in the module docstring."""
    if table.empty or table["latency"].isna().any():
        return Status.NOT_RESOLVED
    grows = table[table["new_size"] > table["old_size"]]["latency"]
    shrinks = table[table["new_size"] < table["old_size"]]["latency"]
    if grows.empty or shrinks.empty:
        return Status.NOT_RESOLVED
    return Status.REPRODUCED if grows.min() > shrinks.max() else Status.NOT_REPRODUCED


def verdict(
    table: pd.DataFrame, scale: str, runs: Sequence[str] = (), hardware: str | None = None
) -> Verdict:
    """Fig 7's verdict: the lab's first grow latency beside the published one, the status
    by the rule in the module docstring, every resize in ``why``.

    Raises:
        NothingMeasured: the run requested no resize.
    """
    if table.empty:
        raise NothingMeasured(f"KungFu {FIGURE}: the run requested no resize")
    grows = table[table["new_size"] > table["old_size"]]
    head = grows.iloc[0] if len(grows) else table.iloc[0]
    paper = published().set_index("setting")
    source = paper.loc[head["resize"], "source"] if head["resize"] in paper.index else None
    why = "; ".join(
        f"{r.resize}: "
        + (f"{r.latency:.3g} s" if pd.notna(r.latency) else "not served before the run ended")
        + (f" (published {r.published:.3g} s)" if pd.notna(r.published) else "")
        for r in table.itertuples()
    )
    return Verdict(
        paper=KUNGFU_OSDI20,
        figure=FIGURE,
        claim=f"growing a running job takes far longer than shrinking it ({head['resize']})",
        status=status_of(table),
        lab_value=None if pd.isna(head["latency"]) else float(head["latency"]),
        published_value=None if pd.isna(head["published"]) else float(head["published"]),
        published_source=source,
        unit="s",
        scale=scale,
        hardware=where(runs) if hardware is None else hardware,
        why=f"{why}. The lab measured {LAB_LABEL}; the published times are KungFu's.",
        runs=tuple(runs),
    )
