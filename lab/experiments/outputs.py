"""A notebook's last step: its verdict and figure saved where the report finds them.

``conclude`` writes the verdict (as data) and the figure together, in batch runs and
interactive ones alike, into the slot of the verdict's room, figure and scale
(``lab.experiments.saved``): ``results/verdicts/<room>/<scale>/<figure>.json`` and
``results/figures/<room>/<scale>/<figure>.html``, with the figure as plotly JSON (from which
``render_pngs`` makes its image; the report does, for every figure at once) and the runs it
was drawn from. Each save is a new version under its own name and those paths link to the
latest, so a later save never replaces one. Both or neither are written, and both name the
same runs. It prints the verdict sentence, rendered from the same record, so the two cannot
disagree.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.errors import NothingMeasured
from lab.experiments import rehearsal
from lab.experiments.saved import FIGURE_JSON, now, png_of, save_slot, slot_for, slug
from lab.experiments.verdicts import Status, Verdict
from lab.metrics.figure_style import HEIGHT, WIDTH
from lab.metrics.layout import results_root

log = logging.getLogger(__name__)
__all__ = ["FIGURE_JSON", "combined_status", "conclude", "render_pngs", "slug"]


def combined_status(verdicts: Sequence[Verdict]) -> Status:
    """One figure's status from its claims: not reproduced if any claim is not, reproduced
    only if every claim is, else not resolved (or not measured when none was)."""
    statuses = {v.status for v in verdicts}
    if Status.NOT_REPRODUCED in statuses:
        return Status.NOT_REPRODUCED
    if statuses == {Status.REPRODUCED}:
        return Status.REPRODUCED
    if statuses == {Status.NOT_MEASURED}:
        return Status.NOT_MEASURED
    return Status.NOT_RESOLVED


def verdict_record(many: Sequence[Verdict]) -> dict[str, Any]:
    """The record saved for one figure: its one verdict, or its claims together under the
    status they combine to, with every run behind any of them."""
    if len(many) == 1:
        record = many[0].to_dict()
    else:
        record = {
            **many[0].to_dict(),
            "status": combined_status(many).value,
            "claims": [v.to_dict() for v in many],
            "claim": "; ".join(v.claim for v in many),
            "why": " ".join(f"[{v.status.value}] {v.why}" for v in many),
        }
    record["runs"] = sorted({r for v in many for r in v.runs})
    record["saved_at"] = now()
    return record


def conclude(
    verdict: Verdict | Sequence[Verdict],
    room: str,
    figure: Any = None,
    save_figure: bool | None = None,
    results: str | Path | None = None,
) -> Verdict | list[Verdict]:
    """Save the verdict (or the several claims of one figure) and the figure together, print
    the sentences, and return what was given.

    Args:
        verdict: computed from the data by the room's verdict function; several verdicts
            must name the same figure and scale (e.g. one per published ratio) and are
            saved together.
        room: the paper's room (``"kungfu"``, ``"p3"`` ...): the folder it is saved in.
        figure: the plotly figure drawn from the same runs as the verdict.
        save_figure: False keeps the figure out (the verdict is saved alone, and the report
            shows no figure for it); default: the figure is saved with the verdict.
        results: the results root (default: ``lab.metrics.layout.results_root()``).

    Raises:
        NothingMeasured: a verdict claims a measurement but names no run behind it.
    """
    many = list(verdict) if isinstance(verdict, Sequence) else [verdict]
    rehearsed = rehearsal.record()
    if rehearsed is not None:  # never a verdict, whatever its status
        many = [dataclasses.replace(v, rehearsal=True) for v in many]
        verdict = many[0] if isinstance(verdict, Verdict) else many
    if not many:
        raise NothingMeasured(f"{room}: no verdict to conclude with")
    for what in ("figure", "scale"):
        found = {getattr(v, what) for v in many}
        if len(found) != 1:
            raise ValueError(f"one {what} per conclude call, got {sorted(found)}")
    for v in many:
        if v.status is not Status.NOT_MEASURED and not v.runs:
            raise NothingMeasured(f"{v.paper} {v.figure}: a verdict with no run behind it")
    if len({v.is_rehearsal() for v in many}) != 1:
        raise ValueError("a rehearsal and a measurement in one conclude call")
    record = verdict_record(many)
    if rehearsed is not None:
        record["rehearsal"] = rehearsed  # its plan and every cut it made
    slot = slot_for(results_root(results), room, record)
    files: dict[Path, str] = {}
    if figure is not None and save_figure is not False:
        drawn = {
            "figure": record["figure"],
            "scale": record["scale"],
            "runs": record["runs"],
            "saved_at": record["saved_at"],
        }
        files[slot.figure] = figure.to_html(include_plotlyjs=True, full_html=True)
        files[slot.figure_json] = figure.to_json()  # its PNG: render_pngs, all at once
        files[slot.figure_runs] = json.dumps(drawn, indent=1) + "\n"
    files[slot.verdict] = json.dumps(record, indent=2) + "\n"  # last: the figure is in place
    kept = save_slot(slot, files)
    log.info(
        "verdict written to %s%s", kept[slot.verdict], " with its figure" if len(files) > 1 else ""
    )
    for v in many:
        print(v.sentence())
    return verdict if isinstance(verdict, Verdict) else many


def render_pngs(figures: Path) -> list[Path]:
    """A static image beside every saved figure under ``figures`` whose PNG is missing or
    older than its figure (each version; a latest link is no figure of its own), at the
    figure's own size (900×520 unless its layout says
    otherwise), rendered through kaleido and the system's Chromium in one browser
    session (a browser start per figure cost seconds in every notebook). Returns the PNGs
    written; none (with a warning) where kaleido or a browser is missing: the HTML stands."""
    import os
    import shutil

    import plotly.io as pio

    found = (j for j in sorted(figures.glob(f"**/*{FIGURE_JSON}")) if not j.is_symlink())
    pairs = ((j, png_of(j)) for j in found)
    stale = {j: png for j, png in pairs if _older(png, j)}
    if not stale:
        return []
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        os.environ.setdefault("BROWSER_PATH", browser)
    pngs = list(stale.values())
    try:
        figs = [pio.read_json(j) for j in stale]
        # each at the size its builder laid it out for (``figure_style.style``): a tall
        # timeline squeezed into 520 px would overlap its own panels
        widths = [f.layout.width or WIDTH for f in figs]
        heights = [f.layout.height or HEIGHT for f in figs]
        pio.write_images(figs, pngs, width=widths, height=heights)
    except Exception as exc:  # kaleido or a browser missing: the HTML still stands
        log.warning("no PNGs for %d figures (%s)", len(stale), exc)
        return []
    return pngs


def _older(png: Path, figure_json: Path) -> bool:
    """True when ``png`` is missing or older than the figure it shows."""
    return not png.is_file() or png.stat().st_mtime < figure_json.stat().st_mtime
