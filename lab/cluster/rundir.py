"""A run is a directory (DESIGN.md, contract 2): creating it and its manifest.

``results/runs/<experiment>/<YYYYmmdd-HHMMSS>-<6 hex>/`` holds ``manifest.json`` (what ran,
where, with which versions, and how it ended), one ``rank-<r>.log`` per rank and
``launcher.log`` for lines no rank can be named for. Nothing is ever overwritten.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import secrets
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.errors import ParameterError
from lab.metrics.layout import MANIFEST_NAME, REPO_ROOT, read_manifest, runs_dir

__all__ = ["REPO_ROOT", "new_run_dir", "read_manifest", "write_manifest"]

MANIFEST = MANIFEST_NAME
# Distributions whose versions a manifest records when installed (read from metadata,
# never imported: importing TensorFlow to learn its version costs seconds).
VERSIONED = ("tensorflow", "tf-keras", "horovod", "torch", "mpi4py", "numpy")
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_experiment(experiment: str) -> str:
    """An experiment name is one or more ``/``-separated segments of ``[A-Za-z0-9._-]``."""
    parts = str(experiment).split("/")
    if not experiment or not all(_SEGMENT.match(p) for p in parts):
        raise ParameterError(
            "experiment",
            experiment,
            "names of letters, digits, '.', '_', '-' (optionally grouped with '/'), "
            "not starting with '.' or '-'",
        )
    return str(experiment)


def new_run_dir(experiment: str, results_root: str | os.PathLike[str] | None = None) -> Path:
    """Create and return a fresh run directory; never reuses an existing one."""
    base = runs_dir(check_experiment(experiment), results_root)
    base.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = base / f"{stamp}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise OSError(f"could not create a fresh run directory under {base}")


def write_manifest(run_dir: str | os.PathLike[str], **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into ``run_dir/manifest.json`` and rewrite it atomically.

    Returns the whole manifest as written. Values that JSON cannot hold are written as text.
    """
    path = Path(run_dir) / MANIFEST
    data = read_manifest(run_dir)
    data.update(fields)
    tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)
    return data


def timestamp(epoch: float) -> dict[str, Any]:
    """A moment as both ISO 8601 (UTC) and epoch seconds, as manifests store times."""
    iso = datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="milliseconds")
    return {"iso": iso, "epoch": round(epoch, 3)}


def package_versions() -> dict[str, str | None]:
    """Python's version and those of the lab's engines that are installed (None if not).

    Read once per process (scanning site-packages' metadata costs tens of ms per launch);
    a package installed into a running kernel shows after a restart, as its import does.
    """
    return dict(_package_versions())


@functools.cache
def _package_versions() -> dict[str, str | None]:
    import importlib.metadata

    out: dict[str, str | None] = {"python": platform.python_version(), "lab": _lab_version()}
    for dist in VERSIONED:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def git_state(repo: str | os.PathLike[str] = REPO_ROOT, timeout: float = 5.0) -> dict[str, Any]:
    """The repository's commit and whether the working tree differs from it.

    ``{"commit": None, ...}`` when git is missing, times out, or there is no commit yet.
    """

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(repo), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    # One call gives both: "# branch.oid <sha>" ("(initial)" before the first commit),
    # then one line per changed tracked file.
    status = git("status", "--porcelain=v2", "--branch", "--untracked-files=no")
    if status is None:
        return {"commit": None, "dirty": None}
    lines = status.splitlines()
    oid = next((ln.split()[2] for ln in lines if ln.startswith("# branch.oid ")), None)
    if oid is None or oid == "(initial)":
        return {"commit": None, "dirty": None}
    return {"commit": oid, "dirty": any(not ln.startswith("#") for ln in lines)}


def git_state_later(repo: str | os.PathLike[str] = REPO_ROOT) -> Callable[[], dict[str, Any]]:
    """Start ``git_state`` in a thread and return a function that waits for its answer.

    A launch asks git while its ranks run rather than before they start: the two git
    calls cost tens of ms, and the working tree's state must be read afresh each launch
    (a cached answer would miss an edit made between two runs of one kernel).
    """
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.update(state=git_state(repo)), name="distlab-git", daemon=True
    )
    thread.start()

    def result(timeout: float = 15.0) -> dict[str, Any]:
        thread.join(timeout)
        return box.get("state", {"commit": None, "dirty": None})

    return result


def _lab_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("distlab")
    except importlib.metadata.PackageNotFoundError:  # a checkout not installed: its pyproject
        import tomllib

        try:
            with open(REPO_ROOT / "pyproject.toml", "rb") as fh:
                return str(tomllib.load(fh)["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return None


def process_lines(procs: Iterable[Any]) -> list[dict[str, Any]]:
    """Each process of a run as the manifest records it: the spec's argv and what was
    started (the guard's inlined source replaced by a placeholder)."""
    from lab.cluster.ssh import guard_source

    quoted = shlex.quote(guard_source())
    return [
        {
            "role": p.spec.role,
            "ranks": list(p.spec.ranks),
            "host": p.spec.host.name,
            "argv": list(p.spec.argv),
            "env": dict(p.spec.env),
            "cwd": p.cwd,
            "started_argv": [a.replace(quoted, "'<guard.py source>'") for a in p.argv],
        }
        for p in procs
    ]


def end_fields(
    result: Any, procs: Iterable[Any], signals: Mapping[int, str | None] | None = None
) -> dict[str, Any]:
    """The manifest fields written when a run ends: state, exit codes per rank (as
    ``result.rank_exit_codes`` and ``signals`` tell them apart, lab.cluster.root_cause) and
    per process, failures (root cause first), and ``error``: None for a run that succeeded,
    else one line saying why not (for a failed run: its root cause's rank, exit code and
    message)."""
    procs = list(procs)
    codes = result.rank_exit_codes
    signals = signals if signals is not None else {}
    ranks = {
        str(r): {
            "host": p.spec.host.name,
            "pid": p.rank_pid,
            "exit_code": codes.get(r, p.code),
            "signal": signals.get(r, p.signal),
        }
        for p in procs
        for r in p.spec.ranks
    }
    return {
        "state": result.state.value,
        "reason": result.reason,
        "error": _error(result),
        "exit_code": result.exit_code,
        "ended": timestamp(result.ended),
        "seconds": round(result.seconds, 3),
        "ranks": ranks,
        "process_exits": [
            {
                "role": p.spec.role,
                "ranks": list(p.spec.ranks),
                "guard_pid": p.popen.pid if p.popen else None,
                "exit_code": p.code,
                "signal": p.signal,
            }
            for p in procs
        ],
        "failures": [
            {
                "rank": f.rank,
                "host": f.host,
                "exit_code": f.exit_code,
                "signal": f.signal,
                "message": f.message,
                "named_by": f.named_by or None,
            }
            for f in result.failures
        ],
    }


def _error(result: Any) -> str | None:
    """Why a run did not succeed, in one line (None when it did)."""
    if result.state.value == "succeeded":
        return None
    if result.state.value == "failed" and result.failures:
        return str(result.failures[0].summary())
    return str(result.reason or result.state.value)
