"""KungFu Fig 7: how long a running synchronous job takes to resize.

One elastic run per system plays the same schedule of worker counts: KungFu itself
(``kungfu-run -w``, resizing through its config server: lab.experiments.kungfu.kungfu_resize)
and Horovod Elastic (lab.experiments.kungfu.scaling). Everything here is rebuilt from the
run directories alone: the ranks' step records and the host changes (``events.jsonl``
where the lab's driver wrote them, else rank 0's ``discovery`` records). A resize's
latency is the time from the host change to the first training step finished at the new
size.

Status rule (``verdict``): the artifact reports growing 1→2 VMs far slower than
shrinking back. The lab's run *reproduces* that ordering when every requested resize was
served and every grow took longer than every shrink; it does *not reproduce* it when a
shrink took at least as long as a grow; it is *not resolved* when a resize was not
served before the run ended or the schedule did not both grow and shrink. The rule is
applied to KungFu's own run where there is one, else to the lab's Horovod run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.evidence import where
from lab.experiments.kungfu.kungfu_resize import run_kungfu_resizing
from lab.experiments.kungfu.published import KUNGFU_OSDI20
from lab.experiments.kungfu.scaling import read_events, run_resizing
from lab.experiments.kungfu.throughput_bins import BIN_S, binned_throughput
from lab.experiments.verdicts import Status, Verdict

EXPERIMENT = "kungfu/fig7_scaling"
FIGURE = "Fig 7"
SYSTEM = "horovod-gloo"  # horovodrun --gloo in elastic mode
KUNGFU = "kungfu-elastic"  # kungfu-run -w with its config server
LAB_LABEL = "Horovod Elastic (lab)"
LABELS = {SYSTEM: LAB_LABEL, KUNGFU: "KungFu elastic (config server)"}
SHORT = {SYSTEM: "Horovod Elastic", KUNGFU: "KungFu"}  # legend names
DEFAULTS: dict[str, dict[str, Any]] = {
    # seconds after the first step: a grow took 3-6 s in the make runs (the new worker
    # starts TensorFlow; KungFu's 3.0-3.5 s, Horovod's 4.8-6.2 s), once up to 22 s under
    # other load (none runs beside a make run); 15 s is left for it before the shrink, and
    # 4 s after it (a shrink took 0.03-0.8 s). A run is ~29 s in all
    "smoke": {
        "systems": [KUNGFU, SYSTEM],
        "schedule": "0:1,3:2,18:1,22:stop",
        "model": "tiny_cnn",
        "batch_size": 32,
    },
    "paper": {
        "systems": [KUNGFU, SYSTEM],
        "schedule": "0:1,60:2,120:4,180:2,240:1,300:stop",
        "model": "ResNet50",
        "batch_size": 32,
    },
}
RESIZE_COLUMNS = ["resize", "old_size", "new_size", "latency", "published", "requested"]


def points(p: Mapping[str, Any], systems: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One elastic run per system (default: Horovod Elastic): no warm-up, steps until the
    schedule's stop."""
    return [
        {
            "system": system,
            "schedule": p["schedule"],
            "model": p["model"],
            "batch_size": p["batch_size"],
            "warmup_steps": 0,
            "steps": 100_000,
            "threads": 1,
        }
        for system in (systems or [SYSTEM])
    ]


def runner(cluster: Any = "local", timeout: float = 600) -> Callable[..., Any]:
    """What ``run_sweep(run=...)`` calls for a point: one elastic run on ``cluster``
    (shown in ``out``, an ``ipywidgets.Output``, when one is given)."""

    def run(point: dict[str, Any], out: Any = None) -> Any:
        from lab.experiments.points import recorded_tags

        view: Any = "auto"
        if out is not None:
            from lab.cluster.view import ShownIn

            view = ShownIn(out)
        point = {**point, **recorded_tags()}  # e.g. that the controls made it
        if point["system"] == KUNGFU:
            return run_kungfu_resizing(
                point["schedule"], point, EXPERIMENT, cluster=cluster, timeout=timeout, view=view
            )
        result, _events = run_resizing(
            point["schedule"], point, EXPERIMENT, cluster=cluster, timeout=timeout, view=view
        )
        return result

    return run


