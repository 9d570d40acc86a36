"""A notebook's last step: its verdict and figure saved where the report finds them.

``conclude`` writes ``results/verdicts/<room>/<figure>.json`` every time (the verdict as
data), and in a batch run (or when asked) the figure as standalone HTML under
``results/figures/<room>/<figure>.html`` with the runs behind it in its metadata; it
prints the verdict sentence, rendered from the same record, so the two cannot disagree.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from lab.errors import NothingMeasured
from lab.experiments.batch import in_batch
from lab.experiments.verdicts import Status, Verdict, save_verdict
from lab.metrics.layout import results_root

log = logging.getLogger(__name__)


def slug(text: str) -> str:
    """A file name from a figure's name: ``"Fig 14–15"`` -> ``"fig_14-15"``."""
    out = "".join(c.lower() if c.isalnum() else "_" for c in text.replace("–", "-"))
    return "_".join(p for p in out.split("_") if p) or "figure"


def conclude(
    verdict: Verdict,
    room: str,
    figure: Any = None,
    save_figure: bool | None = None,
    results: str | Path | None = None,
) -> Verdict:
    """Save the verdict (and figure), print its sentence, and return it.

    Args:
        verdict: computed from the data by the room's verdict function.
        room: the paper's room (``"kungfu"``, ``"p3"`` ...): the folder it is saved in.
        figure: the plotly figure the verdict belongs to.
        save_figure: write the figure's HTML (default: in a batch run only).
        results: the results root (default: ``lab.metrics.layout.results_root()``).

    Raises:
        NothingMeasured: the verdict claims a measurement but names no run behind it.
    """
    if verdict.status is not Status.NOT_MEASURED and not verdict.runs:
        raise NothingMeasured(f"{verdict.paper} {verdict.figure}: a verdict with no run behind it")
    root = results_root(results)
    save_verdict(verdict, root / "verdicts" / room)
    if figure is not None and (in_batch() if save_figure is None else save_figure):
        out = root / "figures" / room / f"{slug(verdict.figure)}.html"
        out.parent.mkdir(parents=True, exist_ok=True)
        figure.write_html(out, include_plotlyjs=True, full_html=True)
        out.with_suffix(".runs.json").write_text(json.dumps(list(verdict.runs), indent=1) + "\n")
        write_png(figure, out.with_suffix(".png"))
        log.info("figure written to %s", out)
    print(verdict.sentence())
    return verdict


def write_png(figure: Any, path: Path) -> bool:
    """A static image of the figure through kaleido and the system's Chromium; False (with
    a warning) where they are missing, so a machine without a browser still gets HTML."""
    import os
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        os.environ.setdefault("BROWSER_PATH", browser)
    try:
        figure.write_image(path, width=900, height=520)
    except Exception as exc:  # kaleido or a browser missing: the HTML still stands
        log.warning("no PNG for %s (%s)", path.name, exc)
        return False
    return True
