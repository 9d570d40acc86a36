"""The lab's own speed data set: point checks, the feature table, one real PS run, and
the verdict's row-by-row comparison."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.cmdare import labspeed
from lab.experiments.verdicts import Status
from lab.metrics.run_table import load_run
from lab.metrics.shares import past_warmup


def test_points_are_checked_before_launch() -> None:
    full = labspeed.complete({"model": "cifar_resnet8", "cpu": 0.5, "workers": 2, "ps": 1})
    assert full["batch_size"] == labspeed.SCALES["smoke"]["batch_size"]
    with pytest.raises(ParameterError, match="model"):
        labspeed.complete({"model": "nope", "cpu": 0.5, "workers": 1, "ps": 1})
    with pytest.raises(ParameterError, match="ps"):
        labspeed.complete({"model": "tiny_cnn", "cpu": 0.5, "workers": 1, "ps": 0})
    with pytest.raises(ParameterError, match="cpu"):
        labspeed.complete({"model": "tiny_cnn", "cpu": 0, "workers": 1, "ps": 1})
    with pytest.raises(ParameterError, match="point"):
        labspeed.complete({"model": "tiny_cnn"})


def test_the_cluster_has_a_host_per_worker_and_server() -> None:
    c = labspeed.emulated_cluster(0.3, workers=2, ps=2)
    assert [h.name for h in c.hosts] == ["h1", "h2", "h3", "h4"]
    assert c.emulated["cpu"] == 0.3


def test_run_tables_without_the_features_are_refused() -> None:
    runs = pd.DataFrame({"state": ["succeeded"], "model": ["tiny_cnn"], "throughput_total": [1]})
    with pytest.raises(ParameterError, match=r"missing columns \['cpu', 'workers', 'ps'"):
        labspeed.speed_table(runs)
    with pytest.raises(NothingMeasured):
        labspeed.speed_table(runs.iloc[0:0])


def test_a_run_without_a_timed_step_is_named_when_left_out(caplog) -> None:
    runs = pd.DataFrame(
        {
            "state": ["succeeded"] * 2,
            "model": ["tiny_cnn", "small_cnn"],
            **{"cpu": 0.5, "workers": 1, "ps": 1, "batch_size": 8, "image_size": 32},
            "throughput_total": [40.0, float("nan")],
            "run_dir": ["r/a", "r/b"],
        }
    )
    table = labspeed.speed_table(runs)
    assert list(table["model"]) == ["tiny_cnn"]
    assert "1 run(s) succeeded without a timed step" in caplog.text and "r/b" in caplog.text


@pytest.mark.slow
def test_flops_come_from_the_profiler() -> None:
    from lab.bench.flops import forward_flops

    small, big = forward_flops("cifar_resnet8"), forward_flops("cifar_resnet20")
    # He et al.'s ResNet-20 on CIFAR is ~41 M multiply-adds; the profiler counts 2 per MAC.
    assert 75e6 < big < 90e6 and small < big


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="emulated hosts need root")
def test_one_point_on_emulated_hosts_feeds_the_table() -> None:
    point = {"model": "tiny_cnn", "cpu": 0.5, "workers": 1, "ps": 1, "steps": 5}
    summary = labspeed.run_sweep("cmdare/test", [point], view=None)
    assert (summary["state"] == "succeeded").all()
    table = labspeed.speed_table(summary)
    assert table["speed"].iloc[0] > 0 and table["gflops"].iloc[0] > 0
    again = labspeed.speed_table(run_dirs=list(table["run_dir"]))
    assert again["speed"].iloc[0] == pytest.approx(table["speed"].iloc[0])
    # the chief waited for the hosts' shares before the timed steps, so all 5 count
    records = load_run(table["run_dir"].iloc[0])
    waits = records[records.get("name") == "shares_wait"]
    assert len(waits) == 1 and bool(waits["applied"].iloc[0])
    steps = records[records["kind"] == "step"]
    assert len(past_warmup(steps)) == 5


def test_the_sweep_runs_only_on_its_own_emulated_hosts() -> None:
    labspeed.check_cluster("emulated")
    with pytest.raises(ParameterError, match="run_dirs"):
        labspeed.check_cluster("my-gpus")


def _speed_table(noise: float, seed: int = 0) -> pd.DataFrame:
    """Step times that depend on the load per worker: only the lab's features can tell."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, model in enumerate(["a", "b", "c", "d"]):
        for workers in (1, 2, 4):
            for ps in (1, 2):
                load = 0.2 + 0.25 * i
                t = 0.05 + 0.4 * load / workers
                rows.append({"model": model, "load": load, "load_per_worker": load / workers,
                             "ps": ps, "workers": workers,
                             "step_time": t * np.exp(noise * rng.standard_normal())})  # fmt: skip
    return pd.DataFrame(rows)


def test_lab_verdict_compares_the_two_forms_model_by_model() -> None:
    clear = _speed_table(noise=0.01)
    v = labspeed.lab_verdict(labspeed.score(clear), "smoke", "t", table=clear)
    assert v.status is Status.REPRODUCED
    assert "model by model over 4 held-out models (24 rows)" in v.precision_sentence()
    # without the table only the sign of the MAPE difference is known: no interval
    assert labspeed.lab_verdict(labspeed.score(clear), "smoke", "t").precision == ""


def test_lab_verdict_is_not_resolved_when_noise_swamps_the_difference() -> None:
    noisy = _speed_table(noise=0.8, seed=0)[lambda d: d["model"].isin(["a", "b"])]
    v = labspeed.lab_verdict(labspeed.score(noisy), "smoke", "t", table=noisy)
    assert v.status is Status.NOT_RESOLVED


def test_rows_of_one_held_out_model_count_once() -> None:
    """Two held-out models whose 12 rows each favour the cluster form: taken as 12
    independent rows the difference would resolve (-112 ± 47 points); the rows of one
    model share its fit, so there are two comparisons, and they do not."""
    two = _speed_table(noise=0.01)[lambda d: d["model"].isin(["a", "d"])].reset_index(drop=True)
    v = labspeed.lab_verdict(labspeed.score(two), "smoke", "t", table=two)
    assert v.status is Status.NOT_RESOLVED
    assert "over 2 held-out models (12 rows)" in v.precision_sentence()
