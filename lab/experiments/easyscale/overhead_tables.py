"""Figs 11–13's numbers, read from the runs that ``overhead`` launches. The per-step
timings and EST events of ``overhead.run_switching`` and ``overhead.run_levels`` become the
switching micro-benchmark, Fig 13's savings and Fig 12's relative step times. Apart from the
launches so that the tables can be rebuilt (and tested) from run directories alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured

DDP_BESIDE = "ESTs beside DDP"  # the variant Fig 13 is read from (Config.ddp_beside)


def fig13_repeats(runs: pd.DataFrame, warmup: int = 1) -> pd.DataFrame:
    """Fig 13's two savings against a DDP step, per repeat of ``run_switching`` (columns
    repeat, saving_other_ests, saving_last_est): what est_time_verdict judges."""
    rows = []
    for r, g in runs.groupby("repeat"):
        n = switching_table(g, warmup)
        if "saving_other_ests" in n:
            rows.append({"repeat": r, "saving_other_ests": n["saving_other_ests"],
                         "saving_last_est": n["saving_last_est"]})  # fmt: skip
    return pd.DataFrame(rows, columns=["repeat", "saving_other_ests", "saving_last_est"])


def _records(run: Path) -> pd.DataFrame:
    from lab.metrics.store import load_run

    return load_run(run)


def _est_events(df: pd.DataFrame, warmup: int) -> pd.DataFrame:
    """One run's EST events past ``warmup`` steps, each with its step's sync time."""
    st = df[df["kind"] == "step"]
    ev = df[(df["kind"] == "event") & (df["name"] == "est")]
    ev = ev[ev["step"] >= ev["step"].min() + warmup]
    sync = st.set_index("step")["sync_seconds"].astype(float)
    return ev.assign(sync=ev["step"].map(sync))


def fig13_savings(run: Path, warmup: int = 1) -> dict[str, float]:
    """Fig 13 from one ``ddp_beside`` run: the median DDP step, and what ESTs 0..N-2
    (without sync) and the last EST with its sync save against it, in the same process."""
    df = _records(run)
    ev = _est_events(df, warmup)
    ddp = df[(df["kind"] == "event") & (df["name"] == "ddp_step")]
    ddp = ddp[ddp["step"] >= ddp["step"].min() + warmup]["seconds"].astype(float)
    if ev.empty or ddp.empty:
        raise NothingMeasured(f"{run}: no EST or DDP step timed beside each other")
    step = float(ddp.median())
    last = ev["est"] == ev["est"].max()
    last_time = (ev.loc[last, "seconds"] + ev.loc[last, "sync"]).astype(float).median()
    return {
        "ddp_step_s": step,
        "saving_other_ests": 1 - float(ev.loc[~last, "seconds"].astype(float).median()) / step,
        "saving_last_est": 1 - float(last_time) / step,
    }


def switch_numbers(runs: list[Path], warmup: int = 1) -> dict[str, Any]:
    """What switching cost in runs with switching on, from each EST's own timings.

    ``switch_share`` is the median over steps of the share of each step spent switching,
    from the same step's own timings: robust where the on/off comparison of separate runs
    drowns in a busy host's noise; ``switch_share_runs`` the median of each run, the
    spread from run to run. ``switch_us`` is one switch out and in, ``est_step_s`` one
    EST's mini-batch with its switches (wall time) and ``est_step_cpu_s`` the same in the
    process's CPU time, where the runs recorded it: the length of the work, which the load
    of other jobs does not stretch."""
    est_rows, step_rows = [], []
    for run in runs:
        df = _records(run)
        est_rows.append(_est_events(df, warmup))
        step_rows.append(df.query("kind == 'step'").set_index(["run_id", "step"])["seconds"])
    ev = pd.concat(est_rows) if est_rows else pd.DataFrame()
    if ev.empty:
        raise NothingMeasured("no EST mini-batch was timed with switching on")
    switch = (ev["switch_in"] + ev["switch_out"]).astype(float)
    per_step = ev.assign(sw=switch).groupby(["run_id", "step"], sort=False)["sw"].sum()
    steps = pd.concat(step_rows).astype(float)
    share = per_step / steps.reindex(per_step.index)
    out: dict[str, Any] = {
        "switch_share": float(share.median()),
        "switch_share_runs": [float(v) for v in share.groupby(level="run_id", sort=False).median()],
        "switch_us": float(switch.median() * 1e6),
        "grad_copy_us": float(ev["grad_copy"].astype(float).median() * 1e6),
        "est_step_s": float(ev["seconds"].astype(float).median()),
    }
    if "cpu_seconds" in ev and ev["cpu_seconds"].notna().all():
        out["est_step_cpu_s"] = float(ev["cpu_seconds"].astype(float).median())
    return out


def switching_table(runs: pd.DataFrame, warmup: int = 1) -> dict[str, Any]:
    """The numbers of Figs 11 and 13 and the micro-benchmark, from ``run_switching``: those
    of ``switch_numbers`` over the runs with switching on, the median step time of each
    variant and their ratios, and Fig 13's, the medians of its per-run savings
    (``fig13_savings``)."""
    steps: dict[str, list[float]] = {}
    fig13 = []
    for _, row in runs.iterrows():
        if row["variant"] == DDP_BESIDE:
            fig13.append(fig13_savings(row["run"], warmup))
            continue
        df = _records(row["run"])
        st = df[df["kind"] == "step"].sort_values("step")
        steps.setdefault(row["variant"], []).extend(st["seconds"].iloc[warmup:].astype(float))
    if any(v not in steps for v in ("switch on", "switch off", "plain")):
        raise NothingMeasured("a variant of the switching runs measured nothing")
    mean = {k: float(pd.Series(v).median()) for k, v in steps.items()}  # robust to a busy host
    out = switch_numbers(list(runs.loc[runs["variant"] == "switch on", "run"]), warmup)
    out |= {
        "step_s_switch_on": mean["switch on"],
        "step_s_switch_off": mean["switch off"],
        "step_s_plain": mean["plain"],
        "switch_overhead": mean["switch on"] / mean["switch off"] - 1,
        "overhead_vs_plain": mean["switch on"] / mean["plain"] - 1,
    }
    if fig13:
        out |= {k: float(pd.Series([f[k] for f in fig13]).median()) for k in fig13[0]}
    return out


def long_step_table(runs: pd.DataFrame, warmup: int = 1) -> dict[str, Any]:
    """``switch_numbers`` of ``overhead.run_long_step``'s runs, and their median step."""
    out = switch_numbers(list(runs["run"]), warmup)
    seconds = [
        s
        for run in runs["run"]
        for s in _records(run).query("kind == 'step'").sort_values("step")["seconds"].iloc[warmup:]
    ]
    return out | {"step_s": float(pd.Series(seconds, dtype=float).median())}


