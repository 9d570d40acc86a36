"""Verdicts of the trace experiment, computed from a simulation summary.

Fig 14 claims EasyScale-heter cuts average JCT and makespan against YARN-CS and against
EasyScale-homo; the lab compares its ratios with the published ones (derived from the
published rows). The lab's trace is generated and its step times are its own, so the
direction of each ratio is what is judged; the size is reported beside the paper's.
Fig 15 claims EasyScale-heter keeps more devices busy than EasyScale-homo.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from lab.errors import NothingMeasured
from lab.experiments.easyscale.published_trace import EASYSCALE_SC23, published_ratios
from lab.experiments.verdicts import Status, Verdict

# Ratios within this band of 1 are too close to call.
TIE_BAND = 0.05
_NAMES = {"mean_jct": "average JCT", "makespan": "makespan"}


def _status(ratio: float) -> Status:
    if ratio >= 1 + TIE_BAND:
        return Status.REPRODUCED
    if ratio <= 1 - TIE_BAND:
        return Status.NOT_REPRODUCED
    return Status.NOT_RESOLVED


def ratio_table(summary: pd.DataFrame, by_visit: Sequence[pd.DataFrame] = ()) -> pd.DataFrame:
    """Lab and published ratios side by side: numerator, denominator, quantity, lab,
    published, source; with ``by_visit`` summaries also ``lab (visit k)`` per visit."""
    by_policy = summary.set_index("policy")
    rows = []
    for r in published_ratios().itertuples():
        if r.numerator not in by_policy.index or r.denominator not in by_policy.index:
            continue
        lab = by_policy.at[r.numerator, r.quantity] / by_policy.at[r.denominator, r.quantity]
        rows.append(
            {
                "numerator": r.numerator,
                "denominator": r.denominator,
                "quantity": r.quantity,
                "lab": float(lab),
                "published": float(r.ratio),
                "source": r.source,
            }
        )
    table = pd.DataFrame(rows)
    for k, visit in enumerate(by_visit, start=1):
        if len(table):
            table[f"lab (visit {k})"] = ratio_table(visit)["lab"].to_numpy()
    return table


def fig14_verdicts(
    summary: pd.DataFrame,
    scale: str,
    hardware: str,
    runs: Sequence[str] = (),
    by_visit: Sequence[pd.DataFrame] = (),
) -> list[Verdict]:
    """One verdict per published ratio (YARN-CS/heter and homo/heter, JCT and makespan).

    With ``by_visit`` (two or more summaries of the same trace simulated on each visit's
    step times, ``standin_visits.summaries_by_visit``) a ratio is judged by its 95%
    interval over the visits: above 1 reproduced, below 1 not reproduced, else not
    resolved. Without, its point value against a tie band of ±5%; homo/heter makespan
    read 1.23, 1.09, 1.06, 1.04 and 1.12 in five make runs, so the point flipped.
    """
    from lab.experiments.evidence import ratio_status
    from lab.metrics.stats import mean_ci

    table = ratio_table(summary)
    if table.empty or not table["lab"].notna().all():
        raise NothingMeasured("no policy summary to compare with the published ratios")
    visits = [ratio_table(s) for s in by_visit] if len(by_visit) >= 2 else []
    out = []
    for i, r in enumerate(table.itertuples()):
        name = _NAMES[r.quantity]
        status, value, ci = _status(r.lab), r.lab, None
        said = f"Lab ratio {r.lab:.2f}×"
        if visits:
            est = mean_ci(float(v["lab"].iloc[i]) for v in visits)
            status, value, ci = ratio_status(est), est.mean, est.ci
            said = (
                f"Lab ratio {est.format()}× over {est.n} visits of the step-time runs "
                f"({r.lab:.2f}× on the whole table)"
            )
        out.append(
            Verdict(
                paper=EASYSCALE_SC23,
                figure="Fig 14",
                claim=f"EasyScale-heter cuts {name} against {r.numerator} "
                f"({name} ratio {r.numerator}/{r.denominator})",
                status=status,
                lab_value=value,
                lab_ci=ci,
                published_value=r.published,
                published_source=r.source,
                unit="×",
                scale=scale,
                hardware=hardware,
                why=f"{said} vs published {r.published:.2f}×: the direction is "
                "judged; the size depends on the trace and the device speeds.",
                runs=tuple(str(x) for x in runs),
            )
        )
    return out


def mean_allocated(allocation: pd.DataFrame, until: float | None = None) -> float:
    """Time-averaged devices allocated (all types), up to ``until`` (default: the end)."""
    total = allocation.groupby("time")["devices"].sum().sort_index()
    if until is not None:
        total = total[total.index < until]
    return float(total.mean()) if len(total) else float("nan")


def fig15_verdict(
    allocations: Mapping[str, pd.DataFrame], scale: str, hardware: str, runs: Sequence[str] = ()
) -> Verdict:
    """Heter vs homo devices allocated, averaged over the time both still run jobs."""
    try:
        homo, heter = allocations["EasyScale-homo"], allocations["EasyScale-heter"]
    except KeyError as e:
        raise NothingMeasured(f"no allocation of {e.args[0]} to compare") from None
    until = min(homo["time"].max(), heter["time"].max())
    a, b = mean_allocated(heter, until), mean_allocated(homo, until)
    if not (a == a and b == b) or b <= 0:
        raise NothingMeasured("no allocation over time to compare")
    ratio = a / b
    return Verdict(
        paper=EASYSCALE_SC23,
        figure="Fig 15",
        claim="EasyScale-heter allocates more devices over time than EasyScale-homo",
        status=_status(ratio),
        lab_value=ratio,
        unit="× (time-averaged devices, heter/homo)",
        scale=scale,
        hardware=hardware,
        why=f"Time-averaged devices allocated until {until:.0f} s: heter {a:.1f}, homo {b:.1f}; "
        "the paper shows the curves, no number.",
        runs=tuple(str(x) for x in runs),
    )
