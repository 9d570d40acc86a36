"""Fig 10, sharing one device: N workers as N packed DDP processes vs N ESTs in one process.

Memory is each process's proportional set size at its end (PSS: shared library pages are
split among the processes that map them, so the packed processes' sum is the memory they
really take together) and its peak RSS; throughput is the job's samples per second. The
paper measured GPU memory on a V100, where packing ran out of memory at 8 workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.bench.easyscale.config import Config
from lab.experiments.easyscale import published
from lab.experiments.easyscale.runs import EST_LABEL, launch_stage
from lab.experiments.verdicts import Status, Verdict

GIB = 2**30
PACKED = "worker packing (DDP processes, torch.distributed gloo)"


def run_sharing(
    workers: Sequence[int],
    steps: int,
    base: dict[str, Any],
    device: str = "slow",
    cluster: str = "easyscale-local",
    view: Any = "auto",
) -> pd.DataFrame:
    """For each N: N packed DDP processes, and one process holding N ESTs."""
    rows = []
    for n in workers:
        for system, cfg in (
            (PACKED, Config(system="ddp", ests=n, processes=n, steps=steps, **base)),
            (EST_LABEL, Config(ests=n, processes=1, steps=steps, **base)),
        ):
            result = launch_stage(cfg, cluster, (device,), "easyscale-fig10", 600, view=view)
            rows.append({"system": system, "workers": n, "run": Path(result.run_dir)})
    return pd.DataFrame(rows)


def sharing_table(runs: pd.DataFrame, warmup: int = 1) -> pd.DataFrame:
    """Per system and N: PSS and peak RSS summed over its processes (GiB), samples/s."""
    from lab.metrics.store import load_run

    out = []
    for _, row in runs.iterrows():
        df = load_run(row["run"])
        summ = df[df["kind"] == "summary"]
        st = df[df["kind"] == "step"]
        st = st[st["step"] >= st["step"].min() + warmup]
        if summ.empty or st.empty or "pss_bytes" not in summ:
            continue
        per_step = st.groupby("step").agg(samples=("samples", "sum"), seconds=("seconds", "max"))
        out.append(
            {
                "system": row["system"],
                "workers": int(row["workers"]),
                "pss_gib": float(summ["pss_bytes"].sum()) / GIB,
                "rss_peak_gib": float(summ["rss_peak_bytes"].sum()) / GIB,
                "samples_per_s": float(per_step["samples"].sum() / per_step["seconds"].sum()),
            }
        )
    if not out:
        raise ValueError("no sharing run reported memory and steps")
    return pd.DataFrame(out).sort_values(["system", "workers"]).reset_index(drop=True)


def slopes(table: pd.DataFrame) -> dict[str, float]:
    """GiB of PSS each added worker costs, per system (least-squares slope over N)."""
    out = {}
    for system, part in table.groupby("system"):
        if part["workers"].nunique() > 1:
            out[system] = float(np.polyfit(part["workers"], part["pss_gib"], 1)[0])
    return out


def figure(table: pd.DataFrame, hardware: str = "") -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("memory (PSS, GiB)", "samples/s"))
    for system, part in table.groupby("system"):
        fig.add_scatter(x=part["workers"], y=part["pss_gib"], name=system, row=1, col=1)
        fig.add_scatter(
            x=part["workers"], y=part["samples_per_s"], name=system, row=1, col=2, showlegend=False
        )
    flat = published.value("Fig 10", quantity="memory")
    fig.add_hline(
        y=flat.value,
        line_dash="dot",
        row=1,
        col=1,
        annotation_text="EasyScale published: 4.74 GiB flat to 16 (V100, ResNet50)",
    )
    fig.update_xaxes(title_text="workers on one device")
    fig.update_layout(
        title="Fig 10: N workers on one device" + (f" — {hardware}" if hardware else "")
    )
    return fig


def verdict(table: pd.DataFrame, scale: str, hardware: str, ratio: float = 0.25) -> Verdict:
    """ESTs grow memory far less than packing: slope(EST) < ``ratio`` × slope(packing)."""
    s = slopes(table)
    ref = published.value("Fig 10", quantity="memory_per_worker")
    if PACKED not in s or EST_LABEL not in s:
        return Verdict(
            paper=published.EASYSCALE_SC23,
            figure="Fig 10",
            claim="ESTs share memory",
            status=Status.NOT_MEASURED,
            scale=scale,
            hardware=hardware,
        )
    ok = s[EST_LABEL] < ratio * s[PACKED]
    return Verdict(
        paper=published.EASYSCALE_SC23,
        figure="Fig 10",
        claim="N ESTs in one process take far less memory than N packed workers",
        status=Status.REPRODUCED if ok else Status.NOT_REPRODUCED,
        lab_value=s[PACKED],
        published_value=ref.value,
        published_source=ref.source,
        unit="GiB per added packed worker",
        scale=scale,
        hardware=hardware,
        why=f"each added EST costs {s[EST_LABEL] * 1024:.1f} MiB, each packed worker "
        f"{s[PACKED] * 1024:.0f} MiB (PSS; test: EST < {ratio:.0%} of packing).",
    )
