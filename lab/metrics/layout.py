"""Where runs live and how their manifest is read: the one definition both the launcher
side (lab.cluster.rundir, which writes runs) and the results store (which reads them) use.

The results root is ``<repo>/results`` unless ``DISTLAB_RESULTS`` (or an explicit root)
says otherwise; an experiment's runs are ``<root>/runs/<experiment>/<run id>/``, a
rehearsal's ``<root>/rehearsals/runs/<experiment>/<run id>/``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from lab.metrics import liveness

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]  # the one definition (lab.REPO_ROOT too)
MANIFEST_NAME = "manifest.json"
RESULTS_ENV = "DISTLAB_RESULTS"
# Set for a kernel that runs a notebook in a batch (lab.experiments.notebooks): the runs it
# launches name it in their manifest (``launched_by.execution``), so the executed notebook is
# kept beside its own runs, not beside another notebook's that ran at the same time.
EXECUTION_ENV = "DISTLAB_EXECUTION"
RUNNING = "running"
ORPHANED = "orphaned"  # a run whose launching process ended while it was running


def results_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Where results live: ``root``, else ``$DISTLAB_RESULTS``, else ``<repo>/results``."""
    if root is not None:
        return Path(root)
    env = os.environ.get(RESULTS_ENV)
    return Path(env) if env else REPO_ROOT / "results"


def execution_of(manifest: dict[str, Any]) -> str | None:
    """The notebook execution that launched a run (``EXECUTION_ENV``), None for any other."""
    by = manifest.get("launched_by")
    return str(by["execution"]) if isinstance(by, dict) and by.get("execution") else None


def runs_dir(experiment: str, root: str | os.PathLike[str] | None = None) -> Path:
    """``<results>/runs/<experiment>``: where the experiment's run directories are (during
    a rehearsal ``<results>/rehearsals/runs/<experiment>``: lab.metrics.rehearsal)."""
    from lab.metrics.rehearsal import runs_root

    return runs_root(results_root(root)) / experiment


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The run's manifest, or an empty dict when it is missing or unreadable (a run that
    is still being created, or a stray directory, must not break a summary).

    A manifest that says ``running`` although the process that ran it (its ``owner``) has
    ended is marked ``orphaned``, here and in the file: that process was killed (or its
    machine went down) before it could write how the run ended.
    """
    path = Path(run_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s: %s", path, exc)
        return {}
    if not isinstance(data, dict):
        return {}
    if data.get("state") == RUNNING and liveness.ended(data.get("owner")):
        data = _orphaned(path, data)
    return data


def _orphaned(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` marked ``orphaned``, written back when the file can be (a read-only copy
    of results is still read as orphaned)."""
    owner = data.get("owner") or {}
    data = {
        **data,
        "state": ORPHANED,
        "reason": f"the process that ran it (pid {owner.get('pid')}) ended before the run "
        "did, without recording how it ended (killed, or its machine went down)",
    }
    tmp = path.with_name(f".{MANIFEST_NAME}.{os.getpid()}.orphaned.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.info("run %s is orphaned; could not mark its manifest (%s)", path.parent, exc)
    return data
