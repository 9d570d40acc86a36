"""P3's models in MXNet Gluon, defined as ``lab.bench.p3.models`` defines them in torch.

``vgg_like`` (its first fully connected layer holds most parameters, as VGG-19's fc6 does)
and ``resnet_like`` (no giant layer) at smoke scale, ``tiny`` for tests; at paper scale
Gluon's model zoo: ``vgg19``, ``resnet50`` (``resnet50_v1``) and ``inception_v3``
(``inceptionv3``). This module runs under the MXNet venv (numpy < 1.24): it imports
nothing from the lab but ``lab.errors``, and MXNet only inside functions.
"""

from __future__ import annotations

from typing import Any

from lab.errors import ParameterError

SMOKE_MODELS = ("vgg_like", "resnet_like", "tiny")
ZOO = {"vgg19": "vgg19", "resnet50": "resnet50_v1", "inception_v3": "inceptionv3"}
MODELS = (*SMOKE_MODELS, *ZOO)
IMAGE_SIZE = {"vgg19": 224, "resnet50": 224, "inception_v3": 299}


def check_model(name: str) -> str:
    """``name`` if MXNet's side of the lab knows it; ParameterError otherwise."""
    if name not in MODELS:
        raise ParameterError("model", name, ", ".join(MODELS))
    return name


def default_image_size(name: str) -> int:
    """32 for the smoke models, the model zoo's input size otherwise."""
    return IMAGE_SIZE.get(name, 32)


def build(name: str, num_classes: int = 10) -> Any:
    """The Gluon block called ``name`` (not yet initialised)."""
    check_model(name)
    from mxnet.gluon import nn

    if name in ZOO:
        from mxnet.gluon.model_zoo import vision

        return vision.get_model(ZOO[name], classes=num_classes)
    net = nn.HybridSequential()
    if name == "tiny":
        net.add(nn.Conv2D(4, 3, padding=1, activation="relu"), nn.Dense(32, activation="relu"))
        net.add(nn.Dense(num_classes))
    elif name == "vgg_like":
        for width, pool in ((32, True), (64, True), (128, False), (128, True)):
            net.add(nn.Conv2D(width, 3, padding=1, activation="relu"))
            if pool:
                net.add(nn.MaxPool2D(2))
        # "fc6": 128*4*4 x 1024, most of the parameters (Dense flattens its input)
        net.add(nn.Dense(1024, activation="relu"), nn.Dense(512, activation="relu"))
        net.add(nn.Dense(num_classes))
    else:
        _resnet_like(net, num_classes)
    return net


def _resnet_like(net: Any, num_classes: int) -> None:
    from mxnet.gluon import nn

    class Block(nn.HybridBlock):  # two 3x3 convolutions and a shortcut, as in torch
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2D(cout, 3, stride, 1, use_bias=False, in_channels=cin)
            self.bn1 = nn.BatchNorm(in_channels=cout)
            self.conv2 = nn.Conv2D(cout, 3, 1, 1, use_bias=False, in_channels=cout)
            self.bn2 = nn.BatchNorm(in_channels=cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.HybridSequential()
                self.short.add(nn.Conv2D(cout, 1, stride, use_bias=False, in_channels=cin))
                self.short.add(nn.BatchNorm(in_channels=cout))

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            y = F.relu(self.bn1(self.conv1(x)))
            skip = x if self.short is None else self.short(x)
            return F.relu(self.bn2(self.conv2(y)) + skip)

    net.add(nn.Conv2D(16, 3, padding=1, use_bias=False), nn.BatchNorm(), nn.Activation("relu"))
    cin = 16
    for i, width in enumerate((16, 32, 64)):
        net.add(Block(cin, width, 1 if i == 0 else 2), Block(width, width, 1))
        cin = width
    net.add(nn.GlobalAvgPool2D(), nn.Dense(num_classes))


def trainable(net: Any) -> list[Any]:
    """The parameters a step updates, in registration order: the forward order of these
    models, so a parameter's index is its distance from the input (P3's priority)."""
    return [p for p in net.collect_params().values() if p.grad_req != "null"]
