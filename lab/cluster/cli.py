"""``python -m lab launch``: launch() from a terminal.

Every line of every rank is printed as ``[rank] text`` (stdout lines on stdout, stderr
lines on stderr), the run directory is the last line on stdout, and the exit status is the
run's (see lab.cluster.supervisor: 124 timed out, 130 interrupted).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from lab.cluster.launchers.base import Line, Lines, RunControl
from lab.errors import LabError, ParameterError
from lab.metrics.tags import strip_ansi

EXIT_USAGE = 2


def add_parser(subparsers: Any) -> None:
    """Add the ``launch`` subcommand to ``python -m lab``'s parser."""
    p = subparsers.add_parser(
        "launch",
        help="run a command as N ranks and keep its run directory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="python -m lab launch [--launcher NAME] -np N [-H HOSTS | --cluster PROFILE | "
        "--hostfile F] [options] -- COMMAND...",
    )
    p.add_argument("--launcher", default="local", help="launcher name (default: local)")
    p.add_argument("-np", "--np", dest="np", type=int, default=1, help="number of ranks")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-H", "--hosts", help="hosts as 'h1:4,h2:4'")
    where.add_argument("--cluster", help="cluster profile name or .yaml path")
    where.add_argument("--hostfile", help="OpenMPI/MPICH/KungFu hostfile")
    p.add_argument("--timeout", type=float, help="seconds until the run is ended (exit 124)")
    p.add_argument("--experiment", default="adhoc", help="group under results/runs/")
    p.add_argument("--results", dest="results_root", help="results root (default: results/)")
    p.add_argument("--grace", type=float, default=5.0, help="seconds from SIGTERM to SIGKILL")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V|K",
        help="rank environment; a bare K passes this shell's value (kept off command lines)",
    )
    p.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="a variable whose value is secret (besides *TOKEN*, *SECRET*, *PASSWORD*, *KEY*)",
    )
    p.add_argument(
        "--option", action="append", default=[], metavar="K=V", help="launcher option (K=JSON)"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the rank's command")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Run the launch the parsed ``args`` describe; returns the process exit status."""
    from lab.cluster.launching import launch

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    tee = TerminalTee()
    try:
        if not command:
            raise ParameterError("command", "", "a command after '--', e.g. -- python x.py")
        result = launch(
            command,
            np=args.np,
            launcher=args.launcher,
            hosts=args.hosts,
            cluster=args.cluster,
            hostfile=args.hostfile,
            timeout=args.timeout,
            experiment=args.experiment,
            env=_env(args.env),
            options=_pairs(args.option, "--option", parse_values=True),
            view=tee,
            results_root=args.results_root,
            check=False,
            grace=args.grace,
            secret_env=tuple(args.secret),
        )
    except KeyboardInterrupt:
        if tee.run_dir:
            print(tee.run_dir, flush=True)
        return 130
    except LabError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    if not result.ok:
        from lab.errors import RanksFailed

        report = RanksFailed(list(result.failures), str(result.run_dir), result.reason)
        print(report, file=sys.stderr, flush=True)
    print(result.run_dir, flush=True)
    return result.exit_code


def _env(items: Sequence[str]) -> dict[str, Any]:
    """``--env K=V`` pairs; a bare ``--env K`` takes K's value from this process's
    environment, so a secret need not be typed on a command line (``ps`` shows those)."""
    import os

    out: dict[str, Any] = {}
    for item in items:
        if "=" in item or not item:
            out.update(_pairs([item], "--env", parse_values=False))
        elif item in os.environ:
            out[item] = os.environ[item]
        else:
            raise ParameterError("--env", item, "K=V, or the name of a variable that is set")
    return out


def _pairs(items: Sequence[str], flag: str, parse_values: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParameterError(flag, item, "K=V")
        if parse_values:
            try:
                out[key] = json.loads(value)
            except json.JSONDecodeError:
                out[key] = value
        else:
            out[key] = value
    return out


class TerminalTee:
    """A RunObserver that prints each line tagged with its rank, as mpirun's --tag-output.

    Colour and cursor codes (kungfu-run colours its own ``[E]`` and tags) are taken out of
    what the terminal shows; the rank logs keep every byte as printed."""

    def __init__(self) -> None:
        self.run_dir: str | None = None
        self._lock = threading.Lock()

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        self.run_dir = run_dir

    def on_line(self, line: Line) -> None:
        tag = "launcher" if line.rank is None else str(line.rank)
        out = sys.stderr if line.stream == "stderr" else sys.stdout
        with self._lock:
            out.write(f"[{tag}] {strip_ansi(line.text)}\n")
            out.flush()

    def on_lines(self, block: Lines) -> None:
        tag = "launcher" if block.rank is None else str(block.rank)
        out = sys.stderr if block.stream == "stderr" else sys.stdout
        text = strip_ansi(block.text) if "\x1b" in block.text else block.text
        tagged = "".join(f"[{tag}] {t}\n" for t in text.split("\n")[:-1])
        with self._lock:
            out.write(tagged)
            out.flush()

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        return None
