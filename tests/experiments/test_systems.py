"""Systems registry, point completion, and a sweep over real launches (lab.experiments)."""

from __future__ import annotations

import sys

import pytest

from lab.cluster import launch
from lab.cluster.launchers import LAUNCHERS
from lab.errors import ParameterError
from lab.experiments import SYSTEMS, complete_point, grid, run_sweep, workload_argv


def test_every_system_names_a_registered_launcher() -> None:
    for system in SYSTEMS.values():
        assert system.launcher in LAUNCHERS, system.name


def test_workload_argv_maps_point_to_flags() -> None:
    point = complete_point({"system": "horovod-gloo", "model": "tiny_cnn", "workers": 2})
    argv = workload_argv(point, "/py")
    assert argv[:5] == ["/py", "-m", "lab.bench.synthetic", "--backend", "horovod"]
    assert argv[argv.index("--model") + 1] == "tiny_cnn"
    assert argv[argv.index("--image-size") + 1] == "32"  # smoke default
    assert "--workers" not in argv and "--system" not in argv


def test_complete_point_checks_scale_system_and_workers() -> None:
    assert complete_point({"system": "mwms"}, "paper")["image_size"] == 224
    with pytest.raises(ParameterError, match="scale"):
        complete_point({"system": "mwms"}, "huge")
    with pytest.raises(ParameterError, match="system='nope'"):
        complete_point({"system": "nope"})
    with pytest.raises(ParameterError, match="workers"):
        complete_point({"system": "mwms", "workers": 0})


@pytest.mark.parametrize(
    "point, name",
    [
        ({"system": "horovod-gloo", "model": "no_such_model"}, "model"),
        ({"system": "horovod-gloo", "batch_size": 0}, "batch_size"),
        ({"system": "mwms", "batch_size": -4}, "batch_size"),
        ({"system": "single", "model": "InceptionV3"}, "image_size"),  # 32 at smoke scale
        ({"system": "kungfu-elastic", "steps": 0}, "steps"),
        ({"system": "pair-avg", "monitor": "variance"}, "monitor"),  # not a setting of it
        ({"system": "mxnet-baseline", "model": "ResNet50"}, "model"),  # MXNet's own models
        ({"system": "kungfu-artifact-sync", "batch_size": 0}, "batch_size"),  # its script's
        ({"system": "single", "workers": "two"}, "workers"),
    ],
)
def test_complete_point_checks_the_workload_through_its_config(point, name) -> None:
    with pytest.raises(ParameterError) as err:
        complete_point(point)
    assert err.value.name == name


def test_workload_argv_is_the_systems_config_as_flags() -> None:
    point = complete_point({"system": "mwms", "model": "resnet50", "batch_size": 8}, "paper")
    config = SYSTEMS["mwms"].config(point)
    argv = workload_argv(point, "/py")
    assert argv[:3] == ["/py", "-m", "lab.bench.synthetic"]
    assert type(config).from_argv(argv[3:]) == config
    assert (config.model, config.backend, config.image_size) == ("ResNet50", "mwms", 224)


def test_pytorch_systems_run_the_pytorch_workload_on_their_engines() -> None:
    """torch-ddp under torchrun, Horovod's PyTorch API under mpirun, and one PyTorch worker
    alone (their ideal); a Keras model name is the torchvision model at paper scale."""
    from lab.bench import torch_synthetic
    from lab.experiments.systems import ideal_of, uses_torch

    for name, launcher in (
        ("torch-ddp", "torchrun"),
        ("horovod-torch", "mpi"),
        ("torch-single", "local"),
    ):
        argv = workload_argv(complete_point({"system": name, "model": "small_cnn"}), "/py")
        assert argv[:5] == ["/py", "-m", "lab.bench.torch_synthetic", "--backend", name]
        assert SYSTEMS[name].launcher == launcher and uses_torch(name)
        assert ideal_of(name) == "torch-single"
    assert ideal_of("horovod-mpi") == "single" and not uses_torch("horovod-mpi")
    with pytest.raises(ParameterError, match="backend"):
        torch_synthetic.Config.from_values({"backend": "horovod"})
    names = ["mobilenet_v2", "resnet50", "inception_v3"]
    assert torch_synthetic.torchvision_name("MobileNetV2", names) == "mobilenet_v2"
    assert torch_synthetic.torchvision_name("ResNet50", names) == "resnet50"
    assert torch_synthetic.torchvision_name("VGG16", names) is None


