"""Figs 11–13 judged. Whether context switching is cheap against a step of the paper's
length (Fig 11), whether an EST saves against a DDP step (Fig 13) and whether D2 costs more
than D1 (Fig 12), with the intervals the judgements rest on. Apart from measuring and
drawing so that a verdict is a function of the tables alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lab.experiments.easyscale import published
from lab.experiments.verdicts import Status, Verdict, percent
from lab.metrics.stats import mean_ci, t_quantile

# Fig 11's target: switching takes at most this share of a step of paper-like length.
TARGET_SHARE = 0.01
# The length of the step behind the paper's 0.42%: an assumption, not a published number
# (the paper gives Fig 11 as shares, without step times): the order of one V100 training
# step of its ImageNet-scale workloads, e.g. ResNet50 at batch 32. It only has to tell a
# step of a few milliseconds (the smoke model's) from one of a tenth of a second.
PAPER_STEP_S = 0.1
# A step within this factor of PAPER_STEP_S, either way, counts as of comparable length.
COMPARABLE = 3.0

# Two smoke runs of one point here gave D1+D2 / D1 of 1.08 and 1.06, then 1.15 and 0.98
# (one run per level, CPU step times): differences smaller than this are not told apart.
LEVELS_MARGIN = 0.10


def _launch_spread(per_repeat: pd.DataFrame) -> tuple[float, int] | None:
    """``repeat_ratios``' pooled launch spread (log sd, degrees of freedom), if it has one."""
    if "launch_log_sd" not in per_repeat or int(per_repeat["launch_df"].iloc[0]) < 1:
        return None
    return float(per_repeat["launch_log_sd"].iloc[0]), int(per_repeat["launch_df"].iloc[0])


