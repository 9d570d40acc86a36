"""The MXNet arms of P3's sweep: the paper's baseline engine itself, not the lab's PS.

``mxnet-baseline`` is MXNet 1.9.1's ``dist_sync`` KVStore as shipped (tensors of at least
``MXNET_KVSTORE_BIGARRAY_BOUND`` = 1,000,000 elements split over the servers, FIFO);
``mxnet-slicing`` sets that bound to P3's 40,000. In stock MXNet the bound only decides
which tensors are split, and a split tensor is cut into one part per server, not into
40,000-element slices as P3's fork cuts it; the arm is named for what it sets.
``p3-mxnet-fork`` is P3's own fork on GPU nodes (``lab.experiments.p3.artifact``).
Every arm runs through the ``dmlc`` launcher: a scheduler, one server per host, one
worker per host, on the same shaped links as the lab's arms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.cluster.inventory import Cluster
from lab.errors import ParameterError

BIGARRAY_BOUND = {"mxnet-baseline": None, "mxnet-slicing": 40_000, "p3-mxnet-fork": None}
ARMS = tuple(BIGARRAY_BOUND)
# A point's keys that are the workload's settings (lab.bench.p3.mxnet_workload's Config)
WORKLOAD_KEYS = ("model", "batch_size", "image_size", "steps", "warmup_steps", "lr", "seed")


def is_mxnet(schedule: Any) -> bool:
    return schedule in BIGARRAY_BOUND


def label(arm: str) -> str:
    from lab.experiments.systems import get_system

    return get_system(arm).label


def split(arms: Sequence[str], cluster: Any = None) -> tuple[list[str], dict[str, str]]:
    """The lab's arms and the MXNet arms that can run here; why each other one cannot
    (e.g. "not installed" without .venv-mxnet). A name that is neither raises
    ParameterError before anything runs."""
    from lab.bench.p3.schedule import SCHEDULES as LAB_ARMS
    from lab.experiments.systems import split_available

    for a in arms:
        if not is_mxnet(a) and a not in LAB_ARMS:
            raise ParameterError("system", a, ", ".join((*LAB_ARMS, *ARMS)))
    mx = [a for a in arms if is_mxnet(a)]
    runnable, skipped = split_available(mx, cluster)
    return [a for a in arms if not is_mxnet(a) or a in runnable], skipped


def command(point: Mapping[str, Any]) -> list[str]:
    """The ranks' argv for an MXNet point (model, batch_size, steps, warmup_steps, ...),
    built by the workload's Config: ParameterError naming the setting, before launch."""
    arm = point.get("schedule")
    if not is_mxnet(arm):
        raise ParameterError("schedule", arm, ", ".join(ARMS))
    if arm == "p3-mxnet-fork":
        from lab.experiments.systems import get_system

        build = get_system(arm).command
        assert build is not None
        return build(point, "python")
    from lab.bench.p3.mxnet_workload import Config

    values = {k: point[k] for k in WORKLOAD_KEYS if point.get(k) is not None}
    return Config.from_values(values).command()


def env(point: Mapping[str, Any], base: Mapping[str, str]) -> dict[str, str]:
    bound = BIGARRAY_BOUND[point["schedule"]]
    extra = {} if bound is None else {"MXNET_KVSTORE_BIGARRAY_BOUND": str(bound)}
    return {**base, **extra}


def run_point(
    point: Mapping[str, Any], experiment: str, cluster: Cluster, view: Any, timeout: float,
    base_env: Mapping[str, str], root_port: int | None = None,
) -> Any:  # fmt: skip
    """Launch one MXNet point on ``cluster`` (already shaped and cut to the point's hosts);
    the scheduler takes a free port of its own unless ``root_port`` names one."""
    from lab.cluster import launch

    return launch(
        command(point),
        np=len(cluster.hosts),
        launcher="dmlc",
        cluster=cluster,
        experiment=experiment,
        env=env(point, base_env),
        options={} if root_port is None else {"root_port": root_port},
        params=dict(point),
        view=view,
        timeout=timeout,
        check=False,
    )