def run_one(
    values: Mapping[str, Any], scale: str = "smoke", cluster: Any = "local", out: Any = None
) -> Any:
    """One run from the controls' values (system, schedule, model, batch size): the
    sweep's point for them, completed as the sweep completes it, so the sweep finds it."""
    from lab.experiments.points import cluster_name, complete_point

    one = points(values, [values.get("system", SYSTEM)])[0]
    point = complete_point({"cluster": cluster_name(cluster), **one}, scale)
    return runner(cluster)(point, out=out)


def checked_schedule(text: str) -> str:
    """A schedule as the controls take it: entries ``parse_schedule`` reads, ending with
    ``SECONDS:stop`` (the run steps until it stops). Raises ParameterError."""
    from lab.cluster.elastic_hosts import parse_schedule

    changes = parse_schedule(text)
    if not changes[-1].stop or not any(not c.stop for c in changes):
        raise ParameterError("schedule", text, "SECONDS:SLOTS entries, the last SECONDS:stop")
    return text


def published() -> pd.DataFrame:
    """The artifact's resize times (the one table)."""
    from lab.experiments.published import published_table

    return published_table(paper=KUNGFU_OSDI20, figure=FIGURE)


def _lab_records(run_dir: str | Path) -> list[dict[str, Any]]:
    from lab.metrics.store import load_run

    records = load_run(run_dir)
    lab = records[records["source"] == "lab"] if "source" in records else records
    return lab.to_dict("records")


def _is_change(r: Mapping[str, Any]) -> bool:
    return r.get("kind") == "event" and r.get("name") == "discovery"


def host_changes(run_dir: str | Path, records: Sequence[Mapping[str, Any]] = ()) -> list[dict]:
    """The run's host changes: the driver's ``events.jsonl`` (Horovod Elastic), else the
    ``discovery`` records rank 0 printed (KungFu resizes from inside the job)."""
    events = read_events(run_dir)
    if events:
        return events
    return [dict(r) for r in (records or _lab_records(run_dir)) if _is_change(r)]


def _records(run_dir: str | Path) -> list[dict[str, Any]]:
    lab = _lab_records(run_dir)
    return [r for r in lab if not _is_change(r)] + host_changes(run_dir, lab)


def system_of(run_dir: str | Path) -> str:
    """The system a run measured (its manifest's parameters; Horovod Elastic if unsaid)."""
    from lab.metrics.layout import read_manifest

    return str((read_manifest(run_dir).get("params") or {}).get("system") or SYSTEM)


def label_of(run_dir: str | Path) -> str:
    system = system_of(run_dir)
    return LABELS.get(system, system)


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


