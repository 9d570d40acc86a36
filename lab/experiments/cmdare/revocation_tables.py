"""The revocation notebook's tables, read from its runs and the artifact's data. A revoked
worker's effect on the rate, each chief revocation's overhead in parts, every checkpoint's size
and duration with a line fitted to them. The figures and verdicts are built from these alone.
"""

from __future__ import annotations

import math
from typing import Any

from lab.errors import NothingMeasured
from lab.experiments.cmdare import data
from lab.experiments.cmdare import revocation_cost as rev
from lab.experiments.cmdare.published import PUBLISHED
from lab.experiments.cmdare.revocation import records, revoked_at, settings, sinces, steps_of
from lab.experiments.cmdare.speed_model import ModelSpec, fit
from lab.metrics import hostload

HARDWARE = "emulated hosts on this machine's CPU (TF parameter servers)"
OUTSIDE_BEFORE_S = 8.0  # seconds before the revocation its outside load is taken over


def _kind(summary: Any, kind: str) -> Any:
    rows = summary[summary["kind"] == kind]
    if rows.empty:
        raise NothingMeasured(f"no {kind} revocation run succeeded")
    return rows


def revoked_ranks(run_dir: str) -> list[int]:
    """The ranks of the run's revoked worker (its replacement takes them over)."""
    from lab.cluster.faults import read_events

    return next(x["ranks"] for x in read_events(run_dir) if x["event"] == "revoked")


def worker_effects(summary: Any) -> Any:
    """Per worker-revocation run: the rate before, the dip, the time to recover to 95% of
    that rate, the steps lost, when the replacement was up and when its first step ended
    (from the steps' end times: the chief reports steps in schedule order, later), the rate
    with the replacement as a fraction of the rate before, at the survivor's pace
    (``recovered``: rev.recovered_share) and as it came (``rates``: rev.recovered_fraction),
    and the machine's outside load (cores) before the revocation and once the replacement
    took part."""
    import pandas as pd

    rows = []
    for _, r in _kind(summary, "worker").iterrows():
        ev = revoked_at(r["run_dir"])
        steps = steps_of(r["run_dir"])
        e = rev.effect(steps, ev["revoked"])
        ranks = revoked_ranks(r["run_dir"])
        back = steps[steps["rank"].isin(ranks) & (steps["ended_at"] > ev.get("replaced", 0))]
        rejoined = float(back["ended_at"].min()) if not back.empty else float("nan")
        fraction = _recovered(rev.recovered_share, steps, ev["revoked"], rejoined, ranks)
        rates = _recovered(rev.recovered_fraction, steps, ev["revoked"], rejoined)
        after = (rejoined + rev.WINDOW, float(steps["ended_at"].max()))
        outside_after = (
            hostload.outside_load(r["run_dir"], *after) if rejoined == rejoined else math.nan
        )
        rows.append(
            {
                "mode": r["mode"],
                "rate_before": e.rate_before,
                "lowest": e.lowest,
                "dip": e.dip,
                "recovery_s": e.recovery,
                "steps_lost": e.steps_lost,
                "recovered": fraction.mean,
                "recovered_ci": fraction.ci,
                "rates": rates.mean,
                "rates_ci": rates.ci,
                "replaced_s": ev.get("replaced", float("nan")) - ev["revoked"],
                "rejoined_s": rejoined - ev["revoked"],
                "outside_before": hostload.outside_load(
                    r["run_dir"], ev["revoked"] - OUTSIDE_BEFORE_S, ev["revoked"]
                ),
                "outside_after": outside_after,
                "run_dir": r["run_dir"],
            }
        )
    return pd.DataFrame(rows)


def _recovered(measure: Any, steps: Any, revoked: float, rejoined: float, *args: Any) -> Any:
    """``measure`` (rev.recovered_share or rev.recovered_fraction) once the replacement
    took part (its first step ended at ``rejoined``); NaN when it never did, or the run left
    too little time after it."""
    from lab.metrics.stats import Estimate

    if rejoined != rejoined:
        return Estimate(float("nan"))
    try:
        return measure(steps, revoked, rejoined, *args)
    except NothingMeasured:
        return Estimate(float("nan"))


