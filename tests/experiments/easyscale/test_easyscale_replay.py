"""The real replay: EST stages launched, stopped at a checkpoint and restarted on new
devices by the policy on the real clock, compared with the simulator."""

from __future__ import annotations

import math
import os

import pandas as pd
import pytest

from lab.errors import ParameterError
from lab.experiments.easyscale.replay import compare, replay
from lab.metrics.store import load_run

TYPES = {"fast": 0.8, "slow": 0.4}
# A hand-made table: what the policy decides from (the replay's mechanics are under test)
TABLE = pd.DataFrame(
    [("bn_cnn", t, k, s * k, 32) for t, s in (("fast", 0.1), ("slow", 0.12)) for k in (1, 2)],
    columns=["workload", "device_type", "ests_per_device", "step_seconds", "batch_size"],
)


def trace(rows: list[tuple]) -> pd.DataFrame:
    cols = ["name", "submit", "ests", "steps", "preferred"]
    return pd.DataFrame(rows, columns=cols).assign(
        workload="bn_cnn", batch_size=32, heterogeneous=True
    )


def test_bad_input_fails_before_anything_starts(tmp_path) -> None:
    with pytest.raises(ParameterError):
        replay(trace([("j", 0.0, 2, 5, "fast")]), TABLE, {"fast": 1, "tpu": 1}, TYPES)
    with pytest.raises(ParameterError):  # the table has no such workload
        replay(trace([("j", 0.0, 2, 5, "fast")]).assign(workload="bert"), TABLE, {"fast": 2})
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="emulated hosts need root")
def test_a_job_shrinks_by_checkpoint_and_restart_and_loses_no_step(tmp_path) -> None:
    """j1 holds both devices until j2 arrives; it then stops at a checkpoint and restarts
    on one device, and its stages' steps follow each other without gap or repeat."""
    jobs = trace([("j1", 0.0, 2, 40, "fast"), ("j2", 3.0, 1, 8, "fast")])
    cluster = {"fast": 1, "slow": 1}
    real = replay(jobs, TABLE, cluster, TYPES, interval_s=3.0, results_root=tmp_path)
    j1 = real.set_index("name").loc["j1"]
    assert j1["stages"] >= 2 and j1["steps"] == 40
    seen = []
    for run_dir in j1["run_dirs"]:
        df = load_run(run_dir)
        seen += sorted(df[(df["kind"] == "step") & (df["rank"] == 0)]["step"].astype(int))
    assert seen == list(range(40))
    assert (real["jct"] > 0).all()
    table, errors = compare(jobs, real, TABLE, cluster, 3.0, restart_s=2.0)
    assert set(table["name"]) == {"j1", "j2"} and math.isfinite(errors["mape_pct"])
