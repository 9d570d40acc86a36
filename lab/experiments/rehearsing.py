"""How ``python -m lab notebooks --scale paper --rehearse`` (``make rehearse``) runs every
notebook's paper-scale path end to end on this machine, before GPU hours are spent on it.

Each notebook runs with ``scale="paper"`` on the rehearsal cluster (env/clusters/
rehearsal.yaml: emulated hosts that declare GPUs, device types of ``kind: cuda``) unless it
builds its own emulated hosts per point (``cluster = "emulated"``), under a ``Plan``
(lab.metrics.rehearsal) that cuts steps, per-rank batches, budgets and axes, each cut said
(lab.experiments.rehearsal). Everything it writes lives under ``<results>/rehearsals/``:
runs, executed notebooks, verdicts and figures, and ``rehearsed.json``, the summary the
report shows as "paper scale rehearsed: N of M notebooks". Nothing of a measurement changes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lab.metrics.rehearsal import REHEARSAL_ENV, REHEARSALS_DIR, Plan

REHEARSAL_CLUSTER = "rehearsal"  # env/clusters/rehearsal.yaml
# Notebooks whose paper path runs horovodrun (Horovod over Gloo; Horovod Elastic): it
# cannot reach ranks in emulated hosts, so they rehearse on this machine as one node that
# declares GPUs (env/clusters/rehearsal-local.yaml)
LOCAL_CLUSTER = "rehearsal-local"
HOROVODRUN_NOTEBOOKS = frozenset(
    {"00_tour.ipynb", "kungfu/adaptive_batch.ipynb", "kungfu/fig7_scaling.ipynb"}
)
OWN_HOSTS = "emulated"  # a notebook whose every point builds its own emulated hosts
SUMMARY = "rehearsed.json"
DEFAULT_TIMEOUT_S = 1200  # per cell: a rehearsal that needs longer has found something


def own_cluster(notebook: Path) -> str:
    """The notebook's own default ``cluster`` (its parameters cell), "" when it has none."""
    import ast

    nb = json.loads(notebook.read_text())
    for cell in nb.get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "cluster" for t in node.targets
                ):
                    return str(ast.literal_eval(node.value))
    return ""


def cluster_for(notebook: Path, cluster: str | None = None, root: Path | None = None) -> str:
    """Where a notebook rehearses: ``cluster`` if given; its own emulated hosts where each
    point builds them (``cluster = "emulated"``); this machine declaring GPUs where the
    paper path runs horovodrun (``HOROVODRUN_NOTEBOOKS``); else the rehearsal cluster."""
    if cluster is not None:
        return cluster
    own = own_cluster(notebook)
    rel = str(notebook.relative_to(root)) if root and notebook.is_relative_to(root) else ""
    if own == OWN_HOSTS:
        return own
    return LOCAL_CLUSTER if rel in HOROVODRUN_NOTEBOOKS else REHEARSAL_CLUSTER


@contextmanager
def rehearsing(plan: Plan) -> Iterator[Plan]:
    """``$DISTLAB_REHEARSAL`` set to ``plan`` while the block runs (kernels inherit it)."""
    previous = os.environ.get(REHEARSAL_ENV)
    os.environ[REHEARSAL_ENV] = plan.to_env()
    try:
        yield plan
    finally:
        if previous is None:
            os.environ.pop(REHEARSAL_ENV, None)
        else:
            os.environ[REHEARSAL_ENV] = previous


def summary_key(notebook: Path, root: Path) -> str:
    """A notebook's name in ``rehearsed.json``: its path under ``root``, else as given."""
    return str(notebook.relative_to(root) if notebook.is_relative_to(root) else notebook)


def write_summary(path: Path, plan: Plan, done: Sequence[Any], root: Path) -> Path:
    """``rehearsed.json``: the plan and each notebook's outcome, merged into what earlier
    rehearsals said of the others (a rehearsal of a subset updates its own notebooks)."""
    old = read_summary(path) or {}
    per = {n["notebook"]: n for n in old.get("notebooks", [])}
    for r in done:
        rel = summary_key(r.notebook, root)
        per[rel] = {
            "notebook": rel,
            "ok": r.ok,
            "seconds": round(r.seconds, 1),
            "error": r.error,
            "date": time.strftime("%Y-%m-%d"),
            "plan": plan.to_dict(),
        }
    record = {"plan": plan.to_dict(), "notebooks": [per[k] for k in sorted(per)]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


def read_summary(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def rehearsed_line(results: Path, total: int) -> str:
    """ "paper scale rehearsed: N of M notebooks, <date>" for the report ("" before any)."""
    data = read_summary(results / REHEARSALS_DIR / SUMMARY)
    if not data or not data.get("notebooks"):
        return ""
    rows = data["notebooks"]
    ok = sum(bool(n.get("ok")) for n in rows)
    last = max(str(n.get("date", "")) for n in rows)
    return (
        f"Paper scale rehearsed: {ok} of {total} notebooks, {last} (the paper-scale path on "
        "one CPU machine, cut to a step budget; it measures nothing)."
    )
