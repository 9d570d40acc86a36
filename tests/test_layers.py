"""The layers of lab/ as CONTRIBUTING.md draws them: every import points down, none goes
round in a circle. Imports are read from the source with ``ast`` (those inside functions
and ``TYPE_CHECKING`` blocks too: a late import is still a dependency), so nothing is
imported to check them."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "lab"
# Bottom to top. ``lab.errors`` is below every layer; the package's face (``lab`` and
# ``lab.__main__``) above them all.
LAYERS = ("lab.metrics", "lab.bench", "lab.cluster", "lab.experiments")
# Circles known today, each a set of modules; an entry goes when its circle does (the test
# below fails while one is listed that no longer exists).
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(LAB.rglob("*.py"))}


def _module_of(name: str) -> str:
    """The lab module that ``name`` (a module, or a name inside one) lives in."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(module: str) -> Iterator[tuple[str, int]]:
    """(lab module imported, line) for every import in ``module``'s source, at any depth;
    ``from pkg import sub`` counts as importing ``pkg.sub`` when that is a module."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "lab":
                    yield _module_of(alias.name), node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.split(".")[0] != "lab":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in MODULES else _module_of(base)), node.lineno


def layer(module: str) -> int:
    if module == "lab.errors":
        return -1
    for i, top in enumerate(LAYERS):
        if module == top or module.startswith(top + "."):
            return i
    return len(LAYERS)  # lab, lab.__main__


def graph() -> dict[str, set[str]]:
    return {m: {t for t, _ in imports(m)} - {m} for m in MODULES}


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_lab_import_points_down() -> None:
    up = [
        f"{MODULES[m].relative_to(REPO)}:{line} imports {target}"
        for m in MODULES
        for target, line in imports(m)
        if layer(target) > layer(m)
    ]
    assert not up, "imports pointing up a layer:\n" + "\n".join(up)


def test_no_lab_modules_import_each_other_in_a_circle() -> None:
    found = cycles(graph())
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert not new, f"import circles: {new}"
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not gone, f"no longer circles, take them out of KNOWN_CYCLES: {gone}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from lab.cluster.inventory import Cluster", "lab.cluster.inventory"),
        ("from lab.cluster import inventory", "lab.cluster.inventory"),
        ("from lab.metrics import Sweep", "lab.metrics"),
        ("import lab.cluster.inventory as inv", "lab.cluster.inventory"),
        ("def f():\n    from lab.experiments.points import grid", "lab.experiments.points"),
        ("from . import stats", "lab.metrics.stats"),
        ("from .stats import mean_ci", "lab.metrics.stats"),
    ],
)
def test_imports_are_read_at_any_depth_and_resolved_to_modules(
    source: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "probe.py"
    fake.write_text(source + "\n")
    monkeypatch.setitem(MODULES, "lab.metrics.probe", fake)
    assert [t for t, _ in imports("lab.metrics.probe")] == [expected]


def test_an_upward_import_and_a_circle_are_seen() -> None:
    assert layer("lab.experiments.points") > layer("lab.cluster.launching") > layer("lab.bench")
    assert layer("lab.bench.flags") > layer("lab.metrics.stats") > layer("lab.errors")
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [frozenset({"a", "b", "c"})]


def test_contributing_lists_the_layers_in_this_order() -> None:
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `lab/(\w+)/` \|", text, flags=re.MULTILINE)
    assert tuple(f"lab.{r}" for r in rows) == LAYERS
