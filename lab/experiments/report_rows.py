"""The report's rows: for every figure in the catalog, each scale's latest verdict and the
figure saved beside it, with the one sentence and the numbers a row shows. Data only; the page
is drawn by ``lab.experiments.report_page``."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.experiments.catalog import FIGURES, FigureEntry
from lab.experiments.saved import FIGURE_JSON, Saved, figure_runs, png_of, saved_scales
from lab.experiments.verdicts import Status
from lab.metrics.versions import resolved


@dataclass
class ScaleView:
    """One scale's latest verdict of a figure, and the figure drawn from the same runs.

    Args:
        saved: the verdict record as read back.
        figure: the interactive HTML, when it was drawn from the verdict's runs.
        image: its PNG, when one was rendered from that figure.
        refusal: why no figure is shown beside this verdict ("" when one is).
    """

    saved: Saved
    figure: Path | None = None
    image: Path | None = None
    refusal: str = ""

    @property
    def record(self) -> dict[str, Any]:
        return self.saved.record

    @property
    def scale(self) -> str:
        return self.saved.scale


@dataclass
class ReportRow:
    """One catalog entry with what results/ holds for it, one view per scale."""

    entry: FigureEntry
    status: str  # the latest scale's status (not measured when there is none)
    why: str  # one sentence
    scales: list[ScaleView] = field(default_factory=list)
    rehearsals: list[Saved] = field(default_factory=list)
    notebook: str | None = None  # the executed notebook, relative to results/

    @property
    def latest(self) -> ScaleView | None:
        return max(self.scales, key=lambda s: s.saved.saved_at, default=None)

    @property
    def shown(self) -> ScaleView | None:
        """The scale whose figure the row shows: the latest saved one that has a figure."""
        with_figure = [s for s in self.scales if s.figure is not None]
        return max(with_figure, key=lambda s: s.saved.saved_at, default=None)


def _runs_named(runs: list[str]) -> str:
    ids = [Path(r).name for r in runs]
    shown = ", ".join(ids[:2]) + (f" and {len(ids) - 2} more" if len(ids) > 2 else "")
    return f"{len(ids)} run{'s' if len(ids) != 1 else ''} ({shown})" if ids else "no run"


def view_of(saved: Saved) -> ScaleView:
    """The scale's verdict with its figure, or the reason the figure is refused."""
    said = sorted(set(saved.record.get("runs") or []))
    figure = resolved(saved.slot.figure)  # the version the latest link names now, linked as such
    if not figure.is_file():
        return ScaleView(saved, refusal="No figure was saved with this verdict.")
    drawn = figure_runs(figure)
    if drawn is None:
        return ScaleView(saved, refusal="Figure withheld: it does not name the runs it shows.")
    if sorted(set(drawn)) != said:
        return ScaleView(
            saved,
            refusal=f"Figure withheld: it was drawn from {_runs_named(sorted(set(drawn)))}, "
            f"this verdict from {_runs_named(said)}; re-run the notebook to save both.",
        )
    data = figure.with_suffix(FIGURE_JSON)
    png = png_of(data)
    fresh = png.is_file() and (not data.is_file() or png.stat().st_mtime >= data.stat().st_mtime)
    return ScaleView(saved, figure=figure, image=png if fresh else None)


def collect(results: Path) -> list[ReportRow]:
    """Every catalog entry with its verdicts per scale, their figures, notebook and runs."""
    rows = []
    for entry in (f for f in FIGURES if f.in_report):
        scales = [view_of(s) for s in saved_scales(results, entry.room, entry.figure)]
        rehearsals = saved_scales(results, entry.room, entry.figure, rehearsals=True)
        notebook = results / "notebooks" / entry.notebook if entry.notebook else None
        row = ReportRow(entry, Status.NOT_MEASURED.value, "", scales, rehearsals)
        if notebook is not None and notebook.is_file():
            row.notebook = os.path.relpath(resolved(notebook), results)
        if row.latest is not None:
            row.status = str(row.latest.record["status"])
            row.why = headline(row.latest.record)
        elif entry.notebook is None:
            row.why = f"No notebook yet ({entry.status})."
        else:
            row.why = f"notebooks/{entry.notebook} has not been run here (make run)."
        rows.append(row)
    return rows


def number(v: dict[str, Any], key: str, ci: str | None = None) -> str:
    """A value of a verdict record as the page prints it, with its unit and interval."""
    value = v.get(key)
    if value is None:
        return "—"
    text = f"{value:.3g}"
    if ci and v.get(ci) is not None:
        text += f" ± {v[ci]:.2g}"
    return f"{text} {v.get('unit') or ''}".strip()


def headline(v: dict[str, Any]) -> str:
    """One sentence computed from a verdict record: the lab's number against the paper's,
    or how its claims came out."""
    claims = v.get("claims")
    if claims:
        counts = Counter(str(c.get("status")) for c in claims)
        parts = ", ".join(f"{n} {status}" for status, n in counts.most_common())
        return f"{len(claims)} claims: {parts}."
    if v.get("lab_value") is None:
        why = str(v.get("why") or "").strip()
        return why.split(". ")[0].rstrip(".") + "." if why else "Nothing was measured."
    if v.get("published_value") is None:
        return f"Lab {number(v, 'lab_value', 'lab_ci')}; the paper gives no number to compare."
    lab, published = number(v, "lab_value", "lab_ci"), number(v, "published_value")
    return f"Lab {lab} against {published} published."


def precision(v: dict[str, Any]) -> str:
    """The precision each claim reached, as its notebook printed it."""
    claims = v.get("claims") or [v]
    return " ".join(dict.fromkeys(c.get("precision_sentence") or "" for c in claims)).strip()
