"""EasyScale's paper-scale step-time table (Figs 14-15): real EST runs of the paper's
Table 1 workloads that the lab can train, one per device type of the cluster.

The trace simulator needs how fast each workload runs on each GPU type. At paper scale
the lab measures it with ``lab.bench.easyscale`` itself: one EST on one device per (workload,
device type), at the paper's input size. The trace names Table 1's workloads as the
artifact does, the lab's models by torchvision's names (``TRACE_WORKLOADS`` maps one to the
other); a device type stands for the GPU model its profile declares (``gpu: V100`` ->
``v100``, the simulator's names). Table 1's other workloads (YOLOv3, BERT, ELECTRA, NCF)
have no lab model, so a paper-scale trace draws its jobs from the measured four.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.errors import ParameterError

# lab.bench.vision_models name -> the trace's (Table 1's) name
TRACE_WORKLOADS = {
    "resnet50": "resnet50",
    "vgg19": "vgg19",
    "shufflenet_v2": "shufflenetv2",
    "swin_t": "swintransformer",
}
EXPERIMENT = "easyscale/fig14_15"
# One EST run's settings at paper scale (a rehearsal cuts steps and batch, and says so):
# the first step is a warm-up the table leaves out (throughput_table's ``warmup``)
PAPER_RUN = {"steps": 6, "batch_size": 32, "image_size": 224}


def device_names(cluster: Any) -> dict[str, str]:
    """Each device type of ``cluster`` by the name the simulator gives its GPU model
    (``fast`` declaring ``gpu: V100`` -> ``v100``); a type without one keeps its name."""
    from lab.cluster.inventory import as_cluster

    types = as_cluster(cluster).device_types
    return {dt.name: (dt.gpu or dt.name).lower() for dt in types}


def measure(
    cluster: Any,
    models: Sequence[str] = tuple(TRACE_WORKLOADS),
    settings: Mapping[str, Any] | None = None,
    timeout: float = 1800.0,
    view: Any = "auto",
) -> list[str]:
    """One EST run per (model, device type of ``cluster``); their run directories.

    Raises:
        ParameterError: the cluster declares no device types, or a model is unknown
            (before anything starts).
        RanksFailed: a run failed.
    """
    from lab.bench.easyscale.config import Config
    from lab.experiments import rehearsal
    from lab.experiments.easyscale.runs import launch_stage

    types = list(device_names(cluster))
    if not types:
        raise ParameterError("cluster", str(cluster), "a profile with device_types (one per GPU)")
    unknown = [m for m in models if m not in TRACE_WORKLOADS]
    if unknown:
        raise ParameterError("models", unknown, ", ".join(TRACE_WORKLOADS))
    run = rehearsal.apply({**PAPER_RUN, **(settings or {})}, "paper", floors={"steps": 2})
    configs = [Config(ests=1, model=m, **run).checked() for m in models]
    return [
        str(launch_stage(cfg, cluster, (name,), EXPERIMENT, timeout, view=view).run_dir)
        for cfg in configs
        for name in types
    ]


def trace_workloads(table: Any) -> list[str]:
    """The trace's workloads the table measured, in Table 1's order."""
    from lab.experiments.easyscale.trace import TABLE1_WORKLOADS

    have = set(table["workload"])
    return [w for w in TABLE1_WORKLOADS if w in have]


def renamed(table: Any, names: Mapping[str, str]) -> Any:
    """``table`` with its workloads under the trace's names and its device types under
    ``names`` (``device_names``)."""
    out = table.copy()
    out["workload"] = out["workload"].map(lambda m: TRACE_WORKLOADS.get(m, m))
    out["device_type"] = out["device_type"].map(lambda d: names.get(d, d))
    return out
