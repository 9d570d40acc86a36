"""How many lines per second the lab carries from ranks into files and the view, losing none.

Two ranks run ``spew.py`` (beside this module), each printing N numbered lines as fast as it can,
through ``lab.cluster.launch``: once with no observer (``files``: rank logs only) and once
with the notebook view's model running headless beside a counting observer
(``files+widget``: ``RunView(display=False)`` keeps its tracker and redraws its widgets'
values from its refresher thread, exactly as in a notebook, without a frontend). Every
rank log is then read back: each rank's lines must all be there, in order.

The ranks time their own printing (their last line says how long it took), so their
slowdown from being drained through pipes by the lab is their time under the lab over
their time with stdout on /dev/null, both runs unbuffered as the lab runs ranks. Under
``mpi`` the ranks write into mpirun, which buffers, so there the ranks' own time can look
fast while the lab is still draining mpirun: the wall-clock rate tells the whole story,
beside the same mpirun line with its output on /dev/null (what mpirun alone allows).

The widget path is measured apart from the files: the seconds the run's observer thread
spent in the view and the counter (``observer_s``; lines over them is the rate the view
could take) and the seconds the view's refresher spent redrawing (``redraw_s``).
"""

from __future__ import annotations

import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.cluster.launchers.base import Line, Lines, RunControl, RunObserver
from lab.cluster.observers import FanOut
from lab.errors import LaunchError
from lab.experiments.selfbench.launch_overhead import wait_all

log = logging.getLogger(__name__)

SPEW = Path(__file__).with_name("spew.py")
LAUNCHERS = ("local", "mpi")
SINKS = ("files", "files+widget")
TARGET_LINES_PER_S = 1_000_000  # through the lab, all ranks together
TARGET_SLOWDOWN = 3.0  # a rank's printing time under the lab over its time into /dev/null
MPIRUN_SHARE = 0.8  # under mpi: the share of mpirun's own rate the lab must pass on
WARMUP_LINES = 1_000  # per rank, in the untimed first run of each launcher and sink
_DONE = re.compile(r"^spew done rank=(\d+) lines=(\d+) seconds=([0-9.]+)$")


class CountingObserver:
    """Counts the lines each rank's observers were handed (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[int | None, int] = {}
        self.ended: str | None = None

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        return None

    def on_line(self, line: Line) -> None:
        with self._lock:
            self.counts[line.rank] = self.counts.get(line.rank, 0) + 1

    def on_lines(self, block: Lines) -> None:
        with self._lock:
            self.counts[block.rank] = self.counts.get(block.rank, 0) + block.count

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        self.ended = state


class TimedObserver:
    """Hands every event to ``inner`` and adds up the seconds spent in its line calls (the
    widget path's own cost, on the run's observer thread)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        self.inner.on_start(run_dir, ranks, control)

    def on_line(self, line: Line) -> None:
        start = time.perf_counter()
        self.inner.on_line(line)
        self.seconds += time.perf_counter() - start

    def on_lines(self, block: Lines) -> None:
        start = time.perf_counter()
        self.inner.on_lines(block)
        self.seconds += time.perf_counter() - start

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        self.inner.on_end(state, exit_code, rank_exit_codes)


def timed_view() -> Any:
    """A headless RunView that adds up the seconds its redraws take (``redraw_s``)."""
    from lab.cluster.view import RunView

    class TimedView(RunView):
        redraw_s = 0.0
        redraws = 0

        def refresh(self, plot: bool = False) -> None:
            start = time.perf_counter()
            super().refresh(plot)
            self.redraw_s += time.perf_counter() - start
            self.redraws += 1

    return TimedView(display=False)


def spew_argv(lines: int) -> list[str]:
    """The rank's command: this Python running the spew script."""
    return [sys.executable, str(SPEW), "--lines", str(lines)]


def check_log(path: Path, rank: int, lines: int) -> dict[str, Any]:
    """Read a rank log back: how many of the rank's numbered lines are there, in order.

    Returns:
        ``found`` (numbered lines in order; those skipped by a gap are ``lost``),
        ``lost``, ``out_of_order`` (lines behind ones already seen), ``other`` (lines that
        are neither numbered nor the final count) and ``rank_seconds`` (the rank's own
        printing time, None if its last line is missing).
    """
    prefix = f"rank {rank} line "
    expected = found = out_of_order = other = 0
    seconds = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            text = raw.rstrip("\n")
            if text.startswith(prefix):
                number = text[len(prefix) :]
                if number == str(expected):
                    found += 1
                    expected += 1
                elif number.isdigit() and int(number) > expected:  # a gap: lines lost
                    found += 1
                    expected = int(number) + 1
                else:  # a line behind the ones already seen: late or repeated
                    out_of_order += 1
                continue
            m = _DONE.match(text)
            if m and int(m.group(1)) == rank:
                seconds = float(m.group(3))
            else:
                other += 1
    return {
        "found": found,
        "lost": lines - found,
        "out_of_order": out_of_order,
        "other": other,
        "rank_seconds": seconds,
    }


