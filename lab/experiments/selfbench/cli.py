"""``python -m lab bench`` (``make bench``): the lab's own benchmarks.

- ``launch``: a lab launch against the bare launcher command for the same 2-rank job
  (median wall times, their ratio, every raw timing): lab.experiments.selfbench.launch_overhead.
- ``streaming``: ranks printing as fast as they can; lines per second through the lab into
  files and into the view's model, lines lost (must be 0), and the ranks' slowdown against
  printing to /dev/null: lab.experiments.selfbench.streaming.
- ``easyscale``: the lab's EasyScaleThreads on the smoke model: µs per context switch and
  the per-step overhead against plain training (the same mini-batches by gradient
  accumulation) and against switching off: lab.experiments.easyscale.overhead.microbench.
- ``first-step``: a 2-rank Horovod (Gloo) and KungFu job's start-up: the launch, the time to
  the ranks' headers, and their first two steps (traces and first collectives), which every
  point of a smoke sweep pays: lab.experiments.selfbench.first_step.
- ``p3``: P3's parameter server: p3 against baseline on loopback (the cost of its scheduling
  where the network has nothing to give; target at most 3% slower), and the payload bytes/s
  each host achieves against a tc-shaped link on an emulated 2-host cluster (root only):
  lab.experiments.selfbench.p3.

Results go to ``<results>/bench/launch_overhead.json``, ``streaming.json``,
``easyscale.json``, ``first_step.json`` and ``p3.json`` with the machine they were measured
on; a compact table is printed. Exit status 1 if a line was lost.
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
    p.add_argument("--stream-repeats", type=int, default=3, help="runs per setting (streaming)")
    p.add_argument("--launchers", default="local,mpi", help="comma-separated (default local,mpi)")
    p.add_argument("--est-steps", type=int, default=20, help="mini-batches per run (easyscale)")
    p.add_argument("--est-repeats", type=int, default=2, help="runs per variant (easyscale)")
    p.add_argument(
        "--first-step-repeats", type=int, default=3, help="launches per system (first-step)"
    )
    p.add_argument("--p3-repeats", type=int, default=5, help="runs per schedule (p3, loopback)")
    p.add_argument("--p3-steps", type=int, default=8, help="timed steps per run (p3, loopback)")
    p.add_argument("--p3-rate", default="200mbit", help="shaped link rate (p3, emulated)")
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
    if "p3" in which:
        from lab.cluster.emulation.spec import parse_rate

        parse_rate(args.p3_rate, "--p3-rate")
    out_dir = results_root(args.results_root) / "bench"
    lost = 0
    for name in which:
        started = time.time()
        if name == "launch":
            from lab.experiments.selfbench.launch_overhead import launch_overhead

            data = launch_overhead(launchers, repeats=args.repeats, timeout=args.timeout)
            print(launch_table(data))
        elif name == "easyscale":
            from lab.experiments.easyscale.overhead import microbench

            data = microbench(
                steps=args.est_steps,
                repeats=args.est_repeats,
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
                ),
                "link_rate": p3.link_rate(rate=args.p3_rate, timeout=args.timeout),
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


def launch_table(data: dict[str, Any]) -> str:
    """The launch-overhead medians as a few aligned lines."""
    rows = [f"launch overhead, np={data['params']['np']}, median of {data['params']['repeats']}"]
    rows.append(f"{'launcher':<10}{'bare s':>10}{'lab s':>10}{'lab/bare':>10}{'+s':>9}")
    for name, r in data["launchers"].items():
        rows.append(
            f"{name:<10}{r['bare_median_s']:>10.3f}{r['lab_median_s']:>10.3f}"
            f"{r['ratio']:>10.2f}{r['overhead_s']:>9.3f}"
        )
    return "\n".join(rows)


def first_step_table(data: dict[str, Any]) -> str:
    """The start-up medians per system as a few aligned lines."""
    p = data["params"]
    rows = [f"first step, {p['model']}, np={p['workers']}, median of {p['repeats']}"]
    rows.append(f"{'system':<14}{'launch s':>10}{'header s':>10}{'step 0 s':>10}{'step 1 s':>10}")
    for name, m in data["systems"].items():
        rows.append(
            f"{name:<14}{m['wall_s']:>10.2f}{m['to_header_s']:>10.2f}"
            f"{m['first_step_s']:>10.2f}{m['second_step_s']:>10.2f}"
        )
    return "\n".join(rows)


def easyscale_table(data: dict[str, Any]) -> str:
    """The EST micro-benchmark's medians as a few lines."""
    p = data["params"]
    return "\n".join(
        [
            f"EasyScaleThreads, {p['ests']} ESTs in one process, {p['steps']} steps x "
            f"{p['repeats']} run(s) per variant, medians",
            f"context switch (out and in)  {data['switch_us']:>9.1f} µs",
            f"gradient copy                {data['grad_copy_us']:>9.1f} µs",
            f"share of a step switching    {data['switch_share']:>9.2%}",
            f"step vs plain training       {data['overhead_vs_plain']:>+9.2%}",
            f"step vs switching off        {data['switch_overhead']:>+9.2%}",
        ]
    )