def _d2_intervals(per_repeat: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """Per device type: D1+D2 / D1 (geometric mean over the repeats) and its 95% interval,
    from ``repeat_ratios``' pooled launch spread where it has one, else the t interval
    over the repeats alone."""
    spread = _launch_spread(per_repeat)
    out = {}
    for d, v in per_repeat.groupby("device_type")["d2_over_d1"]:
        v = v.astype(float)
        if spread is None:
            e = mean_ci(v)
            out[d] = (e.mean, e.mean - e.ci, e.mean + e.ci)
            continue
        logs = [math.log(x) for x in v]
        mid = sum(logs) / len(logs)
        # a ratio of two launches' medians: each side's spread, over the repeats
        half = t_quantile(0.95, spread[1]) * spread[0] * math.sqrt(2 / len(logs))
        out[d] = (math.exp(mid), math.exp(mid - half), math.exp(mid + half))
    return out


@dataclass(frozen=True)
class StepCase:
    """One workload the switch was timed in: what it costs there, and how long a step is.

    Args:
        name: the workload in words, e.g. "smoke step (bn_cnn, 16 px, batch 16)".
        switch_us: one switch out and in, median (µs).
        share: the median share of a step spent switching.
        est_step_s: one EST's mini-batch with its switches: the length a comparison with
            the paper goes by.
        clock: what ``est_step_s`` was timed by: "CPU" (the process's CPU time, which a
            shared machine's load does not stretch) or "wall".
        share_runs: ``share`` of each run, the spread from run to run.
    """

    name: str
    switch_us: float
    share: float
    est_step_s: float
    clock: str = "wall"
    share_runs: tuple[float, ...] = ()


def step_case(name: str, numbers: dict[str, Any]) -> StepCase:
    """The case ``name`` from ``switch_numbers``' numbers: its EST mini-batch in CPU time
    where the runs recorded it (on a shared CPU the wall time grows with other jobs' load:
    the smoke step took 5 ms of CPU and 30-60 ms of wall time at a load of 25 on 2 cores),
    else in wall time."""
    cpu = numbers.get("est_step_cpu_s")
    return StepCase(
        name=name,
        switch_us=float(numbers["switch_us"]),
        share=float(numbers["switch_share"]),
        est_step_s=float(cpu if cpu is not None else numbers["est_step_s"]),
        clock="CPU" if cpu is not None else "wall",
        share_runs=tuple(float(v) for v in numbers.get("switch_share_runs", ())),
    )


def comparable_case(
    cases: Sequence[StepCase], reference_s: float = PAPER_STEP_S, factor: float = COMPARABLE
) -> StepCase | None:
    """The case whose EST mini-batch is closest to ``reference_s`` (by ratio) among those
    within ``factor`` of it either way; None where none is. A switch costs the same time
    whatever the step, so its share says as much about the step as about the switch: only a
    step of about the paper's length gives a share to set beside the paper's."""
    within = [c for c in cases if 1 / factor <= c.est_step_s / reference_s <= factor]
    return min(within, key=lambda c: abs(math.log(c.est_step_s / reference_s)), default=None)


def _length(case: StepCase) -> str:
    return f"{case.est_step_s * 1e3:.3g} ms of {case.clock} time an EST mini-batch"


def switching_verdict(
    cases: Sequence[StepCase],
    scale: str,
    hardware: str,
    tolerance: float = TARGET_SHARE,
    runs: Sequence[str | Path] = (),
    on_vs_off: float | None = None,
) -> Verdict:
    """Context switching is cheap, judged like with like: the share of a step spent
    switching (measured inside each step) in the case whose step is of about the paper's
    length (``comparable_case``): REPRODUCED within ``tolerance``, NOT_REPRODUCED beyond
    it; NOT_RESOLVED where no case is comparable. The sentence names the step it compares
    with and what the others would read. ``on_vs_off``: the step time with switching on
    against off in separate runs, if measured. ``runs``: the runs behind it."""
    ref = published.value("Fig 11", system="EasyScale")
    paper_step = f"the ~{PAPER_STEP_S * 1e3:.0f} ms V100 step behind the paper's {ref.value:.2%}"
    common = {
        "paper": published.EASYSCALE_SC23,
        "figure": "Fig 11",
        "claim": "context switching between ESTs costs little",
        "published_value": ref.value,
        "published_source": ref.source,
        "scale": scale,
        "hardware": hardware,
        "runs": tuple(str(r) for r in runs),
    }
    if not cases:
        return Verdict(status=Status.NOT_MEASURED, why="no switch was timed", **common)
    judged = comparable_case(cases)
    separate = "" if on_vs_off is None else f" On vs off in separate runs: {on_vs_off:+.1%}."
    if judged is None:
        closest = min(cases, key=lambda c: abs(math.log(c.est_step_s / PAPER_STEP_S)))
        return Verdict(
            status=Status.NOT_RESOLVED,
            lab_value=closest.share,
            unit="fraction of a step",
            why=f"No step of comparable length was timed: the {closest.name} takes "
            f"{_length(closest)}, {_times(closest.est_step_s)} {paper_step} (comparable: "
            f"within {COMPARABLE:g}x). {closest.switch_us:.0f} µs per switch (out and in) is "
            f"{closest.share:.2%} of that step, a share that says more about the step than "
            f"about the switch.{separate}",
            **common,
        )
    ok = judged.share <= tolerance
    others = [c for c in cases if c is not judged]
    aside = "".join(
        f" The {c.name} reads {c.share:.2%}, not the paper's comparison: {_length(c)}, "
        f"{_times(c.est_step_s)} the paper's step."
        for c in others
    )
    spread = f"one run of the {judged.name}: no spread from run to run"
    if len(judged.share_runs) >= 2:
        spread = (
            f"median over {len(judged.share_runs)} runs of the {judged.name}, each "
            f"{min(judged.share_runs):.2%} to {max(judged.share_runs):.2%}"
        )
    return Verdict(
        status=Status.REPRODUCED if ok else Status.NOT_REPRODUCED,
        lab_value=judged.share,
        unit="fraction of a step of paper-like length",
        why=f"Compared with the {judged.name}: {_length(judged)}, within {COMPARABLE:g}x of "
        f"{paper_step} (an assumed length: the paper states no step times). "
        f"{judged.switch_us:.0f} µs per switch (out and in) takes {judged.share:.2%} of "
        f"that step, {'within' if ok else 'more than'} the {tolerance:.0%} target."
        f"{aside}{separate}",
        precision=spread,
        **common,
    )


def _times(seconds: float) -> str:
    """How a step compares with the paper's, e.g. "20x shorter than"."""
    ratio = seconds / PAPER_STEP_S
    if ratio >= 1:
        return f"{ratio:.2g}x longer than" if ratio >= 1.05 else "about as long as"
    return f"{1 / ratio:.2g}x shorter than" if ratio <= 1 / 1.05 else "about as long as"


def est_time_verdict(
    numbers: dict[str, float],
    scale: str,
    hardware: str,
    runs: Sequence[str | Path] = (),
    repeats: pd.DataFrame | None = None,
) -> Verdict:
    """Fig 13, judged as a claim of Fig 11's notebook: an EST that does not sync takes less
    time than a DDP step, and the last EST, which syncs, more than the others. With
    ``repeats`` (fig13_repeats, two or more) both are judged by their 95% intervals over
    the repeats: the saving of ESTs 0..N-2, and the other ESTs' saving minus the last
    one's. Reproduced when both intervals lie above 0, not reproduced when either lies
    below it, not resolved otherwise. Judged by whether every repeat showed it, two
    repeats flipped the verdict between make runs (savings of -12% and 21% in one, 31%
    and 13% in another: reproduced, not reproduced and not resolved in four runs)."""
    claim = "Fig 13: ESTs that do not sync take less time than a DDP step, the syncing one more"
    ref = published.value("Fig 13", setting="ESTs 0-6")
    common = {
        "paper": published.EASYSCALE_SC23,
        "figure": "Fig 11",
        "claim": claim,
        "published_value": ref.value,
        "published_source": ref.source,
        "unit": "time saved against a DDP step (ESTs 0..N-2)",
        "scale": scale,
        "hardware": hardware,
        "runs": tuple(str(r) for r in runs),
    }
    if "saving_other_ests" not in numbers:
        return Verdict(status=Status.NOT_MEASURED, why="no DDP step was timed", **common)
    other, last = numbers["saving_other_ests"], numbers["saving_last_est"]
    ok = other > 0 and last < other
    status = Status.REPRODUCED if ok else Status.NOT_REPRODUCED
    precision = ""
    lab_ci = None
    if repeats is not None and len(repeats) >= 2:
        saving = mean_ci(repeats["saving_other_ests"])
        gap = mean_ci(repeats["saving_other_ests"] - repeats["saving_last_est"])
        status = (
            Status.REPRODUCED
            if saving.low > 0 and gap.low > 0
            else Status.NOT_REPRODUCED
            if saving.high < 0 or gap.high < 0
            else Status.NOT_RESOLVED
        )
        other, lab_ci = saving.mean, saving.ci
        precision = (
            f"{len(repeats)} interleaved repeats; ESTs 0..N-2 saved "
            f"{percent(saving.mean, saving.ci, 1)} ({repeats['saving_other_ests'].min():.1%} "
            f"to {repeats['saving_other_ests'].max():.1%}), {percent(gap.mean, gap.ci, 1)} more "
            "than the last EST, at 95% over the repeats"
        )
    last_ref = published.value("Fig 13", setting="last EST (syncs)").value
    return Verdict(
        status=status,
        precision=precision,
        lab_value=other,
        lab_ci=lab_ci,
        why=f"ESTs 0..N-2 take {other:.1%} less than a DDP step "
        f"({numbers['ddp_step_s'] * 1e3:.1f} ms), the last EST with its sync {last:.1%} less "
        f"(published: {ref.value:.1%} and {last_ref:.1%}). The DDP step is one rank's, timed "
        "in the same process: its all-reduce has no peer, so what an EST saves here is the "
        "update and DDP's gradient buckets, not the communication of the paper's 8-GPU DDP.",
        **common,
    )


def levels_verdict(
    table: pd.DataFrame,
    scale: str,
    hardware: str,
    runs: Sequence[str | Path] = (),
    per_repeat: pd.DataFrame | None = None,
) -> Verdict:
    """D1 costs less than D1+D2 on every device type, by more than ``LEVELS_MARGIN``
    (reproduced); D1+D2 cheaper by more than it somewhere (not reproduced); else not
    resolved. ``per_repeat`` (``repeat_ratios``): with two or more repeats, a device type
    counts only where the 95% interval of D1+D2 / D1 over the repeats (``_d2_intervals``:
    from the launch spread pooled over the run) is wholly beyond the margin on one side.
    Two smoke repeats of 8 ms steps spread 0.66–1.51; "every repeat on the same side" let
    two repeats at 0.66 and 0.76 (after 0.96–1.12 and 0.97–1.03 in the make runs before)
    say D2 makes the slow type faster. ``runs``: the run directories the table was read
    from."""
    t = table.pivot(index="device_type", columns="level", values="relative_time")
    if not {"D1", "D1+D2"} <= set(t.columns):
        return Verdict(
            paper=published.EASYSCALE_SC23,
            figure="Fig 12",
            claim="D2 costs more",
            status=Status.NOT_MEASURED,
            scale=scale,
            hardware=hardware,
            runs=tuple(str(r) for r in runs),
        )
    more = t["D1+D2"] / t["D1"]  # what D2 adds on top of D1, per device type
    status = _levels_status(more, more)
    spread, precision = "", "one launch per (device type, level): no spread to judge by"
    if per_repeat is not None and per_repeat["repeat"].nunique() >= 2:
        n = per_repeat["repeat"].nunique()
        by_type = per_repeat.groupby("device_type")["d2_over_d1"]
        est = _d2_intervals(per_repeat)
        low = pd.Series({d: e[1] for d, e in est.items()})
        high = pd.Series({d: e[2] for d, e in est.items()})
        status = _levels_status(low, high)
        pooled, launches = "", _launch_spread(per_repeat)
        if launches is not None:
            pooled = (
                f"; the interval from the launches' spread, pooled over every device type and"
                f" level: ± {launches[0]:.0%} a launch ({launches[1]} df)"
            )
        precision = (
            f"{n} interleaved repeats; D1+D2 / D1 over them at 95%: "
            + ", ".join(f"{d} {m:.2f} ({lo:.2f}–{hi:.2f})" for d, (m, lo, hi) in est.items())
            + " (repeats "
            + ", ".join(f"{d} {v.min():.2f}–{v.max():.2f}" for d, v in by_type)
            + ")"
            + pooled
        )
        spread = (
            " Judged on the interval over the repeats: a device type counts where it is"
            " wholly beyond the margin."
        )
    ref = published.value("Fig 12", system="EasyScale D1+D2", setting="max")
    return Verdict(
        paper=published.EASYSCALE_SC23,
        figure="Fig 12",
        claim="D1 costs little, D1+D2 costs more, on every device type",
        status=status,
        lab_value=float(t["D1+D2"].max()),
        published_value=ref.value,
        published_source=ref.source,
        unit="× D0 (worst device type)",
        scale=scale,
        hardware=hardware,
        why="D1 "
        + ", ".join(f"{d}: {v:.2f}×" for d, v in t["D1"].items())
        + "; D1+D2 "
        + ", ".join(f"{d}: {v:.2f}×" for d, v in t["D1+D2"].items())
        + f"; a difference counts beyond ±{LEVELS_MARGIN:.0%}."
        + spread,
        runs=tuple(str(r) for r in runs),
        precision=precision,
    )


def _levels_status(low: pd.Series, high: pd.Series) -> Status:
    """D2's cost (D1+D2 / D1 per device type; its lowest and highest value over the
    repeats) judged against ``LEVELS_MARGIN``: above it everywhere, or below it on some
    device type, in every repeat."""
    if (low > 1 + LEVELS_MARGIN).all():
        return Status.REPRODUCED
    if (high < 1 - LEVELS_MARGIN).any():
        return Status.NOT_REPRODUCED
    return Status.NOT_RESOLVED