def devnull_seconds(lines: int, np: int, timeout: float) -> list[float]:
    """Each rank's own printing time with stdout on /dev/null, ``np`` ranks at once.

    The count line goes to /dev/null too, so each rank also writes it to a file
    (``--report``), read back once the ranks exit.
    """
    with tempfile.TemporaryDirectory(prefix="distlab-bench-") as tmp:
        reports = [Path(tmp) / f"rank-{r}.txt" for r in range(np)]
        procs = [
            subprocess.Popen(
                [*spew_argv(lines), "--report", str(reports[r])],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", "RANK": str(r)},
            )
            for r in range(np)
        ]
        wait_all(procs, timeout, "spew.py into /dev/null")
        out = []
        for r, path in enumerate(reports):
            m = _DONE.match(path.read_text().strip())
            if m is None or int(m.group(1)) != r:
                raise LaunchError(f"spew.py rank {r} wrote no count line to {path}")
            out.append(float(m.group(3)))
        return out


def mpirun_devnull_seconds(lines: int, np: int, timeout: float) -> tuple[float, list[float]]:
    """Wall seconds of the lab's mpirun line (tagged output) for the spewing ranks with
    mpirun's own stdout on /dev/null — the most that mpirun itself passes on — and each
    rank's own printing time there (what mpirun alone costs a rank)."""
    from lab.experiments.selfbench.launch_overhead import mpirun_argv

    with tempfile.TemporaryDirectory(prefix="distlab-bench-") as tmp:
        argv = mpirun_argv([*spew_argv(lines), "--report", f"{tmp}/rank-{{rank}}.txt"], np)
        at = argv.index("--bind-to")
        argv[at:at] = ["--map-by", "slot", "--tag-output"]
        start = time.perf_counter()
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            timeout=timeout,
            check=False,
        )
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise LaunchError(f"{argv} exited with {done.returncode}")
        ranks = []
        for r in range(np):
            m = _DONE.match((Path(tmp) / f"rank-{r}.txt").read_text().strip())
            if m is None or int(m.group(1)) != r:
                raise LaunchError(f"spew.py rank {r} under mpirun wrote no count line")
            ranks.append(float(m.group(3)))
        return wall, ranks


def targets_for(launcher: str, mpirun_lines_per_s: float | None) -> dict[str, Any]:
    """The lines/s a launcher's row is held to, and what its ranks' slowdown is against.

    Under ``mpi`` every line passes through mpirun before the lab sees it, and mpirun alone
    (its stdout on /dev/null) passed ~230 k lines/s here and slowed the ranks ~11x: no
    reader can beat that. So an mpi row is held to ``MPIRUN_SHARE`` of mpirun's own rate
    (or the target, if lower), and its ranks' slowdown is against their time under mpirun
    alone: what the lab adds by listening."""
    if launcher == "mpi" and mpirun_lines_per_s:
        return {"lines_per_s": min(TARGET_LINES_PER_S, MPIRUN_SHARE * mpirun_lines_per_s),
                "slowdown_against": "mpirun into /dev/null"}  # fmt: skip
    return {"lines_per_s": TARGET_LINES_PER_S, "slowdown_against": "/dev/null"}


def stream_once(
    launcher: str, sink: str, lines: int, np: int, timeout: float, root: str
) -> dict[str, Any]:
    """One run of ``np`` spewing ranks through the lab, read back and counted."""
    from lab.cluster.launching import launch

    counter = view = timed = None
    observer: RunObserver | None = None
    if sink == "files+widget":
        counter, view = CountingObserver(), timed_view()
        observer = timed = TimedObserver(FanOut(view, counter))
    elif sink != "files":
        raise LaunchError(f"unknown sink {sink!r}; one of {SINKS}")
    start = time.perf_counter()
    result = launch(
        spew_argv(lines),
        np=np,
        launcher=launcher,
        view=observer,
        results_root=root,
        timeout=timeout,
        experiment="selfbench-stream",
    )
    wall = time.perf_counter() - start
    ranks = {r: check_log(result.run_dir / f"rank-{r}.log", r, lines) for r in range(np)}
    rank_seconds = [c["rank_seconds"] for c in ranks.values()]
    out: dict[str, Any] = {
        "launcher": launcher,
        "sink": sink,
        "wall_s": wall,
        "run_s": result.seconds,
        "lines_per_s": np * lines / result.seconds,
        "rank_seconds": rank_seconds,
        "lost": sum(c["lost"] for c in ranks.values()),
        "out_of_order": sum(c["out_of_order"] for c in ranks.values()),
        "ranks": {str(r): c for r, c in ranks.items()},
    }
    if view is not None and counter is not None and timed is not None:
        snap = view.snapshot()
        seen = sum(counter.counts.values())
        out["observer_s"] = timed.seconds
        out["observer_lines_per_s"] = seen / timed.seconds if timed.seconds > 0 else None
        out["redraw_s"], out["redraws"] = view.redraw_s, view.redraws
        out["observer_lines"] = {str(k): v for k, v in counter.counts.items()}
        out["widget_lines"] = snap.lines
        out["widget_shows_end"] = all(
            f"spew done rank={r} " in view.logs[r].value for r in range(np)
        )
    for path in sorted(result.run_dir.iterdir()):  # the logs are large and already counted
        path.unlink()
    result.run_dir.rmdir()
    return out


