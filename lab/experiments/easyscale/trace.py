"""Job traces: read the EasyScale artifact's CSV format, write it back, or generate one.

Inside the lab a trace is a DataFrame with one row per job: ``name``, ``submit`` (s),
``workload``, ``ests`` (logical workers, the artifact's ``max_parallelism``),
``batch_size`` (per EST), ``steps`` (global steps to train), ``heterogeneous`` (may mix
device types) and ``preferred`` (device type). The artifact's CSV counts work in epochs;
``read_trace`` turns epochs into steps with each workload's samples per epoch, which the
CSV does not hold and the caller gives (or a ``samples_per_epoch`` column).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lab.errors import ParameterError
from lab.experiments.easyscale.steptimes import StepTimes

log = logging.getLogger(__name__)

ARTIFACT_COLUMNS = (
    "name",
    "time",
    "application",
    "max_parallelism",
    "batch_size",
    "epochs",
    "enable_heterogeneous_deterministic",
    "preferred_gpu",
)
TRACE_COLUMNS = (
    "name",
    "submit",
    "workload",
    "ests",
    "batch_size",
    "steps",
    "heterogeneous",
    "preferred",
)
# The eight workloads of the paper's Table 1, named as the artifact's trace names them.
TABLE1_WORKLOADS = (
    "resnet50",
    "vgg19",
    "shufflenetv2",
    "swintransformer",
    "yolov3",
    "bert",
    "electra",
    "ncf",
)


def read_trace(
    path: str | Path, samples_per_epoch: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """A trace from a CSV in the artifact's format (extra columns are ignored).

    Args:
        path: the CSV (columns ``ARTIFACT_COLUMNS``; ``samples_per_epoch`` optional).
        samples_per_epoch: samples in one epoch of each workload, where the CSV has no
            ``samples_per_epoch`` column.
    """
    raw = pd.read_csv(path, index_col=False, skipinitialspace=True)
    raw.columns = [str(c).strip() for c in raw.columns]
    missing = [c for c in ARTIFACT_COLUMNS if c not in raw.columns]
    if missing:
        raise ParameterError(
            "trace", str(path), f"a CSV with columns {', '.join(ARTIFACT_COLUMNS)}"
        )
    raw = raw.dropna(subset=list(ARTIFACT_COLUMNS))
    if "samples_per_epoch" in raw.columns:
        per_epoch = raw["samples_per_epoch"].astype(float)
    else:
        given = dict(samples_per_epoch or {})
        absent = sorted(set(raw["application"]) - set(given))
        if absent:
            raise ParameterError(
                "samples_per_epoch", absent[0], "samples per epoch of every workload of the trace"
            )
        per_epoch = raw["application"].map(given).astype(float)
    ests = raw["max_parallelism"].astype(int)
    batch = raw["batch_size"].astype(int)
    steps = np.ceil(raw["epochs"].astype(float) * per_epoch / (ests * batch)).astype(int)
    trace = pd.DataFrame(
        {
            "name": _unique(raw["name"].astype(str).tolist()),
            "submit": raw["time"].astype(float),
            "workload": raw["application"].astype(str),
            "ests": ests,
            "batch_size": batch,
            "steps": steps.clip(lower=1),
            "heterogeneous": raw["enable_heterogeneous_deterministic"].astype(float) != 0,
            "preferred": raw["preferred_gpu"].astype(str).str.strip(),
        }
    )
    return trace.sort_values(["submit"], kind="stable").reset_index(drop=True)


def _unique(names: list[str]) -> list[str]:
    """Names made unique (the artifact's trace repeats some): later copies get ``~2``, ..."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}~{seen[n]}")
        if seen[n] == 2:
            log.warning("trace names job %r more than once; later ones are renamed %s~N", n, n)
    return out


def write_trace(trace: pd.DataFrame, path: str | Path) -> Path:
    """Write a trace in the artifact's CSV format; one epoch is one global step, so the
    ``samples_per_epoch`` column makes ``read_trace`` give back the same steps."""
    out = pd.DataFrame(
        {
            "name": trace["name"],
            "time": trace["submit"],
            "application": trace["workload"],
            "max_parallelism": trace["ests"],
            "batch_size": trace["batch_size"],
            "epochs": trace["steps"],
            "enable_heterogeneous_deterministic": trace["heterogeneous"].astype(int),
            "preferred_gpu": trace["preferred"],
            "samples_per_epoch": trace["ests"] * trace["batch_size"],
        }
    )
    path = Path(path)
    out.to_csv(path, index=False)
    return path


def check_trace(
    trace: pd.DataFrame, table: StepTimes, cluster: Mapping[str, int], gang: bool = True
) -> None:
    """Refuse, before simulating, what cannot be simulated: a workload or device type the
    table lacks, a preferred type the cluster lacks, and (for a gang scheduler, which
    would wait forever) a job with more ESTs than devices of its preferred type."""
    missing = [c for c in TRACE_COLUMNS if c not in trace.columns]
    if missing:
        raise ParameterError("trace", list(trace.columns), f"columns {', '.join(TRACE_COLUMNS)}")
    if trace["name"].duplicated().any():
        dup = trace.loc[trace["name"].duplicated(), "name"].iloc[0]
        raise ParameterError("name", dup, "a name used by one job only")
    table.check(trace["workload"], [t for t, n in cluster.items() if n > 0])
    for job in trace.itertuples():
        if job.preferred not in cluster:
            raise ParameterError("preferred", job.preferred, f"a device type of {dict(cluster)}")
        if job.ests < 1 or (gang and job.ests > cluster[job.preferred]):
            raise ParameterError(
                "ests",
                job.ests,
                f"1..{cluster[job.preferred]} for {job.name} (one {job.preferred} per EST, "
                "as a gang scheduler needs)",
            )
        if job.steps < 1 or job.batch_size < 1:
            raise ParameterError("steps", job.steps, f">= 1 for {job.name}")


def generate_trace(
    table: StepTimes | pd.DataFrame,
    seed: int = 0,
    jobs: int = 68,
    span_s: float = 4800.0,
    workloads: Sequence[str] = TABLE1_WORKLOADS,
    parallelism: Sequence[int] = (1, 2, 4, 8, 16),
    preferred: Mapping[str, float] | None = None,
    solo_minutes: tuple[float, float] = (3.0, 60.0),
    p_heterogeneous: float = 0.5,
) -> pd.DataFrame:
    """A seeded trace shaped like the paper's: ``jobs`` arrivals over ``span_s`` seconds.

    A job's length is drawn as the time it would take on its preferred type with one
    device per EST (log-uniform in ``solo_minutes``) and turned into steps with the
    table's step time there, so lengths are in the cluster's own time whatever the table.
    The shares of preferred types, the length range and the share of jobs allowing mixed
    device types are the lab's assumptions (the paper does not publish them).
    """
    st = table if isinstance(table, StepTimes) else StepTimes(table)
    if jobs < 1 or span_s <= 0:
        raise ParameterError("jobs", jobs, "jobs >= 1 over span_s > 0 seconds")
    prefs = dict(preferred or {"v100": 0.6, "p100": 0.25, "t4": 0.15})
    st.check(workloads, prefs)
    rng = np.random.default_rng(seed)
    types = list(prefs)
    weights = np.array([prefs[t] for t in types], float)
    lo, hi = (math.log(m * 60.0) for m in solo_minutes)
    rows = []
    for i, submit in enumerate(np.sort(rng.uniform(0.0, span_s, jobs))):
        workload = str(rng.choice(list(workloads)))
        pref = str(rng.choice(types, p=weights / weights.sum()))
        ests = int(rng.choice(list(parallelism)))
        batch = _batch_for(st, workload, rng)
        solo = math.exp(rng.uniform(lo, hi))
        steps = max(1, round(solo / st.seconds(workload, pref, 1, batch)))
        rows.append(
            {
                "name": f"{workload}-{i}",
                "submit": round(float(submit), 1),
                "workload": workload,
                "ests": ests,
                "batch_size": batch,
                "steps": steps,
                "heterogeneous": bool(rng.random() < p_heterogeneous),
                "preferred": pref,
            }
        )
    return pd.DataFrame(rows, columns=list(TRACE_COLUMNS))


def _batch_for(st: StepTimes, workload: str, rng: np.random.Generator) -> int:
    """A per-EST batch size the table has measured for ``workload`` (32 where the table has
    no batch sizes: its step times then do not depend on it)."""
    if st.has_batch:
        rows = st.frame[st.frame["workload"] == workload]
        return int(rng.choice(sorted(rows["batch_size"].astype(int).unique())))
    return 32
