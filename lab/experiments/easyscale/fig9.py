"""Fig 9, accuracy consistency: the last EST's loss against the last DDP worker's, per
mini-batch, over three stages of an elastic job (4 × 1 EST → 2 × 2 → 1 fast × 2 + 2 slow × 1).

Each EasyScale configuration runs the stages as three launches joined by checkpoints; the
two DDP references run all mini-batches in one launch on four fast devices: "DDP homo" at D1
(deterministic kernels, rank-order gradient sum) and "DDP heter" at D1+D2 (also the settings
every device type computes alike with). Both DDPs use the rank-order sum hook: gloo's own
ring all-reduce has no fixed summation order, so vanilla DDP equals nothing bit for bit.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from lab.bench.easyscale.config import Config
from lab.errors import NothingMeasured
from lab.experiments.easyscale import published
from lab.experiments.easyscale.runs import EST_LABEL, est_losses, launch_stage, step_digests
from lab.experiments.verdicts import Status, Verdict
from lab.metrics.figures import style


@dataclass(frozen=True)
class Stage:
    name: str
    processes: int
    placement: str | None
    devices: tuple[str, ...]


STAGES = (
    Stage("stage 0: 4 fast × 1 EST", 4, None, ("fast",)),
    Stage("stage 1: 2 fast × 2 ESTs", 2, None, ("fast",)),
    Stage("stage 2: 1 fast × 2 + 2 slow × 1", 3, "2,1,1", ("fast", "slow", "slow")),
)
REFERENCE = {"D0": "DDP homo", "D1": "DDP homo", "D0+D2": "DDP heter", "D1+D2": "DDP heter"}
DDP_LEVEL = {"DDP homo": "D1", "DDP heter": "D1+D2"}
ESTS = 4
# The notebook's parameters per scale (lab.experiments.scale_parameters). At smoke scale
# two mini-batches per stage and the three levels the claim is about (D0+D2 adds a launch
# per stage and no claim): 11 launches, each mostly torch's start-up. Paper scale trains
# torchvision's ResNet50 (Fig 9a) on the profile's devices (env/clusters/easyscale-gpu.yaml).
DEFAULTS = {
    "smoke": {
        "steps": 2,
        "levels": ["D0", "D1", "D1+D2"],
        "base": {"batch_size": 8, "image_size": 16, "dataset_size": 512, "lr": 0.2},
    },
    "paper": {
        "steps": 100,
        "levels": list(REFERENCE),
        "base": {
            "model": "resnet50",
            "batch_size": 32,
            "image_size": 224,
            "dataset_size": 50_000,
            "lr": 0.1,
        },
    },
}


def parameters(scale: str, **given: Any) -> dict[str, Any]:
    """The notebook's parameters at ``scale`` (``scale_parameters``). A rehearsal runs one
    step a stage: ResNet-50's steps at 224 px took most of the first rehearsal's 303 s, and
    what it checks, each stage's hand-over to the next, one step crosses."""
    from lab.experiments import rehearsal
    from lab.experiments.points import scale_parameters

    defaults = dict(DEFAULTS)
    if given.get("steps") is None:
        why = "one step a stage: a rehearsal checks the hand-over between stages"
        defaults["paper"] = rehearsal.replace(DEFAULTS["paper"], {"steps": 1}, why, scale)
    return scale_parameters(scale, defaults, **given)


def run_fig9(
    steps: int,
    levels: Sequence[str] = tuple(REFERENCE),
    base: dict[str, Any] | None = None,
    cluster: str = "easyscale-local",
    view: Any = "auto",
    timeout: float = 600.0,
) -> dict[str, list[Path]]:
    """Run both DDP references and every level's three stages; returns run dirs by name."""
    base = {"ests": ESTS, "digest": True, **(base or {})}
    runs: dict[str, list[Path]] = {}
    for name in sorted({REFERENCE[lv] for lv in levels}):
        cfg = Config(system="ddp", processes=ESTS, steps=3 * steps, level=DDP_LEVEL[name], **base)
        result = launch_stage(cfg, cluster, ("fast",), "easyscale-fig9", timeout, view=view)
        runs[name] = [Path(result.run_dir)]
    with tempfile.TemporaryDirectory(prefix="easyscale-ck-") as tmp:
        for level in levels:
            runs[level] = []
            for i, stage in enumerate(STAGES):
                cfg = Config(
                    processes=stage.processes,
                    placement=stage.placement,
                    level=level,
                    steps=steps,
                    start_step=i * steps,
                    resume=str(Path(tmp, level, str(i - 1))) if i else "",
                    save=str(Path(tmp, level, str(i))),
                    **base,
                )
                result = launch_stage(
                    cfg, cluster, stage.devices, "easyscale-fig9", timeout, view=view
                )
                runs[level].append(Path(result.run_dir))
    return runs


def run_dirs(runs: dict[str, list[Path]]) -> list[str]:
    """Every run directory behind the figure (for the verdict and the caption)."""
    return [str(p) for dirs in runs.values() for p in dirs]


