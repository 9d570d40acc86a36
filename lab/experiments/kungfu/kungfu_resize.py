"""Dynamic scaling on KungFu itself (Fig 7): one ``kungfu-run -w`` job played through the
same schedule as the Horovod Elastic run (lab.experiments.kungfu.scaling).

The schedule (``"0:1,15:2,40:1,50:stop"``: seconds → workers) is handed to the workload
(``lab.bench.kungfu_elastic --timed-schedule``): rank 0 reads it off its own clock from
its first step and asks KungFu's config server for each new size (KungFu resizes from
inside the job, not through a file the launcher polls), so the host changes are rank 0's
``discovery`` records in the run directory instead of an ``events.jsonl``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.cluster.elastic_hosts import Change, parse_schedule

SYSTEM = "kungfu-elastic"
FLAGS = ("model", "batch_size", "image_size", "warmup_steps", "steps", "threads")


def timed_schedule(changes: list[Change]) -> str:
    """The workload's ``--timed-schedule`` (sizes only: kungfu-run places the peers)."""
    return ",".join(f"{c.at:g}:{'stop' if c.stop else c.slots}" for c in changes)


def kungfu_elastic_argv(point: Mapping[str, Any], schedule: str) -> list[str]:
    """``python -m lab.bench.kungfu_elastic --timed-schedule ...`` with the point's
    settings, built by the workload's Config (ParameterError naming the setting)."""
    from lab.bench.kungfu_elastic import Config

    values = {k: point[k] for k in FLAGS if point.get(k) is not None}
    return Config.from_values({**values, "timed_schedule": schedule}).command()


def run_kungfu_resizing(
    schedule: str,
    point: Mapping[str, Any],
    experiment: str,
    cluster: Any = "local",
    timeout: float = 600,
    view: Any = "auto",
) -> Any:
    """Run one KungFu elastic job through ``schedule`` on ``cluster`` (the ``kungfu``
    launcher in elastic mode, room for the schedule's largest size); return its RunResult
    (also when it failed)."""
    from lab.cluster import launch

    changes = parse_schedule(schedule)
    sizes = [c.slots for c in changes if not c.stop]
    return launch(
        kungfu_elastic_argv(point, timed_schedule(changes)),
        np=sizes[0],
        launcher="kungfu",
        options={"elastic": True, "max_np": max(sizes)},
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        cluster=cluster,
        experiment=experiment,
        params={**point, "schedule": schedule},
        timeout=timeout,
        view=view,
        check=False,
    )