def p3_table(data: dict[str, Any]) -> str:
    """P3's scheduling cost and achieved link share as a few lines."""
    cost, link = data["scheduling_cost"], data["link_rate"]
    c = cost["params"]
    met = "met" if cost["met_target"] else "NOT met"
    rows = [
        f"P3 (lab, torch gloo), {c['model']} batch {c['batch_size']}, 2 ranks on loopback, "
        f"median of {c['repeats']}",
        f"baseline {cost['baseline_img_per_s']:>9.1f} img/s   p3 {cost['p3_img_per_s']:>9.1f} img/s"
        f"   p3 slower by {cost['slowdown']:+.2%} (target <= {cost['target_slowdown']:.0%}: {met})",
    ]
    if cost.get("slowdown_per_repeat"):
        each = ", ".join(f"{x:+.1%}" for x in cost["slowdown_per_repeat"])
        rows.append(f"p3 slower by, per repeat: {each}")
    if "cpu_overhead" in cost:
        rows.append(
            f"CPU s per step and rank: baseline {cost['baseline_cpu_s_per_step']:.3f}, "
            f"p3 {cost['p3_cpu_s_per_step']:.3f}: p3 {cost['cpu_overhead']:+.2%}"
        )
    p = link["params"]
    if "skipped" in link:
        rows.append(f"link rate on {p['cluster']}: skipped ({link['skipped']})")
        return "\n".join(rows)
    rows.append(
        f"payload bytes/s per host on {p['cluster']}, links shaped to {p['rate']} "
        f"({p['link_bytes_per_s'] / 1e6:.1f} MB/s)"
    )
    for schedule, r in link["schedules"].items():
        per_host = "  ".join(
            f"{b / 1e6:.2f} MB/s ({s:.0%})"
            for b, s in zip(r["bytes_per_s_per_host"], r["share_of_link"], strict=True)
        )
        rows.append(f"{schedule:<10}{per_host}")
    return "\n".join(rows)


def streaming_table(data: dict[str, Any]) -> str:
    """The streaming medians as a few aligned lines."""
    p, base = data["params"], data["devnull"]
    rows = [
        f"streaming, np={p['np']} x {p['lines_per_rank']} lines, median of {p['repeats']}; "
        f"/dev/null: {base['rank_median_s']:.3f} s per rank, {base['lines_per_s']:,.0f} lines/s",
        f"{'launcher':<10}{'sink':<14}{'lines/s':>11}{'run s':>8}{'rank s':>8}"
        f"{'slowdown':>10}{'lost':>6}",
    ]
    for r in data["summary"]:
        rank_s = f"{r['rank_s']:.3f}" if r["rank_s"] is not None else "-"
        slow = f"{r['slowdown']:.2f}x" if r["slowdown"] is not None else "-"
        rows.append(
            f"{r['launcher']:<10}{r['sink']:<14}{r['lines_per_s']:>11,.0f}{r['run_s']:>8.2f}"
            f"{rank_s:>8}{slow:>10}{r['lost']:>6}"
        )
    return "\n".join(rows)
