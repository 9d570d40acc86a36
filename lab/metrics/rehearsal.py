"""A rehearsal: the paper-scale path run on one CPU machine, with its budget as data.

``python -m lab notebooks --scale paper --rehearse`` puts a ``Plan`` into
``$DISTLAB_REHEARSAL`` (JSON) for the kernels it starts; every layer reads it from there:
the experiments cut a point's steps and per-rank batch and sample a sweep's axes
(lab.experiments.rehearsal), the launcher side keeps its runs under
``<results>/rehearsals/runs/`` and writes the plan into each manifest, so a rehearsal is
never read as a measurement and never resumed by a measured sweep. Pure, stdlib only.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

REHEARSAL_ENV = "DISTLAB_REHEARSAL"
REHEARSALS_DIR = "rehearsals"  # under the results root: runs, verdicts, figures, notebooks
# Set in the ranks of an emulated host that declares GPUs (``emulated: {gpus: N}``): the
# GPUs are declared, not there, so device code falls back to the CPU and says so
EMULATED_GPUS_ENV = "DISTLAB_EMULATED_GPUS"


@dataclass(frozen=True)
class Plan:
    """What a rehearsal cuts, the same for every notebook, and nothing else.

    Args:
        warmup_steps: warm-up steps per point (the paper's are minutes of GPU time).
        steps: timed steps per point after the warm-up.
        batch_cap: the largest per-rank batch a rank takes (memory and time on a CPU).
        budget_s: seconds a measuring loop (rounds, repeats) may spend per notebook.
        repeats: repeats or rounds per point, where a notebook asks for more.
        max_workers: the most ranks a point may start: what this machine's memory holds
            (``memory_cap``); a paper's 32 ranks of ResNet-50 need 30-90 GB.
        started: when the rehearsal began (ISO 8601), so its records name their batch.
    """

    warmup_steps: int = 1
    steps: int = 2
    batch_cap: int = 2
    budget_s: float = 60.0
    repeats: int = 1
    max_workers: int = 4
    started: str = ""

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_env(cls, text: str) -> Plan:
        """The plan in ``text`` (JSON); unknown keys are refused, missing ones default."""
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - known:
            raise ValueError(f"${REHEARSAL_ENV}: a JSON object with keys among {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# A rank of a paper's model at 224 px and batch 4 held 0.7-0.9 GB in TensorFlow and 2.7 GB
# in torch DDP (ResNet-50, EasyScale Fig 10, where a first rehearsal of 9 ranks here was
# ended by the kernel's OOM killer)
RANK_BYTES = 3 * 2**30


def memory_cap(share: float = 0.5, floor: int = 2) -> int:
    """Ranks that ``share`` of this machine's available memory holds (``RANK_BYTES`` each),
    at least ``floor``: a rehearsal must not push other work on the machine out of memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            info = dict(line.split(":", 1) for line in fh)
        available = int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return floor
    return max(floor, int(available * share // RANK_BYTES))


def active() -> Plan | None:
    """The rehearsal this process is part of, or None for a measurement."""
    text = os.environ.get(REHEARSAL_ENV)
    return Plan.from_env(text) if text else None


def written_root(results: Path) -> Path:
    """The part of a results root this process writes runs and summaries to: the root, or
    during a rehearsal its ``rehearsals/``, apart from every measurement."""
    return results / REHEARSALS_DIR if active() else results


def runs_root(results: Path) -> Path:
    """Where run directories go under a results root: ``runs/``, or during a rehearsal
    ``rehearsals/runs/``, apart from every measured run."""
    return written_root(results) / "runs"