def test_grid_holds_scalars_fixed() -> None:
    assert grid(a=[1, 2], b="x") == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]


def test_sweep_over_real_launches_resumes() -> None:
    """A real RunResult (state is an Enum) is read as succeeded; a second sweep skips it."""
    calls = []

    def run(point):
        calls.append(point)
        rec = '@lab {"kind": "step", "step": 0, "samples": 8, "seconds": 0.5}'
        return launch(
            [sys.executable, "-c", f"print({rec!r})"],
            np=point["workers"],
            experiment="sweep-real",
            params=point,
            view=None,
            check=False,
        )

    points = [{"system": "single", "workers": 1}, {"system": "single", "workers": 2}]
    first = run_sweep("sweep-real", points, run=run)
    assert first["state"].tolist() == ["succeeded", "succeeded"]
    assert first["throughput_total"].tolist() == [16.0, 32.0]
    again = run_sweep("sweep-real", points, run=run)
    assert len(calls) == 2 and again["sweep_status"].tolist() == ["skipped", "skipped"]


def test_a_rooms_own_sweep_keeps_the_succeeded_points_and_resumes() -> None:
    """lab.experiments.sweeps.run_succeeded (CM-DARE's sweeps): a failed point is tried
    once more and left out of the summary; a second sweep runs nothing again."""
    from lab.errors import NothingMeasured
    from lab.experiments.sweeps import run_succeeded

    calls = []

    def run(point):
        calls.append(point["n"])
        code = "import sys; sys.exit(3)" if point["n"] == 2 else 'print(\'@lab {"kind": "x"}\')'
        return launch([sys.executable, "-c", code], experiment="own-sweep", params=point,
                      view=None, check=False)  # fmt: skip

    points = [{"n": 1}, {"n": 2}]
    first = run_succeeded("own-sweep", points, run, key=["n"])
    assert first["n"].tolist() == [1] and calls == [1, 2, 2]
    again = run_succeeded("own-sweep", points[:1], run, key=["n"])
    assert again["n"].tolist() == [1] and calls == [1, 2, 2]
    with pytest.raises(NothingMeasured):
        run_succeeded("own-sweep", points[1:], run, key=["n"])


def test_a_bad_point_from_a_rooms_runner_ends_the_sweep() -> None:
    """A ParameterError from a room's runner is the point's fault, not the run's: it is
    raised, not retried, and no later point runs."""
    from lab.experiments.sweeps import run_succeeded

    calls = []

    def run(point):
        calls.append(point["n"])
        raise ParameterError("n", point["n"], "a point this room can run")

    with pytest.raises(ParameterError, match="n=1"):
        run_succeeded("bad-point", [{"n": 1}, {"n": 2}], run, key=["n"], view=None)
    assert calls == [1]


def test_a_sweeps_observer_sees_every_point_it_ran_and_not_the_resumed_ones() -> None:
    """run_sweep(observe=...) is called with each point it ran and what its runner returned
    (a failed run too); a point found done is not run, so not observed."""
    seen = []

    def run(point):
        code = "import sys; sys.exit(3)" if point["n"] == 2 else 'print(\'@lab {"kind": "x"}\')'
        return launch([sys.executable, "-c", code], experiment="observed", params=point,
                      view=None, check=False)  # fmt: skip

    def observe(point, result):
        seen.append((point["n"], result.ok))

    points = [{"n": 1}, {"n": 2}]
    kw = {"view": None, "run": run, "complete": dict, "retries": 0, "observe": observe}
    summary = run_sweep("observed", points, **kw)
    assert seen == [(1, True), (2, False)]
    assert summary["state"].tolist() == ["succeeded", "failed"]
    run_sweep("observed", points[:1], **kw)
    assert seen == [(1, True), (2, False)]


