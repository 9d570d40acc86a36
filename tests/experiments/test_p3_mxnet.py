"""P3's MXNet arms: the commands and environment they run with, bad input refused before
launch, "not installed" where .venv-mxnet is missing, and P3's fork's command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.bench.p3.mxnet_workload import Config
from lab.errors import ParameterError
from lab.experiments import systems
from lab.experiments.p3 import artifact, mxnet_arms, sweep

POINT = {"schedule": "mxnet-baseline", "model": "vgg_like", "batch_size": 32, "steps": 10,
         "warmup_steps": 1, "bandwidth": "100mbit", "hosts": 2}  # fmt: skip


def test_command_and_env_of_the_mxnet_arms() -> None:
    argv = mxnet_arms.command(POINT)
    assert argv[:3] == ["python", "-m", "lab.bench.p3.mxnet_workload"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert {k: flags[k] for k in ("--model", "--batch-size", "--steps", "--warmup-steps")} == {
        "--model": "vgg_like", "--batch-size": "32", "--steps": "10", "--warmup-steps": "1"
    }  # fmt: skip
    assert Config.from_argv(argv[3:]) == Config.from_values(
        {k: POINT[k] for k in ("model", "batch_size", "steps", "warmup_steps")}
    )
    assert mxnet_arms.env(POINT, {"OMP_NUM_THREADS": "1"}) == {"OMP_NUM_THREADS": "1"}
    slicing = mxnet_arms.env({**POINT, "schedule": "mxnet-slicing"}, {})
    assert slicing == {"MXNET_KVSTORE_BIGARRAY_BOUND": "40000"}
    with pytest.raises(ParameterError):
        mxnet_arms.command({**POINT, "schedule": "p3"})


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"bandwidth": "fast"}, "bandwidth"),
        ({"hosts": 3}, "hosts"),
        ({"model": "alexnet"}, "model"),  # the workload's own settings, named by its Config
        ({"steps": 0}, "steps"),
    ],
)
def test_bad_mxnet_points_fail_before_launch(changes: dict, name: str,
                                             _isolated_results: Path) -> None:  # fmt: skip
    with pytest.raises(ParameterError) as err:
        sweep.run_point({**POINT, **changes}, "test/p3", "emulated-2")
    assert err.value.name == name
    assert not (_isolated_results / "runs").exists()


def test_mxnet_arms_say_not_installed_without_their_venv(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(systems, "REPO_ROOT", tmp_path)
    runnable, skipped = mxnet_arms.split(["p3", "mxnet-baseline", "mxnet-slicing"])
    assert runnable == ["p3"]
    assert set(skipped) == {"mxnet-baseline", "mxnet-slicing"}
    assert all(why.startswith("not installed") for why in skipped.values())


def test_p3_fork_runs_the_artifacts_command_where_installed(monkeypatch) -> None:
    for var in (artifact.HOME_ENV, artifact.PYTHON_ENV, artifact.DATA_ENV):
        monkeypatch.delenv(var, raising=False)
    assert "P3_MXNET_HOME is not set" in (systems.get_system("p3-mxnet-fork").unavailable() or "")
    with pytest.raises(ParameterError) as err:
        artifact.fork_argv({"model": "vgg19"}, "python")
    assert err.value.name == "P3_MXNET_HOME"
    monkeypatch.setenv(artifact.HOME_ENV, "/opt/p3/")
    monkeypatch.setenv(artifact.PYTHON_ENV, "/opt/p3/.venv/bin/python")
    assert systems.get_system("p3-mxnet-fork").unavailable() is None
    argv = artifact.fork_argv({"model": "vgg19", "batch_size": 32, "steps": 90,
                               "warmup_steps": 10, "hosts": 4}, "python")  # fmt: skip
    assert argv[:2] == ["/opt/p3/.venv/bin/python",
                        "/opt/p3/example/image-classification/train_imagenet.py"]  # fmt: skip
    text = " ".join(argv)
    assert "--network vgg --num-layers 19" in text and "--image-shape 3,224,224" in text
    assert "--kv-store dist_device_sync" in text and "--num-examples 12800" in text
    assert "--benchmark 1" in text  # no dataset named: synthetic data
    monkeypatch.setenv(artifact.DATA_ENV, "/data/p3")
    assert "/data/p3/imagenet1k_train.rec" in artifact.fork_argv({"model": "resnet50"}, "py")
    with pytest.raises(ParameterError):
        artifact.fork_argv({"model": "vgg_like"}, "python")
