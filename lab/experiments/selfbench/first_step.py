"""How long a rank of each engine takes to reach its first step, and what a launch costs.

At smoke scale a point is a new launch whose start-up (interpreter, TensorFlow, the
engine's init, the step's first trace, the first collectives) is most of its wall time,
and a sweep pays it at every point of every round. This benchmark launches each system's
2-rank ``tiny_cnn`` job through ``run_point`` on the ``local`` cluster, as the smoke sweeps
do, alternating the systems over the repeats, and reads from each run's records:

- ``wall_s``: the launch, from ``run_point``'s call to its return;
- ``to_header_s``: from the launch's start to the latest rank's header (the interpreter,
  TensorFlow's import, the engine's init and the model);
- ``first_step_s``: the slowest rank's step 0 (its first trace and first collectives);
- ``second_step_s``: the slowest rank's step 1 (a second trace: the first batch is special).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.errors import LaunchError, NothingMeasured

SYSTEMS = ("horovod-gloo", "kungfu-sync")
EXPERIMENT = "selfbench/first_step"
POINT = {"workers": 2, "model": "tiny_cnn", "batch_size": 32, "steps": 5, "warmup_steps": 1}
MEASURES = ("wall_s", "to_header_s", "first_step_s", "second_step_s")


def step_times(run_dir: str | Path, started: float) -> dict[str, float]:
    """The start-up measures of one run (see the module docstring); ``started`` is the
    launch's start in epoch seconds."""
    from lab.metrics import load_run

    df = load_run(str(run_dir))
    headers = df[df["kind"] == "header"]
    steps = df[df["kind"] == "step"]
    if headers.empty or steps.empty:
        raise NothingMeasured(f"{run_dir}: no header or no step record")

    def slowest(step: int) -> float:
        rows = steps[steps["step"] == step]
        if rows.empty:
            raise NothingMeasured(f"{run_dir}: no rank reported step {step}")
        return float(rows["seconds"].astype(float).max())

    return {
        "to_header_s": float(headers["time"].astype(float).max()) - started,
        "first_step_s": slowest(0),
        "second_step_s": slowest(1),
    }


def first_step(
    systems: Sequence[str] = SYSTEMS,
    repeats: int = 3,
    timeout: float = 300.0,
    results_root: Any = None,
) -> dict[str, Any]:
    """Launch each system ``repeats`` times, alternating their order; every raw timing and
    the per-system medians. The runs go to a temporary results root unless one is given.

    Raises:
        LaunchError: a launch failed (its run directory says why).
    """
    from lab.experiments.points import run_point

    with tempfile.TemporaryDirectory(prefix="distlab-first-step-") as tmp:
        root = results_root or tmp
        runs = []
        for r in range(repeats):
            for system in list(systems) if r % 2 == 0 else list(systems)[::-1]:
                started = time.time()
                result = run_point(
                    {"system": system, **POINT}, EXPERIMENT, view=None, results_root=root,
                    timeout=timeout,
                )  # fmt: skip
                wall = time.time() - started
                if not result.ok:
                    raise LaunchError(f"{system}: {result.reason} ({result.run_dir})")
                runs.append(
                    {"system": system, "repeat": r, "wall_s": wall,
                     **step_times(result.run_dir, started)}
                )  # fmt: skip
    medians = {
        s: {m: statistics.median(x[m] for x in runs if x["system"] == s) for m in MEASURES}
        for s in systems
    }
    params = {"repeats": repeats, "cluster": "local", **POINT}
    return {"params": params, "systems": medians, "runs": runs}