def test_overhead_table_against_the_baseline_of_each_model() -> None:
    import pandas as pd

    summary = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b", "b"],
            "setting": ["baseline", "noise scale", "variance", "baseline", "noise scale"],
            "state": ["succeeded"] * 4 + ["failed"],
            "throughput_per_rank": [100.0, 90.0, 80.0, 50.0, 10.0],
            "throughput_per_rank_ci": [1.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    from lab.experiments import overhead_table

    t = overhead_table(summary)
    assert t["setting"].tolist() == ["noise scale", "variance"]  # b's failed run is left out
    assert t["overhead"].round(6).tolist() == [0.1, 0.2]
    assert (t["overhead_ci"] > 0).all()


def test_kungfu_artifact_systems_run_the_artifacts_exact_commands(monkeypatch, tmp_path) -> None:
    from lab.experiments import SYSTEMS as S

    monkeypatch.delenv("KUNGFU_ARTIFACT", raising=False)
    monkeypatch.setenv("DISTLAB_CACHE", str(tmp_path))  # make setup kept nothing here
    assert "KUNGFU_ARTIFACT is not set" in (S["kungfu-artifact-sync"].unavailable() or "") or (
        "kungfu-run is not installed" in (S["kungfu-artifact-sync"].unavailable() or "")
    )
    kept = tmp_path / "kungfu-artifact" / "b1e1768" / "benchmarks" / "monitoring"
    kept.mkdir(parents=True)
    (kept / "benchmark.py").write_text("")  # as env/build_kungfu_artifact.sh keeps it
    assert workload_argv({"system": "kungfu-artifact-monitoring"}, "py")[3] == str(
        kept / "benchmark.py"
    )
    assert "KUNGFU_ARTIFACT" not in (S["kungfu-artifact-sync"].unavailable() or "")
    monkeypatch.setenv("KUNGFU_ARTIFACT", "/opt/KungFu")
    point = {
        "system": "kungfu-artifact-monitoring",
        "model": "ResNet50",
        "batch_size": 64,
        "monitor": "noise-scale",
        "interval": 1,
    }
    assert workload_argv({**point, "steps": 100, "warmup_steps": 10}, "python3") == [
        "python3",
        "-m",
        "lab.bench.tf1_compat",  # a TF1 script, run as it is under tensorflow.compat.v1
        "/opt/KungFu/benchmarks/monitoring/benchmark.py",
        "--kf-optimizer=noise-scale",
        "--model=ResNet50",
        "--batch-size=64",
        "--interval=1",
        "--num-warmup-batches=10",
        "--num-batches-per-iter=1",
        "--num-iters=100",
    ]
    sync = workload_argv(
        {"system": "kungfu-artifact-async", "model": "ResNet50", "batch_size": 64}, "python3"
    )
    assert sync[1:] == [
        "-m",
        "lab.bench.tf1_compat",
        "/opt/KungFu/benchmarks/system/benchmark_kungfu.py",
        "--kf-optimizer=async-sgd",
        "--model=ResNet50",
        "--batch-size=64",
    ]


def test_a_figure_with_no_runnable_system_says_what_each_one_lacks(monkeypatch) -> None:
    """A notebook that asks for one runnable system gets the reasons, not an IndexError
    from ``runnable[0]`` (Fig 8 on a machine where KungFu's source was unreachable)."""
    from lab.errors import NothingMeasured
    from lab.experiments.systems import INSTALL_HINTS, System, split_available

    missing = System("lacks-kungfu", "KungFu (test)", "local", "single", requires=("kungfu_x",))
    monkeypatch.setitem(SYSTEMS, missing.name, missing)
    monkeypatch.setitem(INSTALL_HINTS, "kungfu_x", INSTALL_HINTS["kungfu"])  # as if KungFu's
    assert split_available(["lacks-kungfu"]) == ([], {"lacks-kungfu": missing.unavailable()})
    with pytest.raises(NothingMeasured, match=r"KungFu \(test\): Python package 'kungfu_x' is"):
        split_available(["lacks-kungfu"], need_one=True)
    with pytest.raises(NothingMeasured, match="KUNGFU_SOURCE"):
        split_available(["lacks-kungfu"], need_one=True)
    assert split_available(["single", "lacks-kungfu"], need_one=True)[0] == ["single"]
