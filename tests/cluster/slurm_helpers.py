"""What the Slurm tests share besides the ``slurm`` fixture (tests/cluster/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path


def slurm_profile(path: Path, tasks_per_node: int = 2, nodes: int = 1, **more: object) -> Path:
    """A slurm profile for the test Slurm (``debug`` partition), ranks run by this
    interpreter."""
    extra = "".join(f", {k}: {v}" for k, v in more.items())
    path.write_text(
        f"name: slurm-test\npython: {sys.executable}\n"
        f"slurm: {{partition: debug, nodes: {nodes}, tasks_per_node: {tasks_per_node}, "
        f"time: '00:05:00'{extra}}}\n"
    )
    return path
