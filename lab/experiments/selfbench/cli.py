"""``python -m lab bench`` (``make bench``): the lab's own benchmarks.

- ``launch``: a lab launch against the bare launcher command for the same 2-rank job
  (median wall times, their ratio, every raw timing; target: at most 50 ms added):
  lab.experiments.selfbench.launch_overhead.
- ``streaming``: ranks printing as fast as they can; lines per second through the lab into
  files and into the view's model (target >= 1 M), lines lost (must be 0), the ranks'
  slowdown against printing to /dev/null (target <= 3x), what mpirun alone passes on, and
  the lines per second the view's observer takes on its own thread:
  lab.experiments.selfbench.streaming.
- ``easyscale``: the lab's EasyScaleThreads on the smoke model: µs per context switch and
  the per-step overhead against plain training (the same mini-batches by gradient
  accumulation) and against switching off; then the switch's cost and share in a step of
  paper-like length (the smoke model on a bigger input, ~100 ms of CPU an EST mini-batch;
  target: at most 1% of it), and Fig 11's verdict, which says which step it compared
  with: lab.experiments.easyscale.overhead.microbench.
- ``first-step``: a 2-rank Horovod (Gloo) and KungFu job's start-up: the launch, the time to
  the ranks' headers, and their first two steps (traces and first collectives), which every
  point of a smoke sweep pays: lab.experiments.selfbench.first_step.
- ``p3``: P3's parameter server: p3 against baseline on loopback (the cost of its scheduling
  where the network has nothing to give; target: the median over runs of the paired slowdown at most
  3% slower), and the payload bytes/s
  each host achieves against a tc-shaped link on an emulated 2-host cluster (root only):
  lab.experiments.selfbench.p3.

Results go to ``<results>/bench/launch_overhead.json``, ``streaming.json``,
``easyscale.json``, ``first_step.json`` and ``p3.json`` with the machine they were measured
on and one core's speed before and after (lab.metrics.machine.cpu_speed: timings on a shared
machine move with it); a compact table is printed, each figure beside its target where it
has one. ``python -m lab bench streaming`` runs one benchmark. Exit status 1 if a line was
lost.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from lab.experiments.selfbench.tables import (
    easyscale_table,
    first_step_table,
    launch_table,
    p3_table,
    streaming_table,
)

SPEED_UNIT = "M loops/s of one core, lab.metrics.machine.cpu_speed"
BENCHMARKS = ("launch", "streaming", "easyscale", "first-step", "p3")
FILES = {
    "launch": "launch_overhead.json",
    "streaming": "streaming.json",
    "easyscale": "easyscale.json",
    "first-step": "first_step.json",
    "p3": "p3.json",
}


def add_parser(subparsers: Any) -> None:
    """Add the ``bench`` subcommand to ``python -m lab``'s parser."""
    p = subparsers.add_parser(
        "bench",
        help="benchmark the lab itself: launch overhead, streaming capacity, EST switching, "
        "engines' first steps, P3's parameter server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "which", nargs="*", metavar="BENCHMARK", help=f"{', '.join(BENCHMARKS)} (default all)"
    )
    p.add_argument("--repeats", type=int, default=5, help="timed launches per side (launch)")
    p.add_argument("--lines", type=int, default=200_000, help="lines per rank (streaming)")
    p.add_argument("--stream-repeats", type=int, default=5, help="runs per setting (streaming)")
    p.add_argument("--launchers", default="local,mpi", help="comma-separated (default local,mpi)")
    p.add_argument("--est-steps", type=int, default=20, help="mini-batches per run (easyscale)")
    p.add_argument("--est-repeats", type=int, default=2, help="runs per variant (easyscale)")
    p.add_argument(
        "--est-long-steps",
        type=int,
        default=6,
        help="mini-batches per run of the paper-like step (easyscale; 0: not run)",
    )
    p.add_argument(
        "--first-step-repeats", type=int, default=3, help="launches per system (first-step)"
    )
    p.add_argument(
        "--p3-repeats",
        type=int,
        default=7,
        help="runs, each alternating both schedules (p3, loopback)",
    )
    # 8 timed steps (~1 s) read -1.8 ... +10.8 % per repeat on a quiet machine: one stall of
    # the other rank's core moved a repeat by several per cent. 24 steps (~1 s since the
    # messages go over TCP) still read -10 ... +31 %: within a run, steps went from ~78 to
    # ~100 ms for seconds at a time. 48 steps average more of such a burst
    p.add_argument(
        "--p3-steps",
        type=int,
        default=64,
        help="timed steps per run, both schedules (p3, loopback)",
    )
    p.add_argument("--p3-rate", default="200mbit", help="shaped link rate (p3, emulated)")
    p.add_argument(
        "--p3-profile",
        action="store_true",
        help="every rank writes a CPU profile of its threads under <results>/bench/p3-profile/",
    )
    p.add_argument(
        "--p3-no-link", action="store_true", help="skip the emulated link (p3, loopback only)"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds any one run may take")
    p.add_argument("--results", dest="results_root", help="results root (default: results/)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Run the chosen benchmarks, write their JSON, print the tables."""
    from lab.errors import ParameterError
    from lab.metrics.layout import results_root

    which = list(dict.fromkeys(args.which or BENCHMARKS))
    for name in which:
        if name not in BENCHMARKS:
            raise ParameterError("benchmark", name, ", ".join(BENCHMARKS))
    launchers = [name.strip() for name in args.launchers.split(",") if name.strip()]
    counts = (
        ("--repeats", args.repeats),
        ("--stream-repeats", args.stream_repeats),
        ("--est-repeats", args.est_repeats),
        ("--first-step-repeats", args.first_step_repeats),
        ("--p3-repeats", args.p3_repeats),
        ("--p3-steps", args.p3_steps),
    )
    for name, value in counts:
        if value < 1:
            raise ParameterError(name, value, "an integer >= 1")
    if args.lines < 1:
        raise ParameterError("--lines", args.lines, "an integer >= 1")
    if args.est_steps < 2:
        raise ParameterError(
            "--est-steps", args.est_steps, "an integer >= 2 (the first is not timed)"
        )
    if args.est_long_steps == 1 or args.est_long_steps < 0:
        raise ParameterError(
            "--est-long-steps", args.est_long_steps, "0 or an integer >= 2 (the first is not timed)"
        )
    if "p3" in which:
        from lab.cluster.emulation.spec import parse_rate

        parse_rate(args.p3_rate, "--p3-rate")
    from lab.metrics.machine import cpu_speed

    out_dir = results_root(args.results_root) / "bench"
    lost = 0
    for name in which:
        started = time.time()
        speed = cpu_speed()
        if name == "launch":
            from lab.experiments.selfbench.launch_overhead import launch_overhead

            data = launch_overhead(launchers, repeats=args.repeats, timeout=args.timeout)
            print(launch_table(data))
        elif name == "easyscale":
            from lab.experiments.easyscale.overhead import microbench

            data = microbench(
                steps=args.est_steps,
                repeats=args.est_repeats,
                long_steps=args.est_long_steps,
                results_root=results_root(args.results_root),
            )
            print(easyscale_table(data))
        elif name == "first-step":
            from lab.experiments.selfbench.first_step import first_step

            data = first_step(repeats=args.first_step_repeats, timeout=args.timeout)
            print(first_step_table(data))
        elif name == "p3":
            from lab.experiments.selfbench import p3

            data = {
                "scheduling_cost": p3.scheduling_cost(
                    repeats=args.p3_repeats,
                    steps=args.p3_steps,
                    timeout=args.timeout,
                    results_root=results_root(args.results_root),
                    profile=args.p3_profile,
                ),
                "link_rate": (
                    {
                        "params": {"rate": args.p3_rate, "cluster": "emulated-2"},
                        "skipped": "--p3-no-link",
                    }
                    if args.p3_no_link
                    else p3.link_rate(rate=args.p3_rate, timeout=args.timeout)
                ),
            }
            print(p3_table(data))
        else:
            from lab.experiments.selfbench.streaming import streaming

            data = streaming(
                lines=args.lines,
                repeats=args.stream_repeats,
                launchers=launchers,
                timeout=args.timeout,
            )
            print(streaming_table(data))
            lost += data["lines_lost"]
        data["core_speed"] = {"before": speed, "after": cpu_speed(), "unit": SPEED_UNIT}
        print(
            f"core speed {speed:.1f} before, {data['core_speed']['after']:.1f} after ({SPEED_UNIT})"
        )
        path = write_result(out_dir / FILES[name], data, started)
        print(f"wrote {path}", flush=True)
    if lost:
        print(f"error: {lost} line(s) lost on the way into the rank logs", file=sys.stderr)
        return 1
    return 0


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on (they mean little without it)."""
    from lab.cluster.rundir import git_state, package_versions

    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "load_average": load,
        "python": platform.python_version(),
        "executable": sys.executable,
        "versions": package_versions(),
        "git": git_state(),
    }


def write_result(path: Path, data: dict[str, Any], started: float) -> Path:
    """Write one benchmark's JSON (atomically) with when and where it was measured.

    ``path`` always holds the latest result; a copy named with the start time
    (``<name>-YYYYmmdd-HHMMSS.json``) keeps every earlier one, so nothing is lost.
    """
    from lab.cluster.rundir import timestamp

    doc = {
        "benchmark": path.stem,
        "started": timestamp(started),
        "ended": timestamp(time.time()),
        "machine": machine_info(),
        **data,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    kept = path.with_name(f"{path.stem}-{stamp}{path.suffix}")
    if not kept.exists():
        os.link(tmp, kept)
    os.replace(tmp, path)
    return path