def resizes_of(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """``resizes`` of every run, each row with its ``system`` and ``label``."""
    tables = [resizes(d).assign(system=system_of(d), label=label_of(d)) for d in run_dirs]
    cols = ["system", "label", *RESIZE_COLUMNS]
    if not tables:
        return pd.DataFrame(columns=cols)
    return pd.concat(tables, ignore_index=True)[cols]


def timeline(run_dir: str | Path) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The job's total throughput in 1-s bins since the first host change
    (``binned_throughput``), and the host changes on the same clock."""
    from lab.metrics.store import load_run

    events = host_changes(run_dir)
    if not events:
        raise NothingMeasured(
            f"{run_dir}: no host changes recorded (no events.jsonl, no discovery records)"
        )
    t0 = min(float(e["time"]) for e in events)
    records = load_run(run_dir)
    steps = records[(records["kind"] == "step") & (records["source"] == "lab")]
    return binned_throughput(steps, t0), [{**e, "t": float(e["time"]) - t0} for e in events]


def short_label(run_dir: str | Path) -> str:
    """The legend's name of a run: system · model."""
    from lab.metrics.layout import read_manifest

    params = read_manifest(run_dir).get("params") or {}
    system = SHORT.get(system_of(run_dir), system_of(run_dir))
    return f"{system} · {params['model']}" if params.get("model") else system


def run_traces(run_dir: str | Path) -> list[Any]:
    """One run as ``figure`` draws it (what ``Controls.mark(draw=...)`` adds)."""
    return [_line(run_dir, timeline(run_dir)[0])]


def _line(run_dir: str | Path, line: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    return go.Scatter(
        x=line["t"].tolist(),
        y=line["throughput"].tolist(),
        customdata=line[["samples", "steps"]].to_numpy().tolist(),
        hovertemplate="%{x:.1f} s: %{y:.4s} img/s (%{customdata[0]:.0f} samples in "
        "%{customdata[1]} steps)<extra>" + label_of(run_dir) + "</extra>",
        mode="lines+markers",
        marker={"size": 4},
        name=short_label(run_dir),
    )


def figure(runs: str | Path | Sequence[str | Path], caption: str | None = None) -> Any:
    """Throughput around each resize, one line per run (each on its own clock from its
    first host change), with a dashed line at every host change of the first run (the
    runs play the same schedule), and a footnote with each run's resize latencies beside
    the published ones."""
    import plotly.graph_objects as go

    from lab.metrics.figures import style
    from lab.metrics.layout import read_manifest

    dirs = [runs] if isinstance(runs, str | Path) else list(runs)
    if not dirs:
        raise NothingMeasured(f"KungFu {FIGURE}: no run to draw")
    fig = go.Figure()
    changes: list[dict[str, Any]] = []
    for run_dir in dirs:
        line, changed = timeline(run_dir)
        changes = changes or changed
        fig.add_trace(_line(run_dir, line))
    params = read_manifest(dirs[0]).get("params") or {}
    for e in changes:
        if e["t"] > 0:
            fig.add_vline(
                x=e["t"],
                line_dash="dash",
                line_color="#888",
                annotation_text=f"→ {int(e['slots'])}",
                annotation_position="top right",
            )
    fig.update_layout(
        xaxis_title="seconds since the schedule started (dashed: host change → workers)",
        yaxis={"title": f"img/s, all workers ({BIN_S:g}-s bins)", "rangemode": "tozero"},
        template="plotly_white",
    )
    title = (
        f"Throughput around each resize ({params.get('model', '?')}, batch "
        f"{params.get('batch_size', '?')} per worker)"
    )
    fig.update_layout(title=title)
    notes = [_latency_note(dirs), caption or ""]
    sources = published()["source"].tolist()
    return style(fig, caption=" ".join(n for n in notes if n), sources=sources, legend="top")


def _latency_note(dirs: Sequence[str | Path]) -> str:
    """One sentence per run: its resize latencies; then the published ones."""
    parts = []
    for run_dir in dirs:
        table = resizes(run_dir)
        if not table.empty:
            parts.append(f"{SHORT.get(system_of(run_dir), system_of(run_dir))} "
                         + _resize_words(table))  # fmt: skip
    paper = published()
    if not paper.empty:
        pub = "; ".join(f"{r.setting} {r.value:.3g} s" for r in paper.itertuples())
        parts.append(f"published (KungFu artifact): {pub}")
    return ("Time to the first step at the new size: " + ". ".join(parts) + ".") if parts else ""


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
    """Fig 7's verdict: the judged run's first grow latency beside the published one, the
    status by the rule in the module docstring, every resize of every run in ``why``.

    ``table``: ``resizes`` of one run, or ``resizes_of`` several (with ``system`` and
    ``label``); KungFu's own run is judged where it is there, else the lab's.

    Raises:
        NothingMeasured: the run requested no resize.
    """
    if table.empty:
        raise NothingMeasured(f"KungFu {FIGURE}: the run requested no resize")
    judged_label = LAB_LABEL
    if "system" in table:
        systems = table["system"].tolist()
        judged = KUNGFU if KUNGFU in systems else systems[0]
        judged_label = str(table.loc[table["system"] == judged, "label"].iloc[0])
        others = table[table["system"] != judged]
        table = table[table["system"] == judged]
    else:
        others = table.iloc[0:0]
    grows = table[table["new_size"] > table["old_size"]]
    head = grows.iloc[0] if len(grows) else table.iloc[0]
    paper = published().set_index("setting")
    source = paper.loc[head["resize"], "source"] if head["resize"] in paper.index else None
    why = _resize_words(table, published_too=True)
    if not others.empty:
        for label, group in others.groupby("label", sort=False):
            why += f". {label}: {_resize_words(group)}"
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
        why=f"{judged_label}: {why}. The published times are KungFu's.",
        runs=tuple(runs),
    )


def _resize_words(table: pd.DataFrame, published_too: bool = False) -> str:
    return "; ".join(
        f"{r.resize}: "
        + (f"{r.latency:.3g} s" if pd.notna(r.latency) else "not served before the run ended")
        + (f" (published {r.published:.3g} s)" if published_too and pd.notna(r.published) else "")
        for r in table.itertuples()
    )
