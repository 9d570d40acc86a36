"""The reproduction report: one offline page that says, for every paper figure in the
catalog, what was claimed, what the lab measured at each scale, and whether it holds.

Built from ``results/`` alone (verdict records, figure files, executed notebooks, run
directories), so ``make run`` and a person who ran notebooks one by one in JupyterLab get
the same page: ``python -m lab report`` rebuilds it. A figure is shown beside a verdict
only when both name the same runs; otherwise the row says which runs each came from.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab.experiments.catalog import readme_table
from lab.experiments.outputs import render_pngs
from lab.experiments.report_page import render
from lab.experiments.report_rows import ReportRow, ScaleView, collect, headline
from lab.experiments.saved import slug
from lab.metrics.layout import results_root

REPORT_NAME = "report.html"
README_BEGIN = "<!-- figures table: generated from lab/experiments/catalog.py -->"
README_END = "<!-- end of figures table -->"


def write_report(results: str | Path | None = None) -> Path:
    """Build ``<results>/report.html`` from what ``results/`` holds; return its path."""
    root = results_root(results)
    root.mkdir(parents=True, exist_ok=True)
    render_pngs(root / "figures")
    out = root / REPORT_NAME
    out.write_text(render(collect(root), root), encoding="utf-8")
    return out


def readme_with_table(readme: str) -> str:
    """The README text with its generated figures table replaced by the catalog's."""
    start, end = readme.index(README_BEGIN), readme.index(README_END)
    return readme[: start + len(README_BEGIN)] + "\n" + readme_table() + "\n" + readme[end:]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write results/report.html from results/")
    p.add_argument("--results", default=None, help="results root (default: results/)")
    p.add_argument(
        "--write-readme", action="store_true", help="also rewrite README.md's generated tables"
    )
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.write_readme:
        from lab.experiments.layout_table import readme_with_layout
        from lab.metrics.layout import REPO_ROOT

        readme = REPO_ROOT / "README.md"
        readme.write_text(readme_with_layout(readme_with_table(readme.read_text())))
    print(write_report(args.results))
    return 0


__all__ = ["ReportRow", "ScaleView", "collect", "headline", "slug", "write_report"]
