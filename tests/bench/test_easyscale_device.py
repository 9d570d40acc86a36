"""EasyScale's device flag: cpu or cuda, checked before launch, and the CUDA settings of D1."""

from __future__ import annotations

import pytest

from lab.bench.easyscale.config import Config, DeviceSpec
from lab.bench.easyscale.determinism import CUBLAS_D1, process_env
from lab.cluster.device_types import parse_device_types
from lab.errors import HostSpecError, ParameterError


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"device": "tpu"}, "device"),
        ({"model": "resnet9"}, "model"),
        ({"model": "inception_v3", "image_size": 32}, "image_size"),
    ],
)
def test_bad_device_or_model_is_refused(fields: dict, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        Config(**fields).checked()
    assert err.value.name == name


def test_device_and_model_round_trip_through_the_cli() -> None:
    cfg = Config(device="cuda", model="resnet50", image_size=224, dataset_size=64, batch_size=4)
    assert Config.from_argv(cfg.to_argv(), {"WORLD_SIZE": "1"}) == cfg.checked()


def test_d1_on_cuda_sets_cublas_fixed_order_workspace() -> None:
    dev = DeviceSpec("v100", 4, "native")
    assert CUBLAS_D1 == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert CUBLAS_D1.items() <= process_env(dev, False, True, "cuda").items()
    assert "CUBLAS_WORKSPACE_CONFIG" not in process_env(dev, False, False, "cuda")  # D0
    assert "CUBLAS_WORKSPACE_CONFIG" not in process_env(dev, False, True, "cpu")


def test_profile_gpu_kinds_parse_and_bad_ones_are_refused() -> None:
    types = parse_device_types({"v100": {"kind": "cuda", "gpu": "V100"}, "cpu": {}}, "t")
    assert (types["v100"].kind, types["v100"].gpu) == ("cuda", "V100")
    assert (types["cpu"].kind, types["cpu"].gpu) == ("cpu", None)
    for bad in ({"kind": "tpu"}, {"gpu": "V100"}, {"memory": 16}):
        with pytest.raises(HostSpecError):
            parse_device_types({"x": bad}, "t")


def _cluster(types: dict) -> object:
    from lab.cluster.device_types import parse_device_types as parse
    from lab.cluster.inventory import Cluster, Host

    parsed = parse(types, "t")
    hosts = (Host("localhost", slots=4, device_type=next(iter(parsed))),)
    return Cluster(name="t", hosts=hosts, device_types=tuple(parsed.values()))


def test_cuda_without_a_gpu_fails_before_launch(monkeypatch) -> None:
    """No GPU here (or none pretended): ``cuda`` asked, by flag or by a GPU device type of
    the profile, is refused naming ``device``, and nothing is launched."""
    import lab.cluster
    from lab.bench.easyscale import device
    from lab.experiments.easyscale.runs import launch_stage

    monkeypatch.setattr(device, "cuda_available", lambda: False)
    monkeypatch.setattr(lab.cluster, "launch", lambda *a, **k: pytest.fail("launched"))
    cpu = _cluster({"fast": {"threads": 1}})
    with pytest.raises(ParameterError) as err:
        launch_stage(Config(device="cuda", ests=2, processes=2), cpu)
    assert err.value.name == "device"
    gpu = _cluster({"v100": {"kind": "cuda", "gpu": "V100"}, "cpu": {}})
    with pytest.raises(ParameterError) as err:
        launch_stage(Config(ests=2, processes=2), gpu)
    assert err.value.name == "device"
    with pytest.raises(ParameterError) as err:  # one CPU and one GPU type in one stage
        launch_stage(Config(ests=2, processes=2), gpu, device_types=("v100", "cpu"))
    assert err.value.name == "device_types"


def test_gpu_backend_is_nccl_unless_ranks_share_a_gpu() -> None:
    from lab.cluster.inventory import load_profile
    from lab.experiments.easyscale.runs import gpu_backend

    own = load_profile("env/clusters/easyscale-gpu.yaml")
    shared = load_profile("env/clusters/easyscale-gpu-sharing.yaml")
    assert gpu_backend(own, 4) == "nccl" and gpu_backend(shared, 1) == "nccl"
    assert gpu_backend(shared, 4) == "gloo"  # NCCL refuses two ranks on one GPU
    assert gpu_backend(_cluster({"fast": {}}), 2) == "auto"  # GPUs not counted: the rank sees
    with pytest.raises(ParameterError) as err:
        Config(backend="nccl").checked()  # NCCL has no CPU tensors
    assert err.value.name == "backend"


def test_cpu_device_helpers() -> None:
    """The CPU side of the device module (the same calls run on a GPU)."""
    import torch

    from lab.bench.easyscale import device

    where = device.select("cpu")
    assert where == torch.device("cpu") and device.backend("cpu") == "gloo"
    assert device.memory(where) == {} and device.describe(where) == {"device_kind": "cpu"}
    assert device.clock(where) > 0


@pytest.mark.slow
def test_a_torchvision_model_runs_as_ests_bit_for_bit_on_either_placement(tmp_path) -> None:
    """The paper-scale code path on the CPU: ResNet18 (torchvision, BatchNorm) as 2 ESTs on
    one process and on two gives the same loss bits and parameters after every step."""
    from pathlib import Path

    from lab.experiments.easyscale.runs import est_losses, launch_stage, step_digests

    small = {"model": "resnet18", "image_size": 32, "dataset_size": 8, "batch_size": 2}
    runs = []
    for np in (1, 2):
        cfg = Config(ests=2, processes=np, steps=2, level="D1", digest=True, **small)
        result = launch_stage(cfg, view=None, timeout=150, results_root=tmp_path)
        runs.append(Path(result.run_dir))
    one, two = est_losses(runs[0]), est_losses(runs[1])
    assert len(one) == len(two) == 4
    assert list(one["loss_hex"]) == list(two["loss_hex"])
    assert list(step_digests(runs[0])) == list(step_digests(runs[1]))


def test_d1_on_cuda_replacements_compute_the_same_mathematics() -> None:
    """The stand-ins D1 uses on CUDA (no deterministic GPU kernel for AdaptiveAvgPool2d's
    backward or NLLLoss) give torch's values and gradients, checked on the CPU."""
    import copy

    import torch

    from lab.bench import vision_models
    from lab.bench.easyscale import cuda_d1

    torch.manual_seed(0)
    model = vision_models.build("resnet18", num_classes=10).eval()
    swapped = copy.deepcopy(model)
    assert cuda_d1.replace_pooling(swapped) == 1
    assert not any(isinstance(m, torch.nn.AdaptiveAvgPool2d) for m in swapped.modules())
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([3, 7])
    ref = torch.nn.functional.cross_entropy(model(x), y)
    got = cuda_d1.cross_entropy(swapped(x), y)
    torch.testing.assert_close(got, ref)
    ref.backward()
    got.backward()
    for a, b in zip(model.parameters(), swapped.parameters(), strict=True):
        torch.testing.assert_close(b.grad, a.grad)
    pool = cuda_d1.pooling_module()((7, 7))
    z = torch.randn(1, 2, 14, 14)
    torch.testing.assert_close(pool(z), torch.nn.functional.adaptive_avg_pool2d(z, 7))
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert cuda_d1.loss_function(cuda, True) is cuda_d1.cross_entropy
    assert cuda_d1.loss_function(cpu, True) is torch.nn.functional.cross_entropy
    assert cuda_d1.loss_function(cuda, False) is torch.nn.functional.cross_entropy
