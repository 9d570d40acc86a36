"""What a training job costs on transient vs on-demand servers, built from the lab's models.

Beyond the paper: the speed model (CM-DARE's K80/P100 SVR, re-fitted on the shipped data)
gives the job's speed, the checkpoint model its checkpoint stall, the artifact's measured
preemptible VM start-up times the restart after a revocation, and a lifetime distribution
(the shipped CDFs, or any other) when revocations come. ``transient`` (this room) runs
the Monte Carlo; prices are the caller's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.cmdare import data, speed
from lab.experiments.cmdare.speed_model import fit
from lab.experiments.cmdare.transient import Job, Sampler, empirical_seconds, summarize
from lab.experiments.verdicts import Status, Verdict

PAPER = "CM-DARE (ICDCS'20)"
TITLE_CHARS = 80  # a longer title goes into the footnote, under a short one


@dataclass(frozen=True)
class Modelled:
    """A job whose speed and checkpoint time come from the models, and where from."""

    job: Job
    step_seconds: float
    checkpoint_mb: float
    description: str


def modelled_job(
    cnn: str = "Res32",
    gpu: str = "K80",
    steps: int = 64000,
    checkpoint_every: int = 4000,
) -> Modelled:
    """One worker training ``cnn`` on ``gpu``: step time from the published SVR speed model,
    checkpoint stall from the published SVR checkpoint model (size = meta + weight files).
    The models are fitted on every row of the shipped tables."""
    if gpu not in ("K80", "P100"):
        raise ParameterError("gpu", gpu, "K80, P100")
    table = data.speed_table(gpu)
    rows = table[table["cnn"] == cnn]
    if rows.empty:
        raise ParameterError("cnn", cnn, ", ".join(sorted(table["cnn"].unique())))
    by = {m.setting: m for m in speed.PUBLISHED_MODELS}
    step_model = fit(by[f"{gpu} SVR"].spec, table)
    step = float(step_model.predict(rows.iloc[:1])[0])
    size = float(rows["Meta File Size"].iloc[0] + rows["Weight File Size"].iloc[0])
    ckpt_spec = by["checkpoint SVR"].spec
    ckpt_model = fit(ckpt_spec, data.checkpoint_table())
    import pandas as pd

    ckpt = float(ckpt_model.predict(pd.DataFrame({ckpt_spec.features[0]: [size]}))[0])
    job = Job(steps, 1.0 / step, 1, checkpoint_every, max(ckpt, 0.0))
    text = (
        f"{cnn} on one {gpu}, {steps} steps at {1 / step:.2f} steps/s (SVR speed model), "
        f"checkpoint every {checkpoint_every} steps, {ckpt:.1f} s each ({size:.1f} MB, SVR)"
    )
    return Modelled(job, step, size, text)


def restart_times(gpu: str = "K80") -> Sampler:
    """Replacement start-up: the artifact's preemptible VM provisioning + staging + booting
    seconds for ``gpu`` (both regions), drawn with replacement."""
    t = data.startup_times()
    rows = t[(t["kind"] == "preemptible") & (t["gpu"] == gpu)]
    if rows.empty:
        raise ParameterError("gpu", gpu, ", ".join(sorted(t["gpu"].unique())))
    return empirical_seconds(rows["total"].tolist())


def what_if_figure(runs: Any, title: str = "", caption: str = "") -> Any:
    """Hours and cost of every Monte Carlo run on transient servers, the on-demand run, and
    the transient runs' mean with its 5-95% range.

    Args:
        title: the headline; one longer than fits the image's width moves into the
            footnote, under a short headline.
        caption: the job and the lifetimes drawn from (the footnote).
    """
    import plotly.graph_objects as go

    from lab.metrics.figures import style

    if runs is None or runs.empty or not (runs["option"] == "transient").any():
        raise NothingMeasured("no what-if run to draw")
    tr = runs[runs["option"] == "transient"]
    od = runs[runs["option"] == "on-demand"]
    s = summarize(runs).set_index("option")
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=tr["hours"],
            y=tr["cost"],
            mode="markers",
            name="transient (one Monte Carlo run)",
            marker={"size": 5, "opacity": 0.35},
            text=tr["revocations"],
            hovertemplate="%{x:.2f} h, %{y:.2f}, %{text} revocations",
        )
    )
    t = s.loc["transient"]
    fig.add_trace(
        go.Scatter(
            x=[t["hours"]],
            y=[t["cost"]],
            mode="markers",
            name="transient mean (5-95%)",
            marker={"size": 13, "symbol": "diamond"},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [t["hours_p95"] - t["hours"]],
                "arrayminus": [t["hours"] - t["hours_p5"]],
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [t["cost_p95"] - t["cost"]],
                "arrayminus": [t["cost"] - t["cost_p5"]],
            },
        )
    )
    fig.add_trace(
        go.Scatter(
            x=od["hours"],
            y=od["cost"],
            mode="markers",
            name="on-demand",
            marker={"size": 13, "symbol": "square"},
        )
    )
    fig.update_layout(
        xaxis_title="job wall time (hours)",
        yaxis_title="cost (price units)",
        template="plotly_white",
    )
    short = "Expected time and cost: transient vs on-demand (lab what-if)"
    fits = bool(title) and len(title) <= TITLE_CHARS
    notes = [caption, "" if fits else title]
    text = ". ".join(n.rstrip(".") for n in notes if n)
    return style(fig, caption=text + "." if text else None, title=title if fits else short)


def what_if_verdict(runs: Any, description: str = "") -> Verdict:
    """Transient servers cut the job's cost when even their 95th-percentile cost is below
    the on-demand cost; the time they add is reported beside it."""
    if runs is None or runs.empty or not (runs["option"] == "transient").any():
        raise NothingMeasured("the what-if produced no run")
    s = summarize(runs).set_index("option")
    t, o = s.loc["transient"], s.loc["on-demand"]
    saving = 1.0 - t["cost"] / o["cost"]
    slower = t["hours"] / o["hours"] - 1.0
    return Verdict(
        paper=PAPER,
        figure="what-if: transient vs on-demand",
        claim="transient servers cut the job's cost (beyond the paper)",
        status=Status.REPRODUCED if t["cost_p95"] < o["cost"] else Status.NOT_REPRODUCED,
        lab_value=float(saving),
        unit="cost saved (fraction, mean)",
        scale="model",
        hardware="lab models fitted on the artifact's data",
        why=(
            f"{description + '. ' if description else ''}Transient: {t['hours']:.2f} h "
            f"(5-95% {t['hours_p5']:.2f}-{t['hours_p95']:.2f}), {t['revocations']:.2f} "
            f"revocations on average, cost {t['cost']:.2f} (95th pct {t['cost_p95']:.2f}); "
            f"on-demand {o['hours']:.2f} h, cost {o['cost']:.2f}; {slower:+.1%} time."
        ),
        runs=data.sources(
            data.LIFETIME_FILE, *data.SPEED_FILES.values(), data.CHECKPOINT_FILE, data.STARTUP_DIR
        ),
    )


def run_what_if(
    lifetimes: Any,
    cnn: str = "Res32",
    gpu: str = "K80",
    steps: int = 64000,
    checkpoint_every: int = 4000,
    transient_price: float = 0.135,
    on_demand_price: float = 0.45,
    trials: int = 1000,
    seed: int = 0,
) -> tuple[Modelled, Any]:
    """The modelled job and its Monte Carlo runs (``transient.what_if``) under ``lifetimes``
    (a sampler, e.g. ``HourlyLifetimes.sample``). The default prices are examples per
    server-hour, not quotes."""
    from lab.experiments.cmdare.transient import what_if

    m = modelled_job(cnn, gpu, steps, checkpoint_every)
    runs = what_if(
        m.job, lifetimes, restart_times(gpu), transient_price, on_demand_price, trials, seed
    )
    return m, runs
