"""The KungFu artifact's own commands, for nodes where KungFu is installed.

With ``KUNGFU_ARTIFACT`` naming a checkout of KungFu's ``osdi20-artifact`` branch on the
nodes (the same path on every node), the notebooks run the artifact's exact benchmark
scripts through the ``kungfu`` launcher (``kungfu-run``) and read their output as printed
(``Iter #k: X img/sec per /gpu:0``, ``Gradient Noise Scale: X``, ``Variance: X``), so the
figures come from KungFu itself rather than the lab's implementation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lab.errors import ParameterError

ARTIFACT_ENV = "KUNGFU_ARTIFACT"
MONITORING_SCRIPT = "benchmarks/monitoring/benchmark.py"
SYSTEM_SCRIPT = "benchmarks/system/benchmark_kungfu.py"
# the lab's --monitor values -> the artifact's --kf-optimizer
KF_OPTIMIZER = {"none": "sync-sgd", "noise-scale": "noise-scale", "variance": "variance"}


def artifact_root() -> str:
    root = os.environ.get(ARTIFACT_ENV, "")
    if not root:
        raise ParameterError(
            ARTIFACT_ENV, root, "the path of a KungFu osdi20-artifact checkout on the nodes"
        )
    return root.rstrip("/")


def monitoring_argv(point: Mapping[str, Any], python: str) -> list[str]:
    """KungFu Fig 8: ``benchmarks/monitoring/benchmark.py --kf-optimizer=... --interval=K``."""
    monitor = point.get("monitor", "none")
    if monitor not in KF_OPTIMIZER:
        raise ParameterError("monitor", monitor, ", ".join(KF_OPTIMIZER))
    return [
        python,
        f"{artifact_root()}/{MONITORING_SCRIPT}",
        f"--kf-optimizer={KF_OPTIMIZER[monitor]}",
        f"--model={point.get('model', 'ResNet50')}",
        f"--batch-size={point.get('batch_size', 64)}",
        f"--interval={point.get('interval', 1)}",
    ]


def benchmark_argv(mode: str) -> Any:
    """The distributed-training benchmark (seed 003): ``--kungfu=sync-sgd|async-sgd``."""

    def build(point: Mapping[str, Any], python: str) -> list[str]:
        return [
            python,
            f"{artifact_root()}/{SYSTEM_SCRIPT}",
            f"--kungfu={mode}",
            f"--model={point.get('model', 'ResNet50')}",
            f"--batch-size={point.get('batch_size', 64)}",
        ]

    return build
