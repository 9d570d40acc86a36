"""Fig 10, sharing one device: N workers as N packed DDP processes vs N ESTs in one process.

Memory is each process's proportional set size at its end (PSS: shared library pages are
split among the processes that map them, so the packed processes' sum is the memory they
really take together) and its peak RSS; throughput is the job's samples per second. The
paper measured GPU memory on a V100, where packing ran out of memory at 8 workers; on a GPU
(``device="cuda"``, paper scale) the memory compared is each rank's
``torch.cuda.max_memory_allocated``, summed over the processes sharing the GPU.
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
from lab.errors import NothingMeasured, RanksFailed
from lab.experiments.easyscale import published
from lab.experiments.easyscale.runs import EST_LABEL, launch_stage
from lab.experiments.verdicts import Status, Verdict
from lab.metrics.figures import COLORS, style

GIB = 2**30
PACKED = "worker packing (DDP processes, torch.distributed gloo)"
LEGEND = {PACKED: "worker packing (DDP processes)", EST_LABEL: "EasyScaleThreads (lab)"}
# The notebook's parameters per scale (lab.experiments.scale_parameters): three worker
# counts give each system a slope; three steps leave two timed after the first.
DEFAULTS = {
    "smoke": {
        "workers": [1, 2, 4],
        "steps": 3,
        "base": {"batch_size": 16, "image_size": 16, "dataset_size": 512},
    },
    "paper": {
        "workers": [1, 2, 4, 8, 16],
        "steps": 20,
        "base": {
            "model": "resnet50",
            "batch_size": 32,
            "image_size": 224,
            "dataset_size": 50_000,
        },
    },
}


def run_sharing(
    workers: Sequence[int],
    steps: int,
    base: dict[str, Any],
    device: str = "slow",
    cluster: str = "easyscale-local",
    view: Any = "auto",
) -> pd.DataFrame:
    """For each N: N packed DDP processes, and one process holding N ESTs.

    A system whose ranks run out of GPU memory at some N (packing at 8 on the paper's V100)
    gets a row with ``run`` None and ``fits`` False there, and is not tried at larger N;
    any other failure is raised.
    """
    rows: list[dict[str, Any]] = []
    full: set[str] = set()
    for n in workers:
        for system, cfg in (
            (PACKED, Config(system="ddp", ests=n, processes=n, steps=steps, **base)),
            (EST_LABEL, Config(ests=n, processes=1, steps=steps, **base)),
        ):
            if system in full:
                continue
            try:
                result = launch_stage(cfg, cluster, (device,), "easyscale-fig10", 600, view=view)
            except RanksFailed as e:
                if not out_of_memory(e):
                    raise
                full.add(system)
                rows.append({"system": system, "workers": n, "run": None, "fits": False})
                continue
            rows.append({"system": system, "workers": n, "run": Path(result.run_dir), "fits": True})
    return pd.DataFrame(rows)


def out_of_memory(error: RanksFailed) -> bool:
    """Whether a rank of the failed run ended with torch's CUDA out-of-memory error."""
    text = "\n".join(line for f in error.failures for line in f.tail)
    return "OutOfMemoryError" in text or "CUDA out of memory" in text


def sharing_table(runs: pd.DataFrame, warmup: int = 1) -> pd.DataFrame:
    """Per system and N: PSS and peak RSS summed over its processes (GiB), samples/s."""
    from lab.metrics.store import load_run

    out = []
    for _, row in runs.iterrows():
        if row["run"] is None or (isinstance(row["run"], float) and pd.isna(row["run"])):
            out.append({"system": row["system"], "workers": int(row["workers"]), "fits": False})
            continue  # ran out of the device's memory (run_sharing)
        df = load_run(row["run"])
        summ = df[df["kind"] == "summary"]
        st = df[df["kind"] == "step"]
        st = st[st["step"] >= st["step"].min() + warmup]
        if summ.empty or st.empty or "pss_bytes" not in summ:
            continue
        on_gpu = (
            "cuda_max_allocated_bytes" in summ and summ["cuda_max_allocated_bytes"].notna().all()
        )
        memory = summ["cuda_max_allocated_bytes"] if on_gpu else summ["pss_bytes"]
        per_step = st.groupby("step").agg(samples=("samples", "sum"), seconds=("seconds", "max"))
        out.append(
            {
                "system": row["system"],
                "workers": int(row["workers"]),
                "pss_gib": float(summ["pss_bytes"].sum()) / GIB,
                "rss_peak_gib": float(summ["rss_peak_bytes"].sum()) / GIB,
                "memory_gib": float(memory.sum()) / GIB,
                "memory_measure": "CUDA max allocated" if on_gpu else "PSS",
                "fits": True,
                "samples_per_s": float(per_step["samples"].sum() / per_step["seconds"].sum()),
            }
        )
    if not any(r["fits"] for r in out):
        raise NothingMeasured("no sharing run reported memory and steps")
    return pd.DataFrame(out).sort_values(["system", "workers"]).reset_index(drop=True)


def slopes(table: pd.DataFrame) -> dict[str, float]:
    """GiB of PSS each added worker costs, per system (least-squares slope over N)."""
    out = {}
    fitted = table[table["fits"]] if "fits" in table else table
    for system, part in fitted.groupby("system"):
        if part["workers"].nunique() > 1:
            out[system] = float(np.polyfit(part["workers"], part["memory_gib"], 1)[0])
    return out


def figure(table: pd.DataFrame, caption: str | None = None) -> go.Figure:
    """Memory and throughput against N for both systems, the published EasyScale memory
    as a line; ``caption`` says where and at which scale the lab measured."""
    measure = ", ".join(sorted(set(table["memory_measure"].dropna())))
    titles = (f"memory ({measure}, GiB)", "samples/s")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.12)
    colors = {}
    for i, (system, part) in enumerate(table.groupby("system")):
        name = LEGEND.get(system, system)
        colors[system] = COLORS[i % len(COLORS)]
        common = {"name": name, "legendgroup": name, "line": {"color": colors[system]}}
        common["hovertemplate"] = "%{x} workers: %{y:.3g}<extra>" + system + "</extra>"
        fig.add_scatter(x=part["workers"], y=part["memory_gib"], row=1, col=1, **common)
        fig.add_scatter(
            x=part["workers"], y=part["samples_per_s"], row=1, col=2, showlegend=False, **common
        )
    flat = published.value("Fig 10", quantity="memory")
    fig.add_hline(
        y=flat.value,
        line_dash="dot",
        row=1,
        col=1,
        annotation_text=f"paper: {flat.value:g} GiB, flat to 16 workers (V100, ResNet50)",
        annotation_position="bottom left",
        annotation_font_size=11,
    )
    fig.update_xaxes(title_text="workers on one device")
    fig.update_layout(title="Fig 10: N workers on one device")
    return style(fig, caption=caption, sources=[flat.source])


def verdict(
    table: pd.DataFrame,
    scale: str,
    hardware: str,
    ratio: float = 0.25,
    runs: Sequence[str | Path] = (),
) -> Verdict:
    """ESTs grow memory far less than packing: slope(EST) < ``ratio`` × slope(packing).
    ``runs``: the run directories the table was read from."""
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
            runs=tuple(str(r) for r in runs),
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
        f"{s[PACKED] * 1024:.0f} MiB ({', '.join(sorted(set(table['memory_measure'].dropna())))}; "
        f"test: EST < {ratio:.0%} of packing).",
        runs=tuple(str(r) for r in runs),
    )
