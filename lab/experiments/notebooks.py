"""Run the lab's notebooks with papermill: the batch runner behind `make run` and the tests.

Every notebook has one cell tagged ``parameters`` holding at least ``scale`` and
``cluster``; this module injects the scale (and a cluster when one is named) and executes
each notebook once under its own name, an *execution* id (``<YYYYmmdd-HHMMSS>-<6 hex>``):
``results/notebooks/<path less .ipynb>/<execution>.ipynb``, with ``results/notebooks/<path>``
a relative link to the latest (lab.metrics.versions). The kernel is told the id
(``DISTLAB_EXECUTION``), every run it launches names it in its manifest, and a copy of the
executed notebook goes beside those runs only (``results/runs/<experiment>/notebooks/``),
never beside another notebook's runs made at the same time. It reports pass/fail and wall
time. Any other parameter of a notebook can be set (``-p NAME VALUE``, ``-y YAML``); a name
a notebook does not have is refused before anything runs. Kernels run with
``DISTLAB_BATCH=1``: a notebook that measured nothing fails (lab.experiments.batch).
``--scale paper --rehearse`` runs the paper-scale path on this machine instead, cut and
kept apart (``rehearse``).
papermill saves the executed notebook before it raises, so a failed notebook keeps
every output up to the failing cell. Reading a notebook's parameters cell lives in
lab.experiments.notebook_parameters, the command line in lab.experiments.notebooks_cli.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import logging
import math
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.errors import ParameterError
from lab.experiments.batch import BATCH_ENV
from lab.experiments.notebook_parameters import (
    check_parameters,
    parameter_names,
    parse_parameters,
)
from lab.experiments.rehearsing import SUMMARY, cluster_for, rehearsing, write_summary
from lab.metrics.layout import EXECUTION_ENV, REPO_ROOT, execution_of, results_root
from lab.metrics.rehearsal import REHEARSALS_DIR, Plan, memory_cap, runs_root
from lab.metrics.versions import new_version, point, version_path

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "NOTEBOOK_DIR",
    "SCALES",
    "TIMINGS_FILE",
    "NotebookResult",
    "check_parameters",
    "copy_beside_runs",
    "discover",
    "parameter_names",
    "parse_parameters",
    "rehearse",
    "run_notebook",
    "run_notebooks",
    "summary_table",
]

log = logging.getLogger(__name__)

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
SCALES = ("smoke", "paper")
DEFAULT_TIMEOUT_S = 900
TIMINGS_FILE = "timings.jsonl"  # one line per notebook run, appended, beside the notebooks


@dataclass(frozen=True)
class NotebookResult:
    """How one notebook run went."""

    notebook: Path
    output: Path  # the latest executed copy: a link to ``executed`` once that exists
    ok: bool
    seconds: float
    error: str = ""
    cpu_speed: float | None = None  # lab.metrics.machine.cpu_speed just before it ran
    execution: str = ""  # this execution's id, which the manifests of its runs name
    executed: Path | None = None  # the executed notebook, written for this execution alone
    copies: tuple[Path, ...] = ()  # its copies beside the runs it launched


def discover(root: Path = NOTEBOOK_DIR, patterns: Sequence[str] = ()) -> list[Path]:
    """Every notebook under ``root`` (checkpoints excluded), optionally filtered by globs
    matched against the path relative to ``root``."""
    found = sorted(p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if patterns:
        found = [
            p
            for p in found
            if any(fnmatch.fnmatch(str(p.relative_to(root)), pat) for pat in patterns)
        ]
    return found


def run_notebook(
    notebook: Path,
    output: Path,
    parameters: Mapping[str, Any] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    kernel_name: str = "python3",
) -> NotebookResult:
    """Execute one notebook with papermill; never raises for a cell error (it's reported).

    The kernel starts in the notebook's own folder, so relative paths in a notebook mean
    the same in JupyterLab and here.
    """
    import papermill

    params = dict(parameters or {})
    check_parameters([notebook], params)
    execution = new_version()
    executed = version_path(output, execution)
    executed.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    error = ""
    sockets = tempfile.TemporaryDirectory(prefix="distlab-kernel-")
    # the kernel inherits both: nothing measured fails the run; its runs name the execution
    with _environment({BATCH_ENV: "1", EXECUTION_ENV: execution}):
        try:
            papermill.execute_notebook(
                str(notebook),
                str(executed),
                parameters=params,
                kernel_name=kernel_name,
                cwd=str(notebook.parent),
                progress_bar=False,
                request_save_on_cell_execute=True,
                execution_timeout=int(timeout),
                log_output=False,
                config=_kernel_config(Path(sockets.name)),
            )
        except Exception as e:  # papermill raises after saving what it has
            error = _short_error(e)
        finally:
            sockets.cleanup()
    copies: list[Path] = []
    if executed.exists():
        point({output: executed})
        copies = copy_beside_runs(executed, execution, output.name)
    return NotebookResult(
        notebook,
        output,
        not error,
        time.monotonic() - start,
        error,
        execution=execution,
        executed=executed if executed.exists() else None,
        copies=tuple(copies),
    )


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in this process's environment (a kernel started now inherits them),
    and put back what was there after."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def copy_beside_runs(
    executed: Path, execution: str, name: str, results: Path | None = None
) -> list[Path]:
    """Copy an executed notebook beside every run that its execution launched: one copy per
    experiment, ``<results>/runs/<experiment>/notebooks/<execution>-<name>``, with
    ``<execution>-<name less .ipynb>.runs.json`` naming those runs; return the copies.

    A run is this execution's when its manifest names it (``launched_by.execution``), so a
    notebook run at the same time by someone else keeps its own runs, and its own copies.
    """
    from lab.metrics.layout import read_manifest

    runs = runs_root(results_root(results))
    made: dict[Path, list[str]] = {}
    for manifest in sorted(runs.glob("**/manifest.json")) if runs.is_dir() else ():
        if execution_of(read_manifest(manifest.parent)) == execution:
            made.setdefault(manifest.parent.parent, []).append(manifest.parent.name)
    copies = []
    for exp, run_ids in sorted(made.items()):
        target = exp / "notebooks" / f"{execution}-{name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(executed, target)
        said = {"notebook": name, "execution": execution, "runs": run_ids}
        target.with_suffix(".runs.json").write_text(json.dumps(said, indent=1) + "\n")
        copies.append(target)
    return copies


def _kernel_config(sockets: Path) -> Any:
    """The kernel talks to papermill over IPC (Unix sockets in ``sockets``, a temporary
    folder), not plain TCP on loopback: ipykernel warns about unencrypted TCP in every
    notebook run. Without an absolute ``ip`` the sockets would land in the kernel's working
    directory, the notebook's folder, and stay there when a kernel is killed."""
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": str(sockets / "kernel-ipc")}})


def run_notebooks(
    notebooks: Iterable[Path] | None = None,
    out_dir: Path | None = None,
    scale: str = "smoke",
    cluster: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    root: Path = NOTEBOOK_DIR,
    progress: bool = True,
    parameters: Mapping[str, Any] | None = None,
) -> list[NotebookResult]:
    """Run notebooks one after another with a progress bar; return every result.

    ``cluster`` overrides every notebook's own default (each notebook names the cluster
    its smoke scale is meant for: ``local`` or an emulated profile on this machine).
    Before each notebook one core's speed is probed (lab.metrics.machine.cpu_speed); each
    notebook's time, outcome and that speed are appended to ``<out_dir>/timings.jsonl``,
    so batch runs can be compared with the machine's speed at the time.
    """
    from lab.metrics.machine import cpu_speed

    if scale not in SCALES:
        raise ParameterError("scale", scale, ", ".join(SCALES))
    paths = list(notebooks) if notebooks is not None else discover(root)
    extra = dict(parameters or {})
    check_parameters(paths, extra)
    out_dir = out_dir or results_root() / "notebooks"  # beside the runs ($DISTLAB_RESULTS)
    from tqdm.auto import tqdm

    results = []
    bar = tqdm(paths, desc="notebooks", unit="nb", disable=not progress)
    for nb in bar:
        rel = nb.relative_to(root) if nb.is_relative_to(root) else Path(nb.name)
        bar.set_postfix_str(str(rel))
        params = {**extra, "scale": scale}
        if cluster is not None:
            params["cluster"] = cluster
        speed = cpu_speed()
        began = time.time()
        result = run_notebook(nb, out_dir / rel, params, timeout=timeout)
        result = dataclasses.replace(result, cpu_speed=speed)
        results.append(result)
        _log_timing(out_dir / TIMINGS_FILE, result, rel, scale, began)
        status = "ok" if result.ok else "FAILED"
        bar.write(f"{status:6} {result.seconds:7.1f}s  cpu {speed:5.1f}  {rel}")
    return results


def _log_timing(path: Path, result: NotebookResult, rel: Path, scale: str, began: float) -> None:
    line = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(began)),
        "notebook": str(rel),
        "scale": scale,
        "ok": result.ok,
        "seconds": round(result.seconds, 1),
        "cpu_speed": result.cpu_speed,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def summary_table(results: Sequence[NotebookResult], root: Path = NOTEBOOK_DIR) -> str:
    """A plain-text table of pass/fail and wall time per notebook."""
    rows = [("notebook", "status", "seconds", "output / error")]
    for r in results:
        rel = (
            str(r.notebook.relative_to(root))
            if r.notebook.is_relative_to(root)
            else r.notebook.name
        )
        rows.append((rel, "ok" if r.ok else "FAILED", f"{r.seconds:.1f}", r.error or str(r.output)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
    passed = sum(r.ok for r in results)
    lines.append(f"{passed} passed, {len(results) - passed} failed")
    speeds = sorted(r.cpu_speed for r in results if r.cpu_speed is not None)
    if speeds:
        lines.append(
            f"one core's speed before each notebook: median {statistics.median(speeds):.1f}, "
            f"{speeds[0]:.1f}-{speeds[-1]:.1f} M loops/s (lab.metrics.machine.cpu_speed)"
        )
    return "\n".join(lines)


def _short_error(e: Exception) -> str:
    name = getattr(e, "ename", type(e).__name__)
    value = getattr(e, "evalue", str(e))
    text = f"{name}: {value}".strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def rehearse(
    notebooks: Sequence[Path],
    cluster: str | None = None,
    plan: Plan | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    results: Path | None = None,
    root: Path = NOTEBOOK_DIR,
    progress: bool = True,
    parameters: Mapping[str, Any] | None = None,
    lanes: int = 1,
) -> list[NotebookResult]:
    """Rehearse ``notebooks`` at paper scale, each on its rehearsal cluster
    (lab.experiments.rehearsing) under ``plan``'s cuts; everything under
    ``<results>/rehearsals/``, each outcome in its ``rehearsed.json``; return the outcomes
    in the order given.

    Args:
        notebooks: the notebooks to run at paper scale.
        cluster: one cluster for every notebook (default: ``cluster_for`` each).
        plan: the cuts (default: ``Plan()``, stamped with now, its worker cap what
            ``1 / (2 * lanes)`` of the free memory holds).
        timeout: seconds allowed per cell.
        results: the results root; everything goes under its ``rehearsals/``.
        lanes: notebooks run at once. A rehearsal measures nothing, and much of its time
            is waiting (emulated links, timed phases, a replacement coming back), so two
            lanes fill the cores' idle time; the longest notebooks of the last rehearsal
            start first.
    """
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
        raise ParameterError("lanes", lanes, "a whole number >= 1")
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    plan = plan or Plan(max_workers=memory_cap(share=0.5 / lanes), started=stamp)
    base = results_root(results) / REHEARSALS_DIR
    written = threading.Lock()

    def one(nb: Path) -> list[NotebookResult]:
        done = run_notebooks(
            [nb],
            out_dir=base / "notebooks",
            scale="paper",
            cluster=cluster_for(nb, cluster, root),
            timeout=timeout,
            root=root,
            progress=progress and lanes == 1,  # bars of two lanes would overwrite each other
            parameters=parameters,  # a person's narrower sweep; still cut
        )
        with written:
            write_summary(base / SUMMARY, plan, done, root)  # each as it ends
        return done

    order = longest_first(notebooks, base / SUMMARY, root) if lanes > 1 else list(notebooks)
    with rehearsing(plan):
        if lanes == 1:
            outcomes = {nb: one(nb) for nb in order}
        else:
            with ThreadPoolExecutor(lanes, thread_name_prefix="rehearsal-lane") as pool:
                outcomes = dict(zip(order, pool.map(one, order), strict=True))
    return [r for nb in notebooks for r in outcomes[nb]]


def longest_first(notebooks: Sequence[Path], summary: Path, root: Path) -> list[Path]:
    """``notebooks`` by the seconds the last rehearsal took, longest first (never
    rehearsed: first of all), so that two lanes end close together."""
    from lab.experiments.rehearsing import read_summary, summary_key

    seconds = {n["notebook"]: n.get("seconds") for n in (read_summary(summary) or {}).get(
        "notebooks", [])}  # fmt: skip

    def key(nb: Path) -> float:
        took = seconds.get(summary_key(nb, root))
        return -float(took) if isinstance(took, int | float) else -math.inf

    return sorted(notebooks, key=key)
