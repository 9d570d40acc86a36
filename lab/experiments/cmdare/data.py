"""The CM-DARE measurement files shipped with the lab (data/, Apache-2.0; see data/ORIGIN).

Loaders return pandas DataFrames exactly as the artifact wrote them, plus a ``cnn`` column
where the notebooks need to group rows by model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.errors import ParameterError

DATA_DIR = Path(__file__).resolve().parent / "data"
SPEED_FILES = {
    "K80": "speed/0latency_k80_new.csv",
    "P100": "speed/0latency_p100_new2.csv",
    "GPU-agnostic": "speed/0latency_norm_computation.csv",
}
CHECKPOINT_FILE = "checkpoint/whole_data.csv"
LIFETIME_FILE = "lifetime_cdf_hourly.csv"
STARTUP_DIR = "startup_time"
CHIEF_DIR = "chief_rejoining"
CLUSTER_SPEED_DIRS = {1: "cluster_speed/p100", 2: "cluster_speed/p100ps2"}
CHIEF_CHECKPOINT_STEP = 4000  # exp-N rejoins N - 4000 steps after it (1.5k-3.5k published)


def data_path(relative: str) -> Path:
    """The path of a shipped file; unknown files name what is there."""
    path = DATA_DIR / relative
    if not path.is_file():
        there = sorted(str(p.relative_to(DATA_DIR)) for p in DATA_DIR.rglob("*.csv"))
        raise ParameterError("file", relative, ", ".join(there))
    return path


def sources(*relative: str) -> tuple[str, ...]:
    """The shipped files a verdict's numbers come from (its ``runs``: for the artifact's
    data the measurements are these files, not lab run directories)."""
    return tuple(str(data_path(r)) if r.endswith(".csv") else str(DATA_DIR / r) for r in relative)


def speed_table(which: str) -> Any:
    """One worker's step times per CNN: ``"K80"``, ``"P100"`` or ``"GPU-agnostic"`` (both).

    The artifact's ``Model (temp)`` names the CNN; it is copied to ``cnn``, the column the
    grouped splits hold out (in the GPU-agnostic table a CNN is one group on both GPUs).
    """
    import pandas as pd

    if which not in SPEED_FILES:
        raise ParameterError("which", which, ", ".join(SPEED_FILES))
    df = pd.read_csv(data_path(SPEED_FILES[which]))
    df["cnn"] = df["Model (temp)"].astype(str)
    return df


def checkpoint_table() -> Any:
    """Checkpoint duration vs size, 20 CNNs x 5 repeats."""
    import pandas as pd

    df = pd.read_csv(data_path(CHECKPOINT_FILE))
    df["cnn"] = df["Model"].astype(str)
    return df


def lifetime_cdf() -> Any:
    """The hour-binned lifetime CDF table: gpu, region, within_hours, cdf."""
    import pandas as pd

    return pd.read_csv(data_path(LIFETIME_FILE))


def startup_times() -> Any:
    """VM start-up seconds (provisioning, staging, booting), one row per measured VM, with
    ``kind`` (preemptible / on-demand), ``region`` (east / west), ``gpu`` and ``total``."""
    import pandas as pd

    frames = []
    for path in sorted((DATA_DIR / STARTUP_DIR).rglob("*.csv")):
        kind, region = path.parent.name.rsplit("_", 1)
        df = pd.read_csv(path)
        df["kind"] = "preemptible" if kind == "pre" else "on-demand"
        df["region"] = region
        df["gpu"] = "P100" if "p100" in path.name else "K80"
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out["total"] = out[["Provisioning", "Staging", "Booting"]].sum(axis=1)
    return out


def chief_rejoining() -> Any:
    """One row per run of the chief-rejoining experiment: ``run`` (file name), ``rejoin``
    (the step the chief rejoined at; None for the base runs without revocation),
    ``since_checkpoint`` (rejoin - 4000, the steps since the last checkpoint), ``steps``
    and ``seconds`` (wall time from the first to the last evaluation)."""
    import pandas as pd

    rows = []
    for path in sorted((DATA_DIR / CHIEF_DIR).glob("*.csv")):
        df = pd.read_csv(path)
        parts = path.stem.split("-")
        rejoin = int(parts[1]) if parts[0] == "exp" else None
        rows.append(
            {
                "run": path.name,
                "rejoin": rejoin,
                "since_checkpoint": None if rejoin is None else rejoin - CHIEF_CHECKPOINT_STEP,
                "steps": int(df["Step"].iloc[-1]),
                "seconds": float(df["Wall time"].iloc[-1] - df["Wall time"].iloc[0]),
            }
        )
    return pd.DataFrame(rows)


def cluster_speed(model: str = "res15") -> Any:
    """Global steps/s of asynchronous PS training on P100 workers (TensorBoard export), one
    row per run: ``ps`` (1 or 2), ``workers`` (1-8), ``median`` and ``mean`` steps/s."""
    import pandas as pd

    rows = []
    for ps, folder in CLUSTER_SPEED_DIRS.items():
        for path in sorted((DATA_DIR / folder).glob(f"{model}*worker*/*.csv")):
            workers = int(path.parent.name.rsplit("worker", 1)[1])
            values = pd.read_csv(path)["Value"]
            rows.append({"ps": ps, "workers": workers, "median": float(values.median()),
                         "mean": float(values.mean())})  # fmt: skip
    if not rows:
        raise ParameterError("model", model, "res15 (the shipped cluster_speed runs)")
    return pd.DataFrame(rows).sort_values(["ps", "workers"]).reset_index(drop=True)
