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


def ratio_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Lab and published ratios side by side: numerator, denominator, quantity, lab,
    published, source."""
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
    return pd.DataFrame(rows)


def fig14_verdicts(
    summary: pd.DataFrame, scale: str, hardware: str, runs: Sequence[str] = ()
) -> list[Verdict]:
    """One verdict per published ratio (YARN-CS/heter and homo/heter, JCT and makespan)."""
    table = ratio_table(summary)
    if table.empty or not table["lab"].notna().all():
        raise NothingMeasured("no policy summary to compare with the published ratios")
    out = []
    for r in table.itertuples():
        name = _NAMES[r.quantity]
        out.append(
            Verdict(
                paper=EASYSCALE_SC23,
                figure="Fig 14",
                claim=f"EasyScale-heter cuts {name} against {r.numerator} "
                f"({name} ratio {r.numerator}/{r.denominator})",
                status=_status(r.lab),
                lab_value=r.lab,
                published_value=r.published,
                published_source=r.source,
                unit="×",
                scale=scale,
                hardware=hardware,
                why=f"Lab ratio {r.lab:.2f}× vs published {r.published:.2f}×: the direction is "
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
