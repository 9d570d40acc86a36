"""The KungFu artifact's own commands, run as they are through ``kungfu-run``.

The scripts are KungFu's benchmarks (``benchmarks/`` of its source): ``KUNGFU_ARTIFACT``
names a directory holding them on the nodes (the same path on every node; e.g. a
checkout of KungFu's ``osdi20-artifact`` branch), else the copy ``make setup`` keeps in
the cache (``env/build_kungfu_artifact.sh``: ``~/.cache/distlab/kungfu-artifact/b1e1768``,
the commit the lab builds). They are TF1 graph-mode programs, so they run under
``lab.bench.tf1_compat`` (``tensorflow.compat.v1`` standing in for ``tensorflow``);
their output is read as printed (``Iter #k: X img/sec per CPU``, ``Gradient Noise Scale:
X``, ``Variance: X``), so the figures come from KungFu itself rather than the lab's
implementation. Their models are Keras applications on 224×224 images (``ResNet50``,
``MobileNetV2``, ...), not the lab's small CNNs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.errors import ParameterError

ARTIFACT_ENV = "KUNGFU_ARTIFACT"
COMMIT = "b1e1768"  # env/build_kungfu.sh's pinned commit, whose benchmarks setup keeps
MONITORING_SCRIPT = "benchmarks/monitoring/benchmark.py"
SYSTEM_SCRIPT = "benchmarks/system/benchmark_kungfu.py"
# the lab's --monitor values -> the artifact's --kf-optimizer
KF_OPTIMIZER = {"none": "sync-sgd", "noise-scale": "noise-scale", "variance": "variance"}


def default_root() -> Path:
    """Where ``make setup`` keeps the benchmarks (``$DISTLAB_CACHE`` or ~/.cache/distlab)."""
    cache = os.environ.get("DISTLAB_CACHE") or os.path.join("~", ".cache", "distlab")
    return Path(cache).expanduser() / "kungfu-artifact" / COMMIT


def missing() -> str | None:
    """Why the artifact's scripts cannot be run here, or None when they can."""
    if os.environ.get(ARTIFACT_ENV):
        return None  # a path on the nodes: not checked from here
    if (default_root() / MONITORING_SCRIPT).is_file():
        return None
    return (
        f"{ARTIFACT_ENV} is not set and make setup kept no KungFu benchmarks in "
        f"{default_root()} (env/build_kungfu_artifact.sh)"
    )


def artifact_root() -> str:
    root = os.environ.get(ARTIFACT_ENV, "")
    if not root and (default_root() / MONITORING_SCRIPT).is_file():
        root = str(default_root())
    if not root:
        raise ParameterError(
            ARTIFACT_ENV, root, "the path of KungFu's benchmarks (an osdi20-artifact checkout)"
        )
    return root.rstrip("/")


def _steps(point: Mapping[str, Any]) -> list[str]:
    """The point's warm-up and timed steps as the scripts' flags (one batch an iteration,
    so each ``Iter`` line is one step); none when the point does not say."""
    if point.get("steps") is None:
        return []
    return [
        f"--num-warmup-batches={int(point.get('warmup_steps') or 0)}",
        "--num-batches-per-iter=1",
        f"--num-iters={int(point['steps'])}",
    ]


def _script(python: str, script: str) -> list[str]:
    return [python, "-m", "lab.bench.tf1_compat", f"{artifact_root()}/{script}"]


def monitoring_argv(point: Mapping[str, Any], python: str) -> list[str]:
    """KungFu Fig 8: ``benchmarks/monitoring/benchmark.py --kf-optimizer=... --interval=K``."""
    monitor = point.get("monitor", "none")
    if monitor not in KF_OPTIMIZER:
        raise ParameterError("monitor", monitor, ", ".join(KF_OPTIMIZER))
    return [
        *_script(python, MONITORING_SCRIPT),
        f"--kf-optimizer={KF_OPTIMIZER[monitor]}",
        f"--model={point.get('model', 'ResNet50')}",
        f"--batch-size={point.get('batch_size', 64)}",
        f"--interval={point.get('interval', 1)}",
        *_steps(point),
    ]


def benchmark_argv(mode: str) -> Any:
    """The distributed-training benchmark (seed 003): ``--kf-optimizer=sync-sgd|async-sgd``."""

    def build(point: Mapping[str, Any], python: str) -> list[str]:
        return [
            *_script(python, SYSTEM_SCRIPT),
            f"--kf-optimizer={mode}",
            f"--model={point.get('model', 'ResNet50')}",
            f"--batch-size={point.get('batch_size', 64)}",
            *_steps(point),
        ]

    return build