def _level_steps(runs: pd.DataFrame, warmup: int) -> pd.DataFrame:
    """Every timed step of the level runs: repeat, device type, level, seconds."""
    rows = []
    for _, row in runs.iterrows():
        st = _records(row["run"])
        st = st[st["kind"] == "step"].sort_values("step")["seconds"].iloc[warmup:]
        key = {"repeat": row.get("repeat", 0), "device_type": row["device_type"]}
        rows += [{**key, "level": row["level"], "s": float(s)} for s in st]
    if not rows:
        raise NothingMeasured("no timed step in the level runs")
    return pd.DataFrame(rows)


def _relative(steps: pd.DataFrame, by: list[str], baseline: str) -> pd.DataFrame:
    t = steps.groupby([*by, "level"])["s"].median().rename("step_seconds").reset_index()
    base = t.loc[t["level"] == baseline, [*by, "step_seconds"]]
    t = t.merge(base.rename(columns={"step_seconds": "base"}), on=by, how="left")
    t["relative_time"] = t["step_seconds"] / t.pop("base")
    return t


def levels_table(runs: pd.DataFrame, baseline: str = "D0", warmup: int = 1) -> pd.DataFrame:
    """Median step time per device type and level over every repeat, and its ratio to
    ``baseline``."""
    return _relative(_level_steps(runs, warmup), ["device_type"], baseline)


def repeat_ratios(runs: pd.DataFrame, warmup: int = 1) -> pd.DataFrame:
    """What D2 adds on top of D1 (D1+D2 / D1 median step time) per repeat and device type:
    the spread the verdict is judged against (one smoke run per point flipped it). Also
    ``launch_log_sd`` and ``launch_df``: the launch-to-launch spread of the log median step
    time, pooled over every (device type, level) and the same on each row, which
    ``levels_verdict`` judges by. One cell's two launches give a spread of one degree of
    freedom: on the slow type two launches each read 0.68 and 0.70 (make run #25) and made
    an interval of ± 0.16, where that run's launches of one cell spread ±16%."""
    import numpy as np

    steps = _level_steps(runs, warmup)
    t = _relative(steps, ["repeat", "device_type"], "D1")
    t = t[t["level"] == "D1+D2"]
    logs = np.log(steps.groupby(["repeat", "device_type", "level"])["s"].median())
    cell = logs.groupby(level=["device_type", "level"])
    dof = int((cell.count() - 1).sum())
    squares = float(((logs - cell.transform("mean")) ** 2).sum())
    sd = (squares / dof) ** 0.5 if dof else float("nan")
    return (
        t[["repeat", "device_type", "relative_time"]]
        .rename(columns={"relative_time": "d2_over_d1"})
        .assign(launch_log_sd=sd, launch_df=dof)
        .reset_index(drop=True)
    )


def run_dirs(runs: pd.DataFrame) -> list[str]:
    """The run directories of ``run_switching`` or ``run_levels`` (for verdicts, captions)."""
    return [str(r) for r in runs["run"]]
