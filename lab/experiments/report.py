"""The reproduction report: one offline page that says, for every paper figure in the
catalog, what was claimed, what the lab measured, and whether it holds.

Built from ``results/`` alone (verdict records, figure files, executed notebooks, run
directories), so ``make run`` and a person who ran notebooks one by one in JupyterLab get
the same page: ``python -m lab report`` rebuilds it.
"""

from __future__ import annotations

import argparse
import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.experiments.catalog import FIGURES, FigureEntry, readme_table
from lab.experiments.outputs import render_pngs, slug
from lab.experiments.verdicts import Status
from lab.metrics.layout import results_root

REPORT_NAME = "report.html"
README_BEGIN = "<!-- figures table: generated from lab/experiments/catalog.py -->"
README_END = "<!-- end of figures table -->"


@dataclass
class ReportRow:
    """One catalog entry with what results/ holds for it."""

    entry: FigureEntry
    status: str
    why: str
    verdict: dict[str, Any] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, relative path)
    image: str | None = None


def collect(results: Path) -> list[ReportRow]:
    """Every catalog entry with its verdict, figure files, notebook and runs, if any."""
    rows = []
    for entry in (f for f in FIGURES if f.in_report):
        name = slug(entry.figure)
        verdict_path = results / "verdicts" / entry.room / f"{name}.json"
        verdict = json.loads(verdict_path.read_text()) if verdict_path.is_file() else {}
        if verdict:
            status, why = verdict["status"], verdict.get("why", "")
        elif entry.notebook is None:
            status, why = Status.NOT_MEASURED.value, f"no notebook yet ({entry.status})"
        else:
            status = Status.NOT_MEASURED.value
            why = f"notebooks/{entry.notebook} has not been run here (make run)"
        row = ReportRow(entry, status, why, verdict)
        for label, path in (
            ("figure", results / "figures" / entry.room / f"{name}.html"),
            ("verdict", verdict_path),
            ("notebook", results / "notebooks" / entry.notebook if entry.notebook else None),
        ):
            if path is not None and path.is_file():
                row.links.append((label, os.path.relpath(path, results)))
        png = results / "figures" / entry.room / f"{name}.png"
        row.image = os.path.relpath(png, results) if png.is_file() else None
        for run in verdict.get("runs", []):
            manifest = Path(run) / "manifest.json"
            evidence = manifest if manifest.is_file() else Path(run)  # a run, or a data file
            if evidence.is_file():
                row.links.append((Path(run).name, os.path.relpath(evidence, results)))
        rows.append(row)
    return rows


def _value(v: dict[str, Any], key: str, ci: str | None = None) -> str:
    value = v.get(key)
    if value is None:
        return "—"
    text = f"{value:.3g}"
    if ci and v.get(ci) is not None:
        text += f" ± {v[ci]:.2g}"
    return f"{text} {html.escape(v.get('unit') or '')}".strip()


def _precision(v: dict[str, Any]) -> str:
    """The precision each claim reached, as its notebook printed it."""
    claims = v.get("claims") or [v]
    return " ".join(dict.fromkeys(c.get("precision_sentence") or "" for c in claims)).strip()


def render(rows: list[ReportRow]) -> str:
    """The page: a summary count, then one row per figure."""
    e = html.escape
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {e(s)}" for s, n in sorted(counts.items()))
    body = []
    for r in rows:
        v, f = r.verdict, r.entry
        links = " · ".join(f'<a href="{e(p)}">{e(label)}</a>' for label, p in r.links)
        image = (
            f'<a href="{e(r.image)}"><img src="{e(r.image)}" alt="{e(f.figure)}"></a>'
            if r.image
            else ""
        )
        body.append(
            "<tr>"
            f"<td>{e(f.paper)}</td><td><b>{e(f.figure)}</b><br>{e(f.title)}</td>"
            f"<td>{e(v.get('claim', ''))}</td>"
            f'<td class="s-{slug(r.status)}">{e(r.status)}<br><small>{e(r.why)}</small></td>'
            f"<td>{_value(v, 'published_value')}<br>"
            f"<small>{e(v.get('published_source') or '')}</small></td>"
            f"<td>{_value(v, 'lab_value', 'lab_ci')}<br><small>{e(v.get('scale', ''))} "
            f"{e(v.get('hardware', ''))}<br>{e(_precision(v))}</small></td>"
            f"<td>{e(f.implementation)}</td><td>{links}{image}</td>"
            "</tr>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>distlab reproduction report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; width: 100%; font-size: 14px; }}
th, td {{ border: 1px solid #ccc; padding: 6px 8px; vertical-align: top; text-align: left; }}
th {{ background: #f3f3f3; }} small {{ color: #555; }}
img {{ max-width: 260px; display: block; margin-top: 4px; }}
.s-reproduced {{ background: #e6f4ea; }} .s-not_reproduced {{ background: #fde8e8; }}
.s-not_resolved_at_this_scale {{ background: #fff6db; }}
.s-not_measured_here {{ background: #eee; }}
</style></head><body>
<h1>distlab reproduction report</h1>
<p>{len(rows)} paper figures: {summary}. Every status is computed from the lab's runs;
published values come from the lab's published-values table with their sources.</p>
<table><thead><tr><th>paper</th><th>figure</th><th>claim</th><th>status</th>
<th>published</th><th>lab</th><th>implementation</th><th>files and runs</th></tr></thead>
<tbody>
{chr(10).join(body)}
</tbody></table></body></html>
"""


def write_report(results: str | Path | None = None) -> Path:
    """Build ``<results>/report.html`` from what ``results/`` holds; return its path."""
    root = results_root(results)
    root.mkdir(parents=True, exist_ok=True)
    render_pngs(root / "figures")
    out = root / REPORT_NAME
    out.write_text(render(collect(root)), encoding="utf-8")
    return out


def readme_with_table(readme: str) -> str:
    """The README text with its generated figures table replaced by the catalog's."""
    start, end = readme.index(README_BEGIN), readme.index(README_END)
    return readme[: start + len(README_BEGIN)] + "\n" + readme_table() + "\n" + readme[end:]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write results/report.html from results/")
    p.add_argument("--results", default=None, help="results root (default: results/)")
    p.add_argument(
        "--write-readme", action="store_true", help="also rewrite README.md's figures table"
    )
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.write_readme:
        from lab import REPO_ROOT

        readme = REPO_ROOT / "README.md"
        readme.write_text(readme_with_table(readme.read_text()))
    print(write_report(args.results))
    return 0
