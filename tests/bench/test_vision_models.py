"""The papers' models from torchvision: each builds by name and trains one step on the CPU."""

from __future__ import annotations

import pytest

from lab.bench import vision_models
from lab.errors import ParameterError

pytestmark = pytest.mark.slow


def _step(model, side: int) -> float:  # type: ignore[no-untyped-def]
    """One forward/backward of two images; the gradient's norm (finite, non-zero)."""
    import torch

    torch.manual_seed(0)
    model.train()
    loss = torch.nn.functional.cross_entropy(
        model(torch.randn(2, 3, side, side)), torch.tensor([0, 1])
    )
    loss.backward()
    grads = [p.grad.norm() for p in model.parameters() if p.grad is not None]
    assert len(grads) == len([p for p in model.parameters() if p.requires_grad])
    return float(torch.stack(grads).norm())


# Parameters with 1000 classes as torchvision documents them (Inception-v3 without its
# auxiliary head, which the lab leaves out); None: not checked.
PARAMS = {
    "resnet50": 25_557_032,
    "vgg19": 143_667_240,
    "inception_v3": 23_834_568,
    "shufflenet_v2": 2_278_604,
    "swin_t": 28_288_354,
}


@pytest.mark.parametrize("name", list(PARAMS))
def test_paper_model_builds_and_trains_one_step_at_a_tiny_input(name: str) -> None:
    import math

    spec = vision_models.spec(name)
    model = vision_models.build(name)
    assert type(model).__module__.startswith("torchvision.models")
    assert sum(p.numel() for p in model.parameters()) == PARAMS[name]
    norm = _step(model, spec.min_size)
    assert math.isfinite(norm) and norm > 0


def test_p3_builds_its_paper_models_through_the_same_registry() -> None:
    from lab.bench.p3 import models

    vgg = models.build("vgg19", num_classes=10)
    fc6 = max(models.tensors(vgg), key=lambda t: t.numel)
    assert fc6.numel == 25088 * 4096  # VGG-19's first FC layer, most of its parameters


def test_unknown_or_too_small_is_refused() -> None:
    with pytest.raises(ParameterError) as err:
        vision_models.build("resnet9")
    assert err.value.name == "model"
    with pytest.raises(ParameterError) as err:
        vision_models.check_size("inception_v3", 32)
    assert err.value.name == "image_size"
