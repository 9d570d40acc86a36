"""The reproduction report as one HTML page that fits a 1400 px window.

Per figure, one row: on the left its claim and each scale's latest status with one computed
sentence, side by side, and the details and run lists folded in ``<details>``; on the right
the figure, at least 600 px wide, opening the interactive figure on a click. Nothing is
fetched from the network; every link is relative to ``results/``.
"""

from __future__ import annotations

import html
import os
from collections import Counter
from pathlib import Path
from typing import Any

from lab.experiments.report_rows import ReportRow, ScaleView, headline, number, precision
from lab.experiments.saved import Saved, slug

FIGURE_WIDTH = 720  # px: the figure column; a 900 px PNG reads at this width

STYLE = f"""
* {{ box-sizing: border-box; }}
body {{ font-family: system-ui, sans-serif; margin: 0 auto; padding: 16px 24px;
  max-width: 1600px; color: #222; font-size: 14px; line-height: 1.4; }}
h1 {{ font-size: 22px; margin: 0 0 4px; }}
.row {{ display: grid; grid-template-columns: minmax(0, 1fr) {FIGURE_WIDTH}px; gap: 20px;
  border-top: 1px solid #ccc; padding: 14px 0; }}
.row.bare {{ grid-template-columns: minmax(0, 1fr); padding: 8px 0; }}
.row.bare .scale {{ flex: 0 1 auto; padding: 3px 10px; }} .row.bare .scale * {{ display: inline; }}
@media (max-width: {FIGURE_WIDTH + 420}px) {{ .row {{ grid-template-columns: minmax(0, 1fr); }} }}
.text {{ min-width: 0; overflow-wrap: anywhere; }}
h2 {{ font-size: 16px; margin: 0 0 4px; }} h2 small {{ font-weight: normal; }}
h3 {{ font-size: 14px; margin: 10px 0 2px; }}
.claim {{ margin: 0 0 8px; }}
.scales {{ display: flex; flex-wrap: wrap; gap: 8px; margin-bottom: 6px; }}
.scale {{ flex: 1 1 200px; min-width: 0; border-radius: 6px; padding: 6px 10px;
  border: 1px solid #ddd; }}
.scale b {{ display: block; }} .scale p {{ margin: 2px 0 0; }}
.tag {{ font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: #555; }}
.refused {{ color: #a00; }}
small, .muted {{ color: #555; }}
details {{ margin-top: 4px; }} summary {{ cursor: pointer; color: #245; }}
details table {{ border-collapse: collapse; width: 100%; table-layout: fixed; margin: 4px 0; }}
details th, details td {{ border: 1px solid #ddd; padding: 3px 6px; vertical-align: top;
  text-align: left; }}
ul.runs {{ columns: 2; margin: 4px 0; padding-left: 18px; font-family: monospace;
  font-size: 12px; }}
figure {{ margin: 0; min-width: 0; }}
figure img {{ display: block; width: 100%; height: auto; border: 1px solid #ddd; }}
figcaption {{ font-size: 12px; color: #555; }}
.s-reproduced {{ background: #e6f4ea; }} .s-not_reproduced {{ background: #fde8e8; }}
.s-not_resolved_at_this_scale {{ background: #fff6db; }}
.s-not_measured_here {{ background: #f1f1f1; }}
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def _when(stamp: str) -> str:
    """``2025-05-01T12:03:04.000+00:00`` -> ``2025-05-01 12:03 UTC``."""
    return stamp[:16].replace("T", " ") + " UTC" if len(stamp) >= 16 else stamp


def _link(path: Path | str | None, label: str, root: Path) -> str:
    if path is None:
        return ""
    return f'<a href="{_e(os.path.relpath(path, root))}">{_e(label)}</a>'


def _scale_block(view: ScaleView, shown: ScaleView | None, root: Path) -> str:
    v = view.record
    status = str(v.get("status", ""))
    refused = f'<p class="refused">{_e(view.refusal)}</p>' if view.refusal else ""
    if view.figure is not None and view is not shown:  # the figure beside is another scale's
        refused += f"<p>{_link(view.figure, f'its {view.scale}-scale figure', root)}</p>"
    return (
        f'<div class="scale s-{slug(status)}"><span class="tag">{_e(view.scale)} scale</span>'
        f"<b>{_e(status)}</b><p>{_e(headline(v))}</p>{refused}</div>"
    )


def _claims_table(v: dict[str, Any]) -> str:
    claims = v.get("claims") or [v]
    rows = "".join(
        f"<tr><td>{_e(c.get('claim', ''))}</td><td>{_e(c.get('status', ''))}</td>"
        f"<td>{_e(number(c, 'lab_value', 'lab_ci'))}</td>"
        f"<td>{_e(number(c, 'published_value'))}<br><small>"
        f"{_e(c.get('published_source') or '')}</small></td></tr>"
        for c in claims
    )
    return (
        '<table><colgroup><col style="width:30%"><col style="width:18%"><col style="width:20%">'
        "<col></colgroup><tr><th>claim</th><th>status</th><th>lab</th><th>published</th></tr>"
        f"{rows}</table>"
    )


def _scale_details(view: ScaleView, root: Path) -> str:
    v = view.record
    files = " · ".join(
        x
        for x in (
            _link(view.figure, "interactive figure", root),
            _link(view.image, "image", root),
            _link(view.saved.path, "verdict (JSON)", root),
        )
        if x
    )
    return (
        f"<h3>{_e(view.scale)} scale <small>saved {_e(_when(view.saved.saved_at))}"
        f"{' on ' + _e(v['hardware']) if v.get('hardware') else ''}</small></h3>"
        f"{_claims_table(v)}<p>{_e(v.get('why', ''))}</p>"
        f"<p class='muted'>{_e(precision(v))}</p><p>{files}</p>"
    )


def _runs(view: ScaleView, root: Path) -> str:
    items = []
    for run in view.record.get("runs") or []:
        manifest = Path(run) / "manifest.json"
        evidence = manifest if manifest.is_file() else Path(run)  # a run, or a data file
        label = Path(run).name
        item = _link(evidence, label, root) if evidence.is_file() else _e(label)
        items.append(f"<li>{item}</li>")
    return f"<p>{_e(view.scale)} scale</p><ul class='runs'>{''.join(items)}</ul>"


def _rehearsals(rehearsals: list[Saved], root: Path) -> str:
    if not rehearsals:
        return ""
    items = "".join(
        f"<li>{_e(r.scale)}, {_e(_when(r.saved_at))}: {_e(headline(r.record))} "
        f"{_link(r.path, 'record', root)}</li>"
        for r in rehearsals
    )
    said = "Rehearsals (the paper-scale path on one machine, never a verdict):"
    return f"<p>{said}</p><ul>{items}</ul>"


def _row(row: ReportRow, root: Path) -> str:
    f, shown = row.entry, row.shown
    if row.scales:
        blocks = "".join(_scale_block(s, shown, root) for s in row.scales)
        claim = f'<p class="claim">{_e(row.latest.record.get("claim", ""))}</p>'
    else:
        blocks = (
            f'<div class="scale s-{slug(row.status)}"><b>{_e(row.status)}</b>'
            f"<p> — {_e(row.why)}</p></div>"
        )
        claim = ""
    notebook = _link(root / row.notebook, "executed notebook", root) if row.notebook else ""
    details = (
        "<details><summary>details</summary>"
        + "".join(_scale_details(s, root) for s in row.scales)
        + f"<p>Implementation: {_e(f.implementation)}. Runs today: {_e(f.status)}. "
        f"Notebook: notebooks/{_e(f.notebook or '—')} {notebook}</p>"
        + _rehearsals(row.rehearsals, root)
        + "</details>"
    )
    count = sum(len(s.record.get("runs") or []) for s in row.scales)
    runs = (
        f"<details><summary>{count} run{'s' if count != 1 else ''}</summary>"
        + "".join(_runs(s, root) for s in row.scales)
        + "</details>"
        if count
        else ""
    )
    figure = ""
    if shown is not None:
        n = len(shown.record.get("runs") or [])
        picture = (
            f'<img src="{_e(os.path.relpath(shown.image, root))}" width="{FIGURE_WIDTH}" '
            f'alt="{_e(f.paper)} {_e(f.figure)}, {_e(shown.scale)} scale">'
            if shown.image
            else "open the interactive figure (no image was rendered)"
        )
        figure = (
            f'<figure><a href="{_e(os.path.relpath(shown.figure, root))}">{picture}</a>'
            f"<figcaption>{_e(shown.scale)} scale, drawn from the {n} runs of its verdict; "
            "click for the interactive figure.</figcaption></figure>"
        )
    return (
        f'<section class="row{"" if figure else " bare"}" id="{_e(f.room)}-{slug(f.figure)}">'
        f'<div class="text"><h2>{_e(f.figure)} <small>{_e(f.paper)} — {_e(f.title)}</small></h2>'
        f"{claim}<div class='scales'>{blocks}</div>{details}{runs}</div>{figure}</section>"
    )


def _summary(rows: list[ReportRow]) -> str:
    per_scale: dict[str, Counter[str]] = {}
    for row in rows:
        for s in row.scales:
            per_scale.setdefault(s.scale, Counter())[str(s.record.get("status"))] += 1
    parts = [
        f"{_e(scale)} scale: " + ", ".join(f"{n} {_e(st)}" for st, n in sorted(c.items()))
        for scale, c in per_scale.items()
    ]
    bare = sum(not r.scales for r in rows)
    withheld = sum(bool(s.refusal) for r in rows for s in r.scales)
    text = f"{len(rows)} paper figures. " + "; ".join(parts)
    text += f"{'; ' if parts else ''}{bare} not measured at any scale."
    if withheld:
        text += (
            f" {withheld} verdict{' shows' if withheld == 1 else 's show'} no figure: "
            "none was saved from the same runs."
        )
    return text


def _rehearsed(root: Path) -> str:
    """The line saying how much of the paper-scale path was rehearsed, and when."""
    from lab.experiments.catalog import FIGURES
    from lab.experiments.rehearsing import rehearsed_line

    line = rehearsed_line(root, len({f.notebook for f in FIGURES if f.notebook}))
    return f'<p class="rehearsed">{_e(line)}</p>' if line else ""


def render(rows: list[ReportRow], root: Path) -> str:
    """The page: a summary of the statuses per scale, then one row per figure."""
    body = "\n".join(_row(r, root) for r in rows)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>distlab reproduction report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style></head><body>
<h1>distlab reproduction report</h1>
<p>{_summary(rows)} Every status is computed from the lab's runs, and each scale keeps its
latest; published values come from the lab's published-values table with their sources.
A figure is shown only beside the verdict drawn from the same runs.</p>
{_rehearsed(root)}
{body}
</body></html>
"""
