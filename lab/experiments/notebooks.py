"""Run the lab's notebooks with papermill: the batch runner behind `make run` and the tests.

Every notebook has one cell tagged ``parameters`` holding at least ``scale`` and
``cluster``; this module injects the scale (and a cluster when one is named), executes
each notebook into ``results/notebooks/<same relative path>`` (the latest) and a dated copy
beside the runs it made (``results/runs/<experiment>/notebooks/``), so a figure can always
be traced to the runs behind it, and reports pass/fail and wall time. Any other parameter
of a notebook can be set (``-p NAME VALUE``, ``-y YAML``); a name a notebook does not have
is refused before anything runs. Kernels run with ``DISTLAB_BATCH=1``: a notebook that
measured nothing fails (lab.experiments.batch).
papermill saves the executed notebook before it raises, so a failed notebook keeps
every output up to the failing cell.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import REPO_ROOT
from lab.errors import ParameterError
from lab.experiments.batch import BATCH_ENV
from lab.metrics.layout import results_root

log = logging.getLogger(__name__)

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
SCALES = ("smoke", "paper")
DEFAULT_TIMEOUT_S = 900
TIMINGS_FILE = "timings.jsonl"  # one line per notebook run, appended, beside the notebooks


@dataclass(frozen=True)
class NotebookResult:
    """How one notebook run went."""

    notebook: Path
    output: Path
    ok: bool
    seconds: float
    error: str = ""
    cpu_speed: float | None = None  # lab.metrics.machine.cpu_speed just before it ran


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


def parameter_names(notebook: Path) -> list[str]:
    """The names assigned in the notebook's ``parameters`` cell (used to validate it)."""
    nb = json.loads(notebook.read_text())
    cells = [
        c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])
    ]
    if len(cells) != 1:
        raise ValueError(f"{notebook}: {len(cells)} cells tagged 'parameters'; want exactly 1")
    import ast

    source = "".join(cells[0]["source"])
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


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
    accepted = set(parameter_names(notebook))
    unknown = set(params) - accepted
    if unknown:
        raise ParameterError(
            "parameters",
            sorted(unknown),
            f"names in {notebook.name}'s parameters cell: {', '.join(sorted(accepted))}",
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    started_epoch = time.time()
    error = ""
    previous = os.environ.get(BATCH_ENV)
    os.environ[BATCH_ENV] = "1"  # the kernel inherits it: nothing measured fails the run
    sockets = tempfile.TemporaryDirectory(prefix="distlab-kernel-")
    try:
        papermill.execute_notebook(
            str(notebook),
            str(output),
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
        if previous is None:
            os.environ.pop(BATCH_ENV, None)
        else:
            os.environ[BATCH_ENV] = previous
    if output.exists():
        copy_beside_runs(output, started_epoch)
    return NotebookResult(notebook, output, not error, time.monotonic() - start, error)


def copy_beside_runs(executed: Path, since: float, results: Path | None = None) -> list[Path]:
    """Copy an executed notebook into every experiment that got a run since ``since``
    (``<results>/runs/<experiment>/notebooks/<stamp>-<name>``); return the copies."""
    from lab.metrics.layout import read_manifest

    runs = results_root(results) / "runs"
    experiments = set()
    for manifest in runs.glob("**/manifest.json") if runs.is_dir() else ():
        started = (read_manifest(manifest.parent).get("started") or {}).get("epoch") or 0
        if started >= since - 1:
            experiments.add(manifest.parent.parent)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(since))
    copies = []
    for exp in sorted(experiments):
        target = exp / "notebooks" / f"{stamp}-{executed.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(executed, target)
        copies.append(target)
    return copies


def check_parameters(notebooks: Iterable[Path], parameters: Mapping[str, Any]) -> None:
    """Refuse, before anything runs, a parameter that a selected notebook does not have."""
    for nb in notebooks:
        accepted = set(parameter_names(nb))
        unknown = set(parameters) - accepted
        if unknown:
            raise ParameterError(
                "parameters",
                sorted(unknown),
                f"names in {nb.name}'s parameters cell: {', '.join(sorted(accepted))}",
            )


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


# -- command line: python -m lab notebooks ---------------------------------------------


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "notebooks",
        help="execute notebooks with papermill into results/notebooks/",
        description="Execute every notebook (or those matching --only) at the given scale.",
    )
    p.add_argument("--scale", choices=SCALES, default="smoke")
    p.add_argument(
        "--cluster", default=None, help="cluster profile name or path (default: each notebook's)"
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="run only notebooks whose path under notebooks/ matches (repeatable)",
    )
    p.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds allowed per cell"
    )
    p.add_argument("--out", type=Path, default=None, help="where executed notebooks go")
    p.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a parameter (VALUE read as YAML: 4, [1, 2], ResNet50); repeatable",
    )
    p.add_argument("-y", "--yaml", default=None, help="parameters as a YAML mapping")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    paths = discover(NOTEBOOK_DIR, args.only)
    if not paths:
        print(f"no notebooks match {args.only or '*'} under {NOTEBOOK_DIR}")
        return 1
    parameters = parse_parameters(args.parameter, args.yaml)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    logging.getLogger("papermill").setLevel(logging.WARNING)  # the bar says which one runs
    results = run_notebooks(
        paths,
        out_dir=args.out,
        scale=args.scale,
        cluster=args.cluster,
        timeout=args.timeout,
        parameters=parameters,
    )
    print(summary_table(results))
    from lab.experiments.report import write_report

    print(f"report: {write_report()}")
    return 0 if all(r.ok for r in results) else 1


def parse_parameters(pairs: Sequence[Sequence[str]], yaml_text: str | None) -> dict[str, Any]:
    """Papermill-style parameters: ``-y`` first, then each ``-p NAME VALUE`` (VALUE as YAML)."""
    import yaml

    params: dict[str, Any] = {}
    if yaml_text:
        loaded = yaml.safe_load(yaml_text)
        if not isinstance(loaded, dict):
            raise ParameterError("yaml", yaml_text, "a YAML mapping, e.g. '{workers: [1, 2]}'")
        params.update(loaded)
    for name, value in pairs:
        params[name] = yaml.safe_load(value)
    for reserved in ("scale", "cluster"):
        if reserved in params:
            raise ParameterError(reserved, params[reserved], f"--{reserved}, not -p/-y")
    return params
