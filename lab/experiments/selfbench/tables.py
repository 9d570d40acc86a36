"""The compact tables ``python -m lab bench`` prints: each benchmark's medians in a few
aligned lines, each figure beside its target where it has one.

Each reads only a benchmark's result dict (the JSON the command line writes; EasyScale's
also names the load average now), kept apart from running the benchmarks so a test can
check the text without measuring anything.
"""

from __future__ import annotations

import os
from typing import Any


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
        f"P3 (lab, torch + TCP), {c['model']} batch {c['batch_size']}, 2 ranks on loopback, "
        + (
            f"{c['repeats']} runs, each alternating baseline and p3 every {c['alternate']} steps"
            if c.get("alternate")
            else f"{c['repeats']} repeats of a run each"
        ),
        f"baseline {cost['baseline_img_per_s']:>9.1f} img/s   p3 {cost['p3_img_per_s']:>9.1f} img/s"
        " (medians)",
    ]
    if "slowdown_interval" in cost:
        (lo, hi), cover = cost["slowdown_interval"], cost["slowdown_interval_coverage"]
        rows.append(
            f"p3 slower by {cost['slowdown']:+.2%}, median of the runs' pairs "
            f"({cover:.0%} interval {lo:+.1%} to {hi:+.1%}; target <= "
            f"{cost['target_slowdown']:.0%}: {met}); ratio of medians "
            f"{cost['slowdown_of_medians']:+.2%}"
        )
    else:  # results written before the paired estimator
        rows.append(
            f"p3 slower by {cost['slowdown']:+.2%} (target <= {cost['target_slowdown']:.0%}: {met})"
        )
    if cost.get("slowdown_per_repeat"):
        each = ", ".join(f"{x:+.1%}" for x in cost["slowdown_per_repeat"])
        rows.append(f"p3 slower by, per run: {each}")
    if "cpu_overhead" in cost:
        rows.append(
            f"CPU s per step and rank: baseline {cost['baseline_cpu_s_per_step']:.3f}, "
            f"p3 {cost['p3_cpu_s_per_step']:.3f} (medians); p3 {cost['cpu_overhead']:+.2%} "
            "(median of the pairs)"
        )
    if cost.get("cpu_overhead_per_repeat"):
        each = ", ".join(f"{x:+.1%}" for x in cost["cpu_overhead_per_repeat"])
        rows.append(f"p3 CPU per step, per run: {each}")
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
    mpirun = data.get("mpirun_devnull", {})
    if mpirun.get("lines_per_s"):
        rank = mpirun.get("rank_median_s")
        rows.append(
            f"mpirun into /dev/null (mpirun's own ceiling): {mpirun['lines_per_s']:,.0f} lines/s"
            + (f", {rank:.3f} s per rank" if rank else "")
        )
    share = t.get("mpi_share_of_mpirun")
    rows += [
        f"targets: >= {t['lines_per_s']:,} lines/s"
        + (f" (mpi: >= {share:.0%} of mpirun's own, if lower)" if share else "")
        + f", slowdown <= {t['slowdown']:g}x (against the row's 'vs'), {t['lost']} lost; "
        "view lines/s: what the observer thread took, on its own",
        f"{'launcher':<10}{'sink':<14}{'lines/s':>11}{'':<4}{'target':>11}{'run s':>8}"
        f"{'rank s':>8}{'slowdown':>10}{'':<4}{'vs':<10}{'lost':>6}{'view lines/s':>14}",
    ]
    for r in data["summary"]:
        rank_s = f"{r['rank_s']:.3f}" if r["rank_s"] is not None else "-"
        slow = f"{r['slowdown']:.2f}x" if r["slowdown"] is not None else "-"
        view = f"{r['observer_lines_per_s']:,.0f}" if r.get("observer_lines_per_s") else "-"
        target = r.get("target_lines_per_s", t["lines_per_s"])
        against = "mpirun" if r.get("slowdown_against", "/dev/null") != "/dev/null" else "/dev/null"
        rows.append(
            f"{r['launcher']:<10}{r['sink']:<14}{r['lines_per_s']:>11,.0f}"
            f"{' ok' if r['met_lines_per_s'] else ' NO':<4}{target:>11,.0f}{r['run_s']:>8.2f}"
            f"{rank_s:>8}{slow:>10}{' ok' if r['met_slowdown'] else ' NO':<4}{against:<10}"
            f"{r['lost']:>6}{view:>14}"
        )
    return "\n".join(rows)
