"""EasyScale's figures on a GPU node, without Jupyter: ``python -m
lab.experiments.easyscale.gpu_node``.

The notebooks need a kernel; a GPU node often has only torch. This runs the same room
functions the notebooks call (Figs 9, 10, 11-13, 12) with the paper's models and image
size, and fewer steps and repeats so that one node's check fits minutes, and saves each
verdict under ``results/verdicts/easyscale`` as the notebooks do. A figure that fails is
reported and the others still run; the exit status says whether any failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence

from lab.experiments import conclude
from lab.experiments.easyscale import fig9, overhead, runs, sharing

FIGURES = ("fig9", "fig12", "fig11_13", "fig10")


def node_hardware() -> str:
    """The node's GPU as nvidia-smi names it, for the verdicts' 'where'; this machine's
    CPU (``runs.hardware``) where there is no nvidia-smi, as on a CPU profile."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return runs.hardware()
    return f"{out.splitlines()[0] if out else 'GPU'}, device types kind cuda (lab)"


def _base(ns: argparse.Namespace) -> dict:
    return {
        "model": ns.model,
        "batch_size": ns.batch_size,
        "image_size": ns.image_size,
        "dataset_size": 50_000,
    }


def run_fig9(ns: argparse.Namespace, where: str) -> None:
    base = {**_base(ns), "lr": 0.1}
    stage_runs = fig9.run_fig9(
        ns.steps, ["D0", "D1", "D1+D2"], base=base, cluster=ns.cluster, view=None
    )
    diff = fig9.differences(stage_runs, ns.steps)
    print(fig9.stage_table(diff).to_string())
    conclude(
        fig9.verdict(diff, ns.scale, where, fig9.run_dirs(stage_runs)),
        "easyscale",
        save_figure=False,
    )


def run_fig12(ns: argparse.Namespace, where: str) -> None:
    launched = overhead.run_levels(
        ["D0", "D1", "D1+D2"],
        ["fast"],
        2,
        ns.steps,
        _base(ns),
        repeats=ns.repeats,
        cluster=ns.cluster,
        view=None,
    )
    table = overhead.levels_table(launched)
    print(table.to_string())
    conclude(
        overhead.levels_verdict(
            table,
            ns.scale,
            where,
            runs=overhead.run_dirs(launched),
            per_repeat=overhead.repeat_ratios(launched),
        ),
        "easyscale",
        save_figure=False,
    )


def run_fig11_13(ns: argparse.Namespace, where: str) -> None:
    launched = overhead.run_switching(
        8, ns.steps, _base(ns), repeats=ns.repeats, device="fast", cluster=ns.cluster, view=None
    )
    numbers = overhead.switching_table(launched)
    print(numbers)
    dirs = overhead.run_dirs(launched)
    # the paper's model is the step of paper-like length here: no second workload
    cases = [overhead.step_case(overhead.case_name(f"{ns.scale} step", _base(ns)), numbers)]
    conclude(
        [
            overhead.switching_verdict(
                cases, ns.scale, where, runs=dirs, on_vs_off=numbers["switch_overhead"]
            ),
            overhead.est_time_verdict(
                numbers, ns.scale, where, runs=dirs, repeats=overhead.fig13_repeats(launched)
            ),
        ],
        "easyscale",
        save_figure=False,
    )


def run_fig10(ns: argparse.Namespace, where: str) -> None:
    launched = sharing.run_sharing(
        ns.workers, ns.steps, _base(ns), device="fast", cluster=ns.cluster, view=None
    )
    table = sharing.sharing_table(launched)
    print(table.to_string())
    conclude(
        sharing.verdict(table, ns.scale, where, runs=launched["run"]),
        "easyscale",
        save_figure=False,
    )


RUNNERS: dict[str, Callable[[argparse.Namespace, str], None]] = {
    "fig9": run_fig9,
    "fig12": run_fig12,
    "fig11_13": run_fig11_13,
    "fig10": run_fig10,
}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lab.experiments.easyscale.gpu_node", description=__doc__
    )
    p.add_argument("--cluster", default="easyscale-gpu-1")
    p.add_argument("--figures", default=",".join(FIGURES), help=", ".join(FIGURES))
    p.add_argument("--scale", default="paper", help="the scale the verdicts name")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--steps", type=int, default=10, help="mini-batches per launch")
    p.add_argument("--repeats", type=int, default=2, help="launches per point (Figs 11-13, 12)")
    p.add_argument(
        "--workers",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 2, 4, 8],
        help="Fig 10's worker counts",
    )
    ns = p.parse_args(argv)
    names = ns.figures.split(",")
    unknown = [n for n in names if n not in RUNNERS]
    if unknown:
        p.error(f"--figures: {', '.join(unknown)} not among {', '.join(FIGURES)}")
    where = node_hardware()
    failed = []
    for name in names:
        began = time.monotonic()
        print(f"== {name} on {where}", flush=True)
        try:
            RUNNERS[name](ns, where)
        except Exception:  # one figure's failure must not cost the others' measurements
            traceback.print_exc()
            failed.append(name)
        print(f"== {name}: {time.monotonic() - began:.0f} s", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
