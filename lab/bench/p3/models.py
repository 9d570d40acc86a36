"""The models P3's figures train, in torch, and the layer order its priorities use.

At smoke scale two 32x32 CNNs show the effect the paper explains: ``vgg_like`` has one
first fully connected layer with most of the parameters (about 73%, as fc6 holds 71.5% of
VGG-19), ``resnet_like`` has no giant layer. ``tiny`` is for tests. At paper scale
``vgg19``, ``resnet50`` and ``inception_v3`` are torchvision's (lab.bench.vision_models).
"""

from __future__ import annotations

from typing import Any

from lab.bench.p3.schedule import Tensor
from lab.errors import ParameterError

SMOKE_MODELS = ("vgg_like", "resnet_like", "tiny")
PAPER_MODELS = ("vgg19", "resnet50", "inception_v3")


def build(name: str, num_classes: int = 10) -> Any:
    """The model called ``name`` (torch is imported here, not at module import)."""
    if name == "vgg_like":
        return _vgg_like(num_classes)
    if name == "resnet_like":
        return _resnet_like(num_classes)
    if name == "tiny":
        return _tiny(num_classes)
    if name in PAPER_MODELS:
        from lab.bench import vision_models

        return vision_models.build(name, num_classes)
    raise ParameterError("model", name, ", ".join((*SMOKE_MODELS, *PAPER_MODELS)))


def tensors(model: Any) -> list[Tensor]:
    """The model's parameters in registration order, each with its layer's position from
    the input: modules that own parameters are numbered in registration order, which is
    the forward order of these models."""
    out, layer = [], 0
    for _, module in model.named_modules():
        own = list(module.named_parameters(recurse=False))
        if not own:
            continue
        for pname, p in own:
            if p.requires_grad:
                out.append(Tensor(f"{pname}@{layer}", p.numel(), layer))
        layer += 1
    return out


def layers(model: Any) -> list[Any]:
    """The modules that own parameters, by layer position (index = priority)."""
    return [m for _, m in model.named_modules() if list(m.parameters(recurse=False))]


def _vgg_like(num_classes: int) -> Any:
    import torch.nn as nn

    def conv(cin: int, cout: int) -> list[Any]:
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]

    return nn.Sequential(
        *conv(3, 32),
        nn.MaxPool2d(2),
        *conv(32, 64),
        nn.MaxPool2d(2),
        *conv(64, 128),
        *conv(128, 128),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(128 * 4 * 4, 1024),  # "fc6": most of the parameters
        nn.ReLU(inplace=True),
        nn.Linear(1024, 512),
        nn.ReLU(inplace=True),
        nn.Linear(512, num_classes),
    )


def _resnet_like(num_classes: int) -> Any:
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: Any) -> Any:
            y = self.bn1(self.conv1(x)).relu()
            return (self.bn2(self.conv2(y)) + self.short(x)).relu()

    widths, blocks, cin = (16, 32, 64), [], 16
    for i, w in enumerate(widths):
        blocks += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        *blocks,
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(cin, num_classes),
    )


def _tiny(num_classes: int) -> Any:
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 8 * 8, 32),
        nn.ReLU(),
        nn.Linear(32, num_classes),
    )
