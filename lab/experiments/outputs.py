"""A notebook's last step: its verdict and figure saved where the report finds them.

``conclude`` writes ``results/verdicts/<room>/<figure>.json`` every time (the verdict as
data), and in a batch run (or when asked) the figure as standalone HTML under
``results/figures/<room>/<figure>.html`` with the runs behind it in its metadata, and as
plotly JSON from which ``render_pngs`` makes its image (the report does, for every figure
at once); it prints the verdict sentence, rendered from the same record, so the two cannot disagree.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.errors import NothingMeasured
from lab.experiments.batch import in_batch
from lab.experiments.verdicts import Status, Verdict, save_verdict
from lab.metrics.layout import results_root

log = logging.getLogger(__name__)
FIGURE_JSON = ".plotly.json"  # a saved figure as data, from which its PNG is rendered


def slug(text: str) -> str:
    """A file name from a figure's name: ``"Fig 14–15"`` -> ``"fig_14-15"``."""
    out = "".join(c.lower() if c.isalnum() else "_" for c in text.replace("–", "-"))
    return "_".join(p for p in out.split("_") if p) or "figure"


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


def conclude(
    verdict: Verdict | Sequence[Verdict],
    room: str,
    figure: Any = None,
    save_figure: bool | None = None,
    results: str | Path | None = None,
) -> Verdict | list[Verdict]:
    """Save the verdict (or the several claims of one figure) and the figure, print the
    sentences, and return what was given.

    Args:
        verdict: computed from the data by the room's verdict function; several verdicts
            must name the same figure (e.g. one per published ratio) and are saved together.
        room: the paper's room (``"kungfu"``, ``"p3"`` ...): the folder it is saved in.
        figure: the plotly figure the verdict belongs to.
        save_figure: write the figure's HTML and PNG (default: in a batch run only).
        results: the results root (default: ``lab.metrics.layout.results_root()``).

    Raises:
        NothingMeasured: a verdict claims a measurement but names no run behind it.
    """
    many = list(verdict) if isinstance(verdict, Sequence) else [verdict]
    if not many:
        raise NothingMeasured(f"{room}: no verdict to conclude with")
    names = {v.figure for v in many}
    if len(names) != 1:
        raise ValueError(f"one figure per conclude call, got {sorted(names)}")
    for v in many:
        if v.status is not Status.NOT_MEASURED and not v.runs:
            raise NothingMeasured(f"{v.paper} {v.figure}: a verdict with no run behind it")
    root = results_root(results)
    name = slug(many[0].figure)
    if len(many) == 1:
        save_verdict(many[0], root / "verdicts" / room)
    else:
        out = root / "verdicts" / room / f"{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            **many[0].to_dict(),
            "status": combined_status(many).value,
            "claims": [v.to_dict() for v in many],
        }
        record["claim"] = "; ".join(v.claim for v in many)
        record["why"] = " ".join(f"[{v.status.value}] {v.why}" for v in many)
        record["runs"] = sorted({r for v in many for r in v.runs})
        out.write_text(json.dumps(record, indent=2) + "\n")
    if figure is not None and (in_batch() if save_figure is None else save_figure):
        out = root / "figures" / room / f"{name}.html"
        out.parent.mkdir(parents=True, exist_ok=True)
        figure.write_html(out, include_plotlyjs=True, full_html=True)
        runs = sorted({r for v in many for r in v.runs})
        out.with_suffix(".runs.json").write_text(json.dumps(runs, indent=1) + "\n")
        figure.write_json(out.with_suffix(FIGURE_JSON))  # its PNG: render_pngs, all at once
        log.info("figure written to %s", out)
    for v in many:
        print(v.sentence())
    return verdict if isinstance(verdict, Verdict) else many


def render_pngs(figures: Path) -> list[Path]:
    """A static image beside every saved figure under ``figures`` whose PNG is missing or
    older than its figure, rendered through kaleido and the system's Chromium in one browser
    session (a browser start per figure cost seconds in every notebook). Returns the PNGs
    written; none (with a warning) where kaleido or a browser is missing: the HTML stands."""
    import os
    import shutil

    import plotly.io as pio

    pairs = ((j, _png_of(j)) for j in sorted(figures.glob(f"**/*{FIGURE_JSON}")))
    stale = {j: png for j, png in pairs if _older(png, j)}
    if not stale:
        return []
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        os.environ.setdefault("BROWSER_PATH", browser)
    pngs = list(stale.values())
    try:
        pio.write_images([pio.read_json(j) for j in stale], pngs, width=900, height=520)
    except Exception as exc:  # kaleido or a browser missing: the HTML still stands
        log.warning("no PNGs for %d figures (%s)", len(stale), exc)
        return []
    return pngs


def _older(png: Path, figure_json: Path) -> bool:
    """True when ``png`` is missing or older than the figure it shows."""
    return not png.is_file() or png.stat().st_mtime < figure_json.stat().st_mtime


def _png_of(figure_json: Path) -> Path:
    return figure_json.with_name(figure_json.name.removesuffix(FIGURE_JSON) + ".png")