def differences(runs: dict[str, list[Path]], steps: int) -> pd.DataFrame:
    """One row per configuration and mini-batch: the last EST's and the last DDP worker's
    losses, their difference, and whether the loss bits and the parameters' bits are equal.

    Raises:
        NothingMeasured: a run recorded no loss or digest, or no configuration has its
            reference.
    """
    rows = []
    for level, reference in REFERENCE.items():
        if level not in runs or reference not in runs:
            continue
        try:
            ours, ref = est_losses(runs[level]), est_losses(runs[reference])
            same_params = step_digests(runs[level]).eq(step_digests(runs[reference]))
        except ValueError as e:
            raise NothingMeasured(f"EasyScale {level} against {reference}: {e}") from e
        ours, ref = ours[ours["est"] == ESTS - 1], ref[ref["est"] == ESTS - 1]
        both = ours.merge(ref, on="step", suffixes=("", "_ddp"))
        for _, r in both.iterrows():
            step = int(r["step"])
            rows.append(
                {
                    "config": f"EasyScale {level}",
                    "reference": reference,
                    "step": step,
                    "stage": step // steps,
                    "loss": float(r["loss"]),
                    "loss_ddp": float(r["loss_ddp"]),
                    "difference": float(r["loss"]) - float(r["loss_ddp"]),
                    "bits_equal": r["loss_hex"] == r["loss_hex_ddp"],
                    "params_equal": bool(same_params.get(step, False)),
                }
            )
    if not rows:
        raise NothingMeasured("no EasyScale configuration with its DDP reference was measured")
    return pd.DataFrame(rows)


def stage_table(diff: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and stage: mini-batches, how many losses are bit-equal, max |diff|."""
    g = diff.groupby(["config", "reference", "stage"])
    return g.agg(
        minibatches=("step", "size"),
        losses_bit_equal=("bits_equal", "sum"),
        params_bit_equal=("params_equal", "sum"),
        max_abs_difference=("difference", lambda s: float(s.abs().max())),
    ).reset_index()


def figure(diff: pd.DataFrame, caption: str | None = None) -> go.Figure:
    """Loss difference (last EST − last DDP worker) per mini-batch, stages shaded; a cross
    marks a mini-batch after which the parameters' bits differ from DDP's (a loss can still
    be equal then: a small change in the parameters shows in the loss only later).
    ``caption`` says where and at which scale (``lab.metrics.figures.runs_caption``)."""
    fig = go.Figure()
    for config, part in diff.groupby("config", sort=False):
        ref = part["reference"].iloc[0]
        fig.add_scatter(
            x=part["step"],
            y=part["difference"],
            mode="lines+markers",
            name=f"{config} vs {ref}",
            marker={
                "symbol": ["circle" if eq else "x" for eq in part["params_equal"]],
                "size": [7 if eq else 11 for eq in part["params_equal"]],
            },
        )
    steps = int(diff["step"].max()) + 1
    per = steps // len(STAGES) or 1
    for i, stage in enumerate(STAGES):
        fig.add_vrect(
            x0=i * per - 0.5,
            x1=(i + 1) * per - 0.5,
            fillcolor="gray",
            opacity=0.05 * (i + 1),
            line_width=0,
        )
        head, _, rest = stage.name.partition(": ")
        fig.add_annotation(
            x=(i + 0.5) * per - 0.5,
            y=1.0,
            yref="paper",
            yanchor="bottom",
            text=f"{head}:<br>{rest}" if rest else head,
            showarrow=False,
            font={"size": 11},
        )
    fig.update_layout(
        title=f"Fig 9: loss difference to DDP, {EST_LABEL}",
        xaxis_title="mini-batch",
        yaxis_title="loss(last EST) − loss(last DDP)",
    )
    note = "×: after this mini-batch the parameters' bits differ from DDP's."
    return style(fig, caption=f"{note} {caption}" if caption else note)


def verdict(diff: pd.DataFrame, scale: str, hardware: str, runs: Sequence[str] = ()) -> Verdict:
    """D1 exactly equal in stages 0–1, D1+D2 in every stage, D0 not: computed from bits."""

    def equal(config: str, stages: Sequence[int]) -> bool | None:
        part = diff[(diff["config"] == config) & diff["stage"].isin(stages)]
        return None if part.empty else bool(part["bits_equal"].all())

    d1 = equal("EasyScale D1", [0, 1])
    d12 = equal("EasyScale D1+D2", [0, 1, 2])
    d0 = diff[diff["config"] == "EasyScale D0"]
    d0_differs = None if d0.empty else bool((~d0["bits_equal"] | ~d0["params_equal"]).any())
    checks = {"D1 = 0 in stages 0-1": d1, "D1+D2 = 0 in all stages": d12, "D0 ≠ 0": d0_differs}
    if any(v is None for v in checks.values()):
        status = Status.NOT_MEASURED
    else:
        status = Status.REPRODUCED if all(checks.values()) else Status.NOT_REPRODUCED
    d12_rows = diff[diff["config"] == "EasyScale D1+D2"]
    ref = published.value("Fig 9", system="EasyScale D1+D2")
    why = "; ".join(
        f"{k}: {'holds' if v else 'fails' if v is not None else 'not run'}"
        for k, v in checks.items()
    )
    return Verdict(
        paper=published.EASYSCALE_SC23,
        figure="Fig 9",
        claim="loss equals DDP's bit for bit across rescaling (D1) and device types (D1+D2)",
        status=status,
        lab_value=float(d12_rows["difference"].abs().max()) if len(d12_rows) else None,
        published_value=ref.value,
        published_source=ref.source,
        unit="max |loss difference| of D1+D2",
        scale=scale,
        hardware=hardware,
        why=why + " (exact bit patterns of every loss; D0 also by the parameters' bits).",
        runs=tuple(runs),
        precision="exact: bit patterns compared, so no interval applies",
    )
