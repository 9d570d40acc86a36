"""What a revocation cost a run: its throughput timeline, the dip, the time to recover, the
steps lost, and (for a restart from a checkpoint) the time until the job is back where it was.

Inputs are plain tables: ``steps`` with one row per training step and its end time in epoch
seconds (``ended_at``; the ps workload's ``global_step`` when there is a restart), and the
revocation time from the run's ``events.jsonl`` (lab.cluster.faults).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lab.errors import NothingMeasured

if TYPE_CHECKING:
    from lab.metrics.stats import Estimate

WINDOW = 2.0  # seconds of steps each rate is counted over
RECOVERED = 0.95  # fraction of that rate
BIN = 0.5  # seconds: the disjoint bins whose step counts give a recovery's interval


def _in_window(times: Any, grid: Any, window: float) -> Any:
    """Steps (sorted end ``times``) ending in the ``window`` seconds up to each grid point."""
    import numpy as np

    return np.searchsorted(times, grid, side="right") - np.searchsorted(times, grid - window)


def timeline(steps: Any, start: float, window: float = WINDOW, dt: float = 0.25) -> Any:
    """Steps per second, counted over the last ``window`` seconds every ``dt`` seconds.

    Returns a DataFrame with ``t`` (seconds since ``start``) and ``rate``.
    """
    import numpy as np
    import pandas as pd

    ends = np.sort(steps["ended_at"].to_numpy(dtype=float)) - start
    if len(ends) == 0:
        raise NothingMeasured("no step with an end time")
    grid = np.arange(ends[0] + window, ends[-1] + dt, dt)
    return pd.DataFrame({"t": grid, "rate": _in_window(ends, grid, window) / window})


def share_timeline(
    steps: Any, start: float, ranks: Any, window: float = WINDOW, dt: float = 0.25
) -> Any:
    """The share of the steps that ``ranks`` made over the last ``window`` seconds, every
    ``dt`` seconds (on ``timeline``'s grid): what ``recovered_share`` compares before and
    after. NaN where no rank made a step.

    Returns a DataFrame with ``t`` (seconds since ``start``) and ``share``.
    """
    import numpy as np

    total = timeline(steps, start, window, dt)
    mine = np.sort(steps.loc[steps["rank"].isin(list(ranks)), "ended_at"].to_numpy(float))
    counts = _in_window(mine, total["t"].to_numpy() + start, window)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total["rate"] > 0, counts / window / total["rate"], np.nan)
    return total.assign(share=share).drop(columns="rate")


@dataclass(frozen=True)
class Effect:
    """A revocation's effect on throughput (all times in seconds from the revocation).

    Args:
        rate_before: steps/s over the steady seconds before it (``rate_before``).
        lowest: the lowest rate after it, before recovery.
        dip: 1 - lowest / rate_before.
        recovery: seconds until the rate is back to ``RECOVERED`` x rate_before (None: never).
        steps_lost: steps the run would have made at rate_before until then, minus those made.
    """

    rate_before: float
    lowest: float
    dip: float
    recovery: float | None
    steps_lost: float


def effect(steps: Any, revoked_at: float, window: float = WINDOW) -> Effect:
    """The dip, the time to recover to 95% of the rate before, and the steps lost."""
    import numpy as np

    line = timeline(steps, revoked_at, window)
    ends = steps["ended_at"].to_numpy(dtype=float) - revoked_at
    rate = rate_before(steps, revoked_at)
    if rate <= 0:
        raise NothingMeasured("no steps in the seconds before the revocation")
    after = line[line["t"] > window / 2]
    back = after[after["rate"] >= RECOVERED * rate]
    recovery = float(back["t"].iloc[0]) if not back.empty else None
    until = recovery if recovery is not None else float(line["t"].iloc[-1])
    during = line[(line["t"] > 0) & (line["t"] <= until)]["rate"]
    lowest = float(during.min()) if not during.empty else rate
    made = int(np.count_nonzero((ends > 0) & (ends <= until)))
    return Effect(rate, lowest, 1.0 - lowest / rate, recovery, rate * until - made)


def _bin_counts(times: Any, start: float, end: float, bin_s: float) -> Any:
    """Steps ending in each whole ``bin_s``-second bin from ``start`` to ``end`` (sorted
    ``times``)."""
    import numpy as np

    edges = start + bin_s * np.arange(max(int((end - start) // bin_s), 0) + 1)
    return np.diff(np.searchsorted(times, edges, side="right"))


def _steady_start(ends: Any, bin_s: float) -> float:
    """Where the steady bins before the revocation (at 0) begin: the first whole bin after
    the run's first step (``ends``: sorted, seconds from the revocation), less the ramp
    that MSER cuts (lab.metrics.protocol.steady_state_start)."""
    from lab.metrics.protocol import steady_state_start

    first = -bin_s * ((0.0 - float(ends[0])) // bin_s)
    return first + bin_s * steady_state_start(list(_bin_counts(ends, first, 0.0, bin_s) / bin_s))


def rate_before(steps: Any, revoked_at: float, bin_s: float = BIN) -> float:
    """Steps/s before the revocation, over its steady bins (``_steady_start``). A fixed
    5 s before it missed the ramp at smoke scale only when the revocation came late (3 s
    before global step 300 read 42 steps/s against 50 later), and on a fast hour a chief
    revoked at global step 325 had fewer than 5 s of steps before it (make run #30).

    Raises:
        NothingMeasured: fewer than two steady bins before the revocation.
    """
    import numpy as np

    ends = np.sort(steps["ended_at"].to_numpy(dtype=float) - revoked_at)
    counts = _bin_counts(ends, _steady_start(ends, bin_s), 0.0, bin_s) if ends[0] < 0 else []
    if len(counts) < 2:
        raise NothingMeasured(f"fewer than two {bin_s:g}-s bins of steps before the revocation")
    return float(np.mean(counts)) / bin_s


def _phases(
    steps: Any, revoked_at: float, rejoined_at: float, before: float | None, settle: float,
    bin_s: float,
) -> tuple[tuple[float, float], tuple[float, float]]:  # fmt: skip
    """The (start, end) of "before" and "after", in seconds from the revocation, as
    ``recovered_fraction`` says; raises NothingMeasured when either holds under two bins."""
    import numpy as np

    ends = np.sort(steps["ended_at"].to_numpy(dtype=float) - revoked_at)
    stop = float(ends[-1])
    if "rank" in steps:
        stop = float(steps.groupby("rank")["ended_at"].max().min()) - revoked_at
    first = _steady_start(ends, bin_s) if before is None else -before
    phases = ((first, 0.0), (rejoined_at - revoked_at + settle, stop))
    sizes = [int((b - a) // bin_s) if b > a else 0 for a, b in phases]
    if min(sizes) < 2:
        raise NothingMeasured(
            f"a recovery needs two {bin_s:g}-s bins before the revocation and after the "
            f"replacement settled; the run gave {sizes[0]} and {sizes[1]}"
        )
    return phases


def recovered_fraction(
    steps: Any,
    revoked_at: float,
    rejoined_at: float,
    before: float | None = None,
    settle: float = WINDOW,
    bin_s: float = BIN,
) -> Estimate:
    """The rate once the replacement takes part, as a fraction of the rate before, with
    its 95% interval.

    Rates are step counts in disjoint bins of ``bin_s`` seconds: before the revocation,
    and from ``settle`` seconds after the replacement's first step (``rejoined_at``) until
    the first rank's last step (after it fewer workers remain). A single 2-s window
    crossing 95% cannot tell a run at 92% from one at 97%: the windows of a steady run here
    spread by about ±5%. "Before" is the ``before`` seconds before the revocation, or, by
    default, every bin from the run's first step on less the ramp that MSER cuts
    (lab.metrics.protocol.steady_state_start): a fixed 5 s gave 10 bins, whose spread
    alone made the interval ±7% and the verdict flip between runs at ~102%.

    Raises:
        NothingMeasured: fewer than two bins on either side.
    """
    import numpy as np

    from lab.metrics.stats import mean_ci, ratio

    ends = np.sort(steps["ended_at"].to_numpy(dtype=float) - revoked_at)
    earlier, later = (
        mean_ci(_bin_counts(ends, a, b, bin_s) / bin_s)
        for a, b in _phases(steps, revoked_at, rejoined_at, before, settle, bin_s)
    )
    return ratio(later, earlier)


def _share(replaced: Any, total: Any, confidence: float) -> Estimate:
    """The replaced rank's share of the steps over a phase's bins (a ratio estimator: the
    interval from the bins' residuals ``replaced - share x total``, which stay small when
    both counts move together with the machine)."""
    import numpy as np

    from lab.metrics.stats import Estimate, t_quantile

    replaced, total = np.asarray(replaced, dtype=float), np.asarray(total, dtype=float)
    n = len(total)
    share = float(replaced.sum() / total.sum()) if total.sum() > 0 else math.nan
    if n < 2 or share != share:
        return Estimate(share)
    resid = replaced - share * total
    se = math.sqrt(float((resid**2).sum()) / (n - 1) / n) / float(total.mean())
    return Estimate(share, t_quantile(confidence, n - 1) * se)


def recovered_share(
    steps: Any,
    revoked_at: float,
    rejoined_at: float,
    replaced_ranks: Any,
    before: float | None = None,
    settle: float = WINDOW,
    bin_s: float = BIN,
    confidence: float = 0.95,
) -> Estimate:
    """The rate once the replacement takes part, as a fraction of the rate before, both
    counted against the surviving ranks' pace in the same seconds: ``(1 - f_before) /
    (1 - f_after)``, where ``f`` is the replaced ranks' share of the steps (before: the
    revoked worker's; after: its replacement's). Equal shares give 1.0 whatever the
    machine did between the two phases.

    Why not the rates themselves (``recovered_fraction``): on this shared machine a core's
    speed moves by tens of percent within minutes, and every host with it. In make run #27
    the warm run's hosts used the same CPU before and after (survivor 0.29 -> 0.28 cores,
    chief 0.36 -> 0.36) while every host spent 26-31% more of it per step after: its rate
    read 76% of the rate before, and the survivor alone 76% of its own. Its replacement's
    share came back to what the revoked worker's had been. The surviving workers are the
    run's control, measured in the same seconds.

    Phases are the bins of ``recovered_fraction``.

    Raises:
        NothingMeasured: fewer than two bins on either side, or no survivor.
    """
    import numpy as np

    from lab.metrics.stats import Estimate, ratio

    replaced_mask = steps["rank"].isin(list(replaced_ranks)).to_numpy()
    if replaced_mask.all() or not replaced_mask.any():
        raise NothingMeasured("a share needs steps of the replaced ranks and of a survivor")
    ends = np.sort(steps["ended_at"].to_numpy(dtype=float) - revoked_at)
    mine = np.sort(steps["ended_at"].to_numpy(dtype=float)[replaced_mask] - revoked_at)
    f_before, f_after = (
        _share(_bin_counts(mine, a, b, bin_s), _bin_counts(ends, a, b, bin_s), confidence)
        for a, b in _phases(steps, revoked_at, rejoined_at, before, settle, bin_s)
    )
    survivors = [Estimate(1.0 - f.mean, f.ci) for f in (f_before, f_after)]
    return ratio(survivors[0], survivors[1], confidence)


def restart_overhead(steps: Any, revoked_at: float) -> tuple[float, int]:
    """(seconds, global step) for a run restarted from a checkpoint: from the revocation
    until a step at or beyond the global step reached before it ends again.

    The step reached is the highest that ended before the job rolled back (its first step
    below one already ended), not before the revocation's timestamp: a step in flight at
    the revocation can end just after it, and it then read as the job being back. In one
    make run step 458 ended 2.7 ms after the revocation at 457, and that run's overhead
    read 0.0 s (restart 4.2 s)."""
    import numpy as np

    ended = steps["ended_at"].to_numpy(dtype=float)
    order = np.argsort(ended, kind="stable")
    ended, gs = ended[order], steps["global_step"].to_numpy()[order]
    if not (ended <= revoked_at).any():
        raise NothingMeasured("no step ended before the revocation")
    highest_so_far = np.maximum.accumulate(gs)
    rolled = np.flatnonzero((ended > revoked_at)[1:] & (gs[1:] < highest_so_far[:-1])) + 1
    first = int(rolled[0]) if len(rolled) else int(np.searchsorted(ended, revoked_at, "right"))
    reached = int(highest_so_far[first - 1])
    later = ended[first:][gs[first:] >= reached]
    if len(later) == 0:
        raise NothingMeasured(f"the run never got back to step {reached}")
    return float(later.min() - revoked_at), reached


def restart_parts(steps: Any, revoked_at: float) -> tuple[float, float, int]:
    """(restart s, redo s, global step reached) of a run restarted from a checkpoint: the
    restart ends at the first step redone (a global step below the one reached), the redo
    when the step reached ends again. Only the redo depends on the steps since the
    checkpoint; the restart (a process's start) is the same for every such point, and its
    run-to-run spread would otherwise hide the line."""
    import numpy as np

    seconds, reached = restart_overhead(steps, revoked_at)
    ended = steps["ended_at"].to_numpy(dtype=float)
    gs = steps["global_step"].to_numpy()
    redone = ended[(ended > revoked_at) & (gs < reached)]
    restart = float(np.min(redone) - revoked_at) if len(redone) else seconds
    return restart, seconds - restart, reached


def linear_fit(x: Any, y: Any) -> tuple[float, float, float]:
    """(intercept, slope, R^2) of a least-squares line."""
    import numpy as np

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        raise NothingMeasured("a line needs two or more distinct x values")
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else 1.0
    return float(intercept), float(slope), r2
