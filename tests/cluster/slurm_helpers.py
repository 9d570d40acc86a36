"""What the Slurm tests share besides the ``slurm`` fixture (tests/cluster/conftest.py)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Self

from lab.cluster.slurm.testbed import LocalSlurm


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


class Watch:
    """Asks the test Slurm something (``look``) every ``every`` seconds on a thread of its
    own while the ``with`` block runs: what a test sees of the queue or a node meanwhile."""

    every = 0.2

    def __init__(self, slurm: LocalSlurm) -> None:
        self.slurm = slurm
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def look(self) -> None:
        raise NotImplementedError

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.look()
            time.sleep(self.every)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


class StepWatch(Watch):
    """Every job step squeue listed while the block ran (``squeue -s``, asked every
    0.2 s): a process started through srun is one step of its job while it runs."""

    def __init__(self, slurm: LocalSlurm) -> None:
        super().__init__(slurm)
        self.seen = set[tuple[str, str]]()  # (JOB.STEP, node list)

    def look(self) -> None:
        out = self.slurm.run("squeue", "-h", "-s", "-o", "%i|%N").stdout
        for line in out.splitlines():
            step, _, nodes = line.strip().partition("|")
            self.seen.add((step, nodes))

    def of(self, job: str) -> dict[str, str]:
        """The numbered steps of ``job`` seen (srun's; not ``extern`` or ``batch``), each
        with its node list."""
        parts = {(s, n): s.partition(".") for s, n in self.seen}
        return {s: n for (s, n), (j, _, k) in parts.items() if j == job and k.isdigit()}
