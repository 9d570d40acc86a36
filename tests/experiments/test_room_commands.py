"""The rooms' rank commands come from their workload's Config: what a rank parses back is
the config the lab built, and a bad setting is refused in the lab, naming it, before any
run directory exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.bench.flags import parse_command
from lab.errors import ParameterError
from lab.experiments.cmdare import bottleneck, labspeed, revocation
from lab.experiments.easyscale import standin_table
from lab.experiments.kungfu import kungfu_resize, scaling
from lab.experiments.p3 import mxnet_arms, sweep

SPEED = {"model": "resnet50", "cpu": 0.5, "workers": 2, "ps": 1}
ELASTIC = {"model": "tiny_cnn", "batch_size": 8, "warmup_steps": 0, "steps": 100, "threads": 1}


def test_every_rooms_command_parses_back_to_the_config_it_was_built_from(tmp_path) -> None:
    speed = labspeed.workload_config(labspeed.complete(SPEED))
    assert (speed.backend, speed.model, speed.batch_size) == ("ps", "ResNet50", 16)
    assert bottleneck.workload_config("smoke").model == "small_cnn"
    by_kind = {
        p["kind"]: revocation.workload_config(p, str(tmp_path))
        for p in revocation.points(["warm"], [25], ["tiny_cnn"])
    }
    assert by_kind["worker"].checkpoint_dir == "" and by_kind["worker"].steps == 560
    assert (by_kind["chief"].checkpoint_every, by_kind["chief"].chief_grace) == (250, 60.0)
    assert (by_kind["checkpoint"].checkpoint_every, by_kind["checkpoint"].batch_size) == (1, 8)
    standin = standin_table.points(
        standin_table.SMOKE_WORKLOADS, standin_table.SMOKE_DEVICES, [1, 2]
    )
    stand = standin_table.workload_config(standin[0])
    assert stand.micro_batches == (1, 2) and stand.allocator == "keep"
    p3 = sweep.config_of({"schedule": "slicing", "model": "vgg_like", "servers": 2}, 2)
    configs = [speed, bottleneck.workload_config("smoke"), *by_kind.values(), stand, p3]
    for cfg in configs:
        assert parse_command(cfg.command("python")) == cfg
    kungfu = parse_command(kungfu_resize.kungfu_elastic_argv(ELASTIC, "0:1,2:2,5:stop"))
    assert kungfu is not None and (kungfu.timed_schedule, kungfu.threads) == ("0:1,2:2,5:stop", 1)
    horovod = parse_command(scaling.elastic_argv(ELASTIC, tmp_path / "stop", "python"))
    assert horovod is not None and horovod.stop_file == str(tmp_path / "stop")
    mxnet = parse_command(mxnet_arms.command({"schedule": "mxnet-slicing", "batch_size": 4}))
    assert mxnet is not None and (mxnet.model, mxnet.batch_size) == ("vgg_like", 4)


def _standin_point() -> dict:
    return standin_table.points(standin_table.SMOKE_WORKLOADS, standin_table.SMOKE_DEVICES, [1])[0]


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: labspeed.complete({**SPEED, "model": "no_such_model"}), "model"),
        (lambda: labspeed.complete({**SPEED, "batch_size": 0}), "batch_size"),
        (lambda: kungfu_resize.kungfu_elastic_argv({**ELASTIC, "steps": 0}, "0:1"), "steps"),
        (lambda: scaling.elastic_argv({**ELASTIC, "duration": -1}, Path("stop")), "duration"),
        (lambda: mxnet_arms.command({"schedule": "mxnet-baseline", "lr": 0}), "lr"),
        (lambda: sweep.config_of({"schedule": "p3", "servers": 3}, 2), "servers"),
        (lambda: standin_table.workload_config({**_standin_point(), "rounds": 0}), "rounds"),
    ],
)
def test_a_bad_setting_is_refused_by_the_rooms_config_naming_it(build, name) -> None:
    with pytest.raises(ParameterError) as err:
        build()
    assert err.value.name == name


def test_resize_rooms_refuse_a_bad_point_before_any_run(_isolated_results: Path) -> None:
    with pytest.raises(ParameterError) as err:
        kungfu_resize.run_kungfu_resizing("0:1,2:stop", {**ELASTIC, "model": "nosuch"}, "t/kf")
    assert err.value.name == "model"
    with pytest.raises(ParameterError) as err:
        scaling.run_resizing("0:1,2:stop", {**ELASTIC, "batch_size": 0}, "t/hvd")
    assert err.value.name == "batch_size"
    assert not (_isolated_results / "runs").exists()