def chief_restarts(run_dir: str) -> list[tuple[float, Any]]:
    """(epoch revoked, its steps) per chief revocation of a run, in time order. A run
    revokes its chief after successive checkpoints; a revocation's steps run from the
    moment the job was back at the step the previous one had reached (rev.restart_overhead)
    up to the next revocation, so each rollback is read on its own."""
    from lab.cluster.faults import read_events

    times = sorted(float(e["time"]) for e in read_events(run_dir) if e["event"] == "revoked")
    if not times:
        raise NothingMeasured(f"{run_dir}: no revocation happened")
    steps = steps_of(run_dir)
    out, start = [], -math.inf
    for i, at in enumerate(times):
        end = times[i + 1] if i + 1 < len(times) else math.inf
        own = steps[(steps["ended_at"] > start) & (steps["ended_at"] <= end)]
        out.append((at, own.reset_index(drop=True)))
        try:
            start = at + rev.restart_overhead(own, at)[0]
        except NothingMeasured:
            start = end  # never back before the next revocation: nothing of it is clean
    return out


def chief_overheads(summary: Any) -> Any:
    """Per chief revocation: steps since the checkpoint, the time until the job is back at
    the step it had reached (``overhead_s``), its two parts (``restart_s`` until the first
    redone step, ``redo_s`` the redone steps), and the overhead in steps."""
    import pandas as pd

    rows = []
    for _, r in _kind(summary, "chief").iterrows():
        planned, every = sinces(r), settings(r["scale"])["checkpoint_every"]
        for i, (at, steps) in enumerate(chief_restarts(r["run_dir"])):
            restart, redo, reached = rev.restart_parts(steps, at)
            seconds = restart + redo
            rate = rev.effect(steps, at).rate_before
            rows.append(
                {
                    "since": reached % every,  # measured: the revocation lands a few steps late
                    "planned_since": planned[i] if i < len(planned) else math.nan,
                    "overhead_s": seconds,
                    "restart_s": restart,
                    "redo_s": redo,
                    "reached_step": reached,
                    "rate_before": rate,
                    "overhead_steps": seconds * rate,
                    "run_dir": r["run_dir"],
                }
            )
    return pd.DataFrame(rows).sort_values("since").reset_index(drop=True)


def published_chief() -> tuple[Any, Any]:
    """(published line, artifact runs): overhead in s vs steps since the checkpoint; the
    runs' overhead is their time minus the mean of the two runs without revocation."""
    import pandas as pd

    line = pd.DataFrame(
        [
            {"since": int(p.setting.split()[0]), "overhead_s": p.value}
            for p in PUBLISHED
            if p.figure == "chief revocation"
        ]
    )
    runs = data.chief_rejoining()
    base = runs[runs["rejoin"].isna()]["seconds"].mean()
    exp = runs[runs["rejoin"].notna()].copy()
    exp["overhead_s"] = exp["seconds"] - base
    return line, exp


def chief_source() -> str:
    return next(p.source for p in PUBLISHED if p.figure == "chief revocation")


def lab_checkpoints(summary: Any) -> Any:
    """Every checkpoint the lab's runs wrote: model, MB, seconds (the first of each run is
    left out: it includes TF's one-off setup of the save function)."""
    import pandas as pd

    frames = []
    for _, r in _kind(summary, "checkpoint").iterrows():
        df = records(r["run_dir"])
        ck = df[(df["kind"] == "event") & (df.get("event") == "checkpoint")]
        ck = ck.sort_values("step").iloc[1:]
        frames.append(
            pd.DataFrame({"model": r["model"],
                          "size_mb": ck["bytes"].astype(float) / 1e6,
                          "seconds": ck["seconds"].astype(float), "run_dir": r["run_dir"]})
        )  # fmt: skip
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if out.empty:
        raise NothingMeasured("no checkpoint was written")
    return out


CKPT_LR = ModelSpec("lr", ("size_mb",), "seconds")


def checkpoint_fits(lab: Any) -> Any:
    """LinearRegression of checkpoint duration on size, for the lab's checkpoints and for
    CM-DARE's (checkpoint/whole_data.csv): intercept, slope and in-sample MAPE of each."""
    import pandas as pd

    theirs = data.checkpoint_table().rename(
        columns={"Checkpoint Size (MB)": "size_mb", "Duration": "seconds"}
    )
    rows = []
    for who, table in (("lab", lab), ("CM-DARE", theirs)):
        f = fit(CKPT_LR, table)
        rows.append(
            {
                "data": who,
                "checkpoints": len(table),
                "size_mb_min": float(table["size_mb"].min()),
                "size_mb_max": float(table["size_mb"].max()),
                "intercept_s": float(f.estimator.intercept_),
                "s_per_mb": float(f.estimator.coef_[0]),
                "r2": float(f.estimator.score(table[["size_mb"]], table["seconds"])),
                "mape": f.score(table),
            }
        )
    return pd.DataFrame(rows)
