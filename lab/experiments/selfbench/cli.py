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
  where the network has nothing to give; target at most 3% slower), and the payload bytes/s
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
    p.add_argument("--stream-repeats", type=int, default=3, help="runs per setting (streaming)")
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
    p.add_argument("--p3-repeats", type=int, default=5, help="runs per schedule (p3, loopback)")
    p.add_argument("--p3-steps", type=int, default=8, help="timed steps per run (p3, loopback)")
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


def launch_table(data: dict[str, Any]) -> str:
    """The launch-overhead medians as a few aligned lines."""
    target = data.get("target_overhead_s")
    rows = [
        f"launch overhead, np={data['params']['np']}, median of {data['params']['repeats']}"
        + (f"; target +s <= {target:.3f}" if target is not None else "")
    ]
    rows.append(f"{'launcher':<10}{'bare s':>10}{'lab s':>10}{'lab/bare':>10}{'+s':>9}")
    for name, r in data["launchers"].items():
        met = "" if target is None else ("  ok" if r["overhead_s"] <= target else "  MISSED")
        rows.append(
            f"{name:<10}{r['bare_median_s']:>10.3f}{r['lab_median_s']:>10.3f}"
            f"{r['ratio']:>10.2f}{r['overhead_s']:>9.3f}{met}"
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
    """The EST micro-benchmark's medians as a few lines: the smoke step, the step of
    paper-like length with the share against its target, and Fig 11's verdict."""
    p = data["params"]
    rows = [
        f"EasyScaleThreads, {p['ests']} ESTs in one process, medians; {_load()}",
        f"smoke step {_workload(p)}, "
        f"{p['steps']} steps x {p['repeats']} run(s) per variant: {_est_step(data)}",
        f"  context switch (out and in)  {data['switch_us']:>9.1f} µs",
        f"  gradient copy                {data['grad_copy_us']:>9.1f} µs",
        f"  share of a step switching    {data['switch_share']:>9.2%}   (a step shorter "
        "than the paper's: no target)",
        f"  step vs plain training       {data['overhead_vs_plain']:>+9.2%}",
        f"  step vs switching off        {data['switch_overhead']:>+9.2%}",
    ]
    fig11 = data.get("fig11", {})
    long = data.get("long_step")
    if long:
        q = long["params"]
        target = fig11.get("target_share", 0.01)
        met = "ok" if long["switch_share"] <= target else "MISSED"
        each = ", ".join(f"{x:.2%}" for x in long.get("switch_share_runs", []))
        rows += [
            f"paper-like step {_workload(q)}, "
            f"{q['steps']} steps x {q['repeats']} run(s): {_est_step(long)}",
            f"  context switch (out and in)  {long['switch_us']:>9.1f} µs",
            f"  share of a step switching    {long['switch_share']:>9.2%}   target <= "
            f"{target:.0%}: {met}" + (f" (per run: {each})" if each else ""),
        ]
    if fig11:
        compared = fig11.get("compared_with") or "no step of comparable length"
        rows.append(f"Fig 11: {fig11['status']}, compared with {compared}")
    return "\n".join(rows)


def _workload(params: dict[str, Any]) -> str:
    model = params.get("model", "bn_cnn")
    return f"({model}, {params.get('image_size', '?')} px, batch {params.get('batch_size', '?')})"


def _load() -> str:
    try:
        return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def _est_step(numbers: dict[str, Any]) -> str:
    cpu = numbers.get("est_step_cpu_s")
    wall = f"{numbers['est_step_s'] * 1e3:.1f} ms wall"
    if cpu is None:
        return f"an EST mini-batch {wall}"
    return f"an EST mini-batch {cpu * 1e3:.1f} ms CPU, {wall}"


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
    if cost.get("cpu_overhead_per_repeat"):
        each = ", ".join(f"{x:+.1%}" for x in cost["cpu_overhead_per_repeat"])
        rows.append(f"p3 CPU per step, per repeat: {each}")
    if "load_1min" in cost:
        (lo, hi), (s0, s1) = cost["load_1min"], cost["cpu_speed"]
        rows.append(f"load average (1 min) {lo:.1f} to {hi:.1f}, core speed {s0:.1f} to {s1:.1f}")
    for schedule, prof in cost.get("profile_top", {}).items():
        rows.append(f"{schedule} profile: {prof['cpu_s_per_step']:.3f} CPU s per step and rank")
        for f in prof["top"][:8]:
            rows.append(f"  {f['own_s_per_step'] * 1e3:8.2f} ms  {f['calls']:>7}  {f['function']}")
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
    """The streaming medians as a few aligned lines, each against its target."""
    p, base, t = data["params"], data["devnull"], data["targets"]
    rows = [
        f"streaming, np={p['np']} x {p['lines_per_rank']} lines, median of {p['repeats']}; "
        f"/dev/null: {base['rank_median_s']:.3f} s per rank, {base['lines_per_s']:,.0f} lines/s",
    ]
    ceiling = data.get("mpirun_devnull", {}).get("lines_per_s")
    if ceiling:
        rows.append(f"mpirun into /dev/null (mpirun's own ceiling): {ceiling:,.0f} lines/s")
    rows += [
        f"targets: >= {t['lines_per_s']:,} lines/s, slowdown <= {t['slowdown']:g}x, "
        f"{t['lost']} lost; view lines/s: what the observer thread took, on its own",
        f"{'launcher':<10}{'sink':<14}{'lines/s':>11}{'':<4}{'run s':>8}{'rank s':>8}"
        f"{'slowdown':>10}{'':<4}{'lost':>6}{'view lines/s':>14}",
    ]
    for r in data["summary"]:
        rank_s = f"{r['rank_s']:.3f}" if r["rank_s"] is not None else "-"
        slow = f"{r['slowdown']:.2f}x" if r["slowdown"] is not None else "-"
        view = f"{r['observer_lines_per_s']:,.0f}" if r.get("observer_lines_per_s") else "-"
        rows.append(
            f"{r['launcher']:<10}{r['sink']:<14}{r['lines_per_s']:>11,.0f}"
            f"{' ok' if r['met_lines_per_s'] else ' NO':<4}{r['run_s']:>8.2f}{rank_s:>8}"
            f"{slow:>10}{' ok' if r['met_slowdown'] else ' NO':<4}{r['lost']:>6}{view:>14}"
        )
    return "\n".join(rows)
