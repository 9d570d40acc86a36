"""The README's layout table, generated from lab/ itself: every module and package with the
first sentence of its docstring, so the table lists what is there and says what each does
in the module's own words. Sources are read with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lab.metrics.layout import REPO_ROOT

LAYOUT_BEGIN = "<!-- layout table: generated from the docstrings of lab/ -->"
LAYOUT_END = "<!-- end of layout table -->"
# Bottom to top (CONTRIBUTING.md); the package's face (lab/*.py) comes first.
LAYERS = ("metrics", "bench", "cluster", "experiments")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(*])")


def summary(docstring: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line ("" without one)."""
    if not docstring:
        return ""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    return _SENTENCE_END.split(paragraph, maxsplit=1)[0]


def _order(path: Path, lab: Path) -> tuple[int, tuple[str, ...]]:
    parts = path.relative_to(lab).with_suffix("").parts
    layer = LAYERS.index(parts[0]) + 1 if parts[0] in LAYERS else 0
    return layer, tuple("" if p == "__init__" else p for p in parts)


def modules(root: Path = REPO_ROOT) -> list[tuple[str, str]]:
    """(path shown, summary) of every module under ``root/lab``: face first, then the
    layers bottom to top, each package before its modules."""
    lab = root / "lab"
    rows = []
    for path in sorted(lab.rglob("*.py"), key=lambda p: _order(p, lab)):
        rel = path.relative_to(root).as_posix()
        is_package = path.name == "__init__.py" and path.parent != lab
        shown = rel.removesuffix("__init__.py") if is_package else rel
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        rows.append((shown, summary(doc)))
    return rows


def layout_table(root: Path = REPO_ROOT) -> str:
    """The README's layout table (Markdown): one row per module, packages in bold."""
    lines = ["| module | what |", "| --- | --- |"]
    for shown, what in modules(root):
        cell = f"**`{shown}`**" if shown.endswith("/") else f"`{shown}`"
        lines.append(f"| {cell} | {what.replace('|', '&#124;')} |")
    return "\n".join(lines)


def readme_with_layout(readme: str, root: Path = REPO_ROOT) -> str:
    """The README text with its generated layout table replaced by one from ``root``."""
    start, end = readme.index(LAYOUT_BEGIN), readme.index(LAYOUT_END)
    return readme[: start + len(LAYOUT_BEGIN)] + "\n" + layout_table(root) + "\n" + readme[end:]
