"""Where runs live and how their manifest is read: the one definition both the launcher
side (lab.cluster.rundir, which writes runs) and the results store (which reads them) use.

The results root is ``<repo>/results`` unless ``DISTLAB_RESULTS`` (or an explicit root)
says otherwise; an experiment's runs are ``<root>/runs/<experiment>/<run id>/``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFEST_NAME = "manifest.json"
RESULTS_ENV = "DISTLAB_RESULTS"


def results_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Where results live: ``root``, else ``$DISTLAB_RESULTS``, else ``<repo>/results``."""
    if root is not None:
        return Path(root)
    env = os.environ.get(RESULTS_ENV)
    return Path(env) if env else REPO_ROOT / "results"


def runs_dir(experiment: str, root: str | os.PathLike[str] | None = None) -> Path:
    """``<results>/runs/<experiment>``: where the experiment's run directories are."""
    return results_root(root) / "runs" / experiment


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The run's manifest, or an empty dict when it is missing or unreadable (a run that
    is still being created, or a stray directory, must not break a summary)."""
    path = Path(run_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}