def streaming(
    lines: int = 200_000,
    np: int = 2,
    repeats: int = 3,
    launchers: Sequence[str] = LAUNCHERS,
    sinks: Sequence[str] = SINKS,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Lines per second through the lab, lines lost, and the ranks' own slowdown.

    An untimed short run of every launcher and sink comes first (``warmup_runs``; its
    lines are checked too). Each repeat runs the /dev/null baseline, then every launcher
    and sink once, so a busy machine weighs on all of them alike.

    Returns:
        ``params``, ``devnull`` (the baseline's rank seconds), ``mpirun_devnull``
        (mpirun's own ceiling, when ``mpi`` runs), ``targets``, ``runs`` (every run,
        raw), ``summary`` (medians per launcher and sink, each against the targets) and
        ``lines_lost`` over all runs.
    """
    devnull: list[float] = []
    mpirun: list[float] = []
    mpirun_ranks: list[float] = []
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="distlab-bench-") as root:
        # one short untimed run of each kind first: the first view of a process imports
        # ipywidgets and ipykernel (0.2-0.35 s here, more than 200 k lines take), a cost
        # a notebook has paid before its first launch and no stream's
        warmup = [
            stream_once(launcher, sink, WARMUP_LINES, np, timeout, root)
            for launcher in launchers
            for sink in sinks
        ]
        for i in range(repeats):
            devnull += devnull_seconds(lines, np, timeout)
            if "mpi" in launchers:
                wall, ranks = mpirun_devnull_seconds(lines, np, timeout)
                mpirun.append(wall)
                mpirun_ranks += ranks
            for launcher in launchers:
                for sink in sinks:
                    run = stream_once(launcher, sink, lines, np, timeout, root)
                    run["repeat"] = i
                    runs.append(run)
                    log.info(
                        "%s %s %d/%d: %.0f lines/s, %d lost",
                        launcher,
                        sink,
                        i + 1,
                        repeats,
                        run["lines_per_s"],
                        run["lost"],
                    )
    base = statistics.median(devnull)
    mpirun_rate = np * lines / statistics.median(mpirun) if mpirun else None
    mpirun_rank = statistics.median(mpirun_ranks) if mpirun_ranks else None
    summary = []
    for launcher in launchers:
        target = targets_for(launcher, mpirun_rate)
        against = mpirun_rank if target["slowdown_against"] != "/dev/null" else base
        for sink in sinks:
            mine = [r for r in runs if r["launcher"] == launcher and r["sink"] == sink]
            seconds = [s for r in mine for s in r["rank_seconds"] if s is not None]
            rank_med = statistics.median(seconds) if seconds else None
            rate = statistics.median(r["lines_per_s"] for r in mine)
            slowdown = rank_med / against if rank_med is not None and against else None
            row = {
                "launcher": launcher,
                "sink": sink,
                "lines_per_s": rate,
                "target_lines_per_s": target["lines_per_s"],
                "run_s": statistics.median(r["run_s"] for r in mine),
                "rank_s": rank_med,
                "slowdown": slowdown,
                "slowdown_against": target["slowdown_against"],
                "slowdown_vs_devnull": rank_med / base if rank_med and base > 0 else None,
                "lost": sum(r["lost"] for r in mine),
                "met_lines_per_s": rate >= target["lines_per_s"],
                "met_slowdown": slowdown is not None and slowdown <= TARGET_SLOWDOWN,
            }
            taken = [r["observer_lines_per_s"] for r in mine if r.get("observer_lines_per_s")]
            if taken:
                row["observer_lines_per_s"] = statistics.median(taken)
                row["redraw_s"] = statistics.median(r["redraw_s"] for r in mine)
            summary.append(row)
    return {
        "params": {
            "np": np,
            "lines_per_rank": lines,
            "repeats": repeats,
            "command": spew_argv(lines),
            "rank_env": {"PYTHONUNBUFFERED": "1"},
            "timeout_s": timeout,
        },
        "devnull": {
            "rank_s": devnull,
            "rank_median_s": base,
            "lines_per_s": np * lines / base if base > 0 else None,
        },
        "mpirun_devnull": {
            "wall_s": mpirun,
            "lines_per_s": mpirun_rate,
            "rank_s": mpirun_ranks,
            "rank_median_s": mpirun_rank,
        },
        "targets": {
            "lines_per_s": TARGET_LINES_PER_S,
            "slowdown": TARGET_SLOWDOWN,
            "lost": 0,
            "mpi_share_of_mpirun": MPIRUN_SHARE,
        },
        "runs": runs,
        "warmup_runs": warmup,
        "summary": summary,
        "lines_lost": sum(r["lost"] for r in [*warmup, *runs]),
    }
