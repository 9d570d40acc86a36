"""CIFAR ResNets (He et al. 2016, §4.2): depth 6n+2, three stages of n basic blocks with
16/32/64 filters, global pooling and one dense layer.

A family whose complexity grows in known steps (ResNet-8, -14, -20, -32 ...), as the CNNs
CM-DARE trained (its ResNet-15 and ResNet-32 are Tensor2Tensor's CIFAR ResNets), small
enough to train on a share of a CPU core.
"""

from __future__ import annotations

from typing import Any

DEPTHS = (8, 14, 20, 32, 44, 56)
WIDTHS = (16, 32, 64)


def names() -> list[str]:
    """The family's model names, ``cifar_resnet8`` ..."""
    return [f"cifar_resnet{d}" for d in DEPTHS]


def depth_of(name: str) -> int:
    return int(name.removeprefix("cifar_resnet"))


def build(keras: Any, name: str, shape: tuple[int, int, int], classes: int) -> Any:
    """The tf-keras model ``name`` (random weights) that outputs logits."""
    L = keras.layers
    blocks = (depth_of(name) - 2) // 6

    def conv(x: Any, filters: int, strides: int = 1) -> Any:
        x = L.Conv2D(filters, 3, strides=strides, padding="same", use_bias=False)(x)
        return L.BatchNormalization()(x)

    inputs = keras.Input(shape=shape)
    x = L.ReLU()(conv(inputs, WIDTHS[0]))
    for stage, filters in enumerate(WIDTHS):
        for block in range(blocks):
            strides = 2 if stage > 0 and block == 0 else 1
            y = conv(L.ReLU()(conv(x, filters, strides)), filters)
            if strides != 1:
                x = L.BatchNormalization()(L.Conv2D(filters, 1, strides=2, use_bias=False)(x))
            x = L.ReLU()(L.Add()([x, y]))
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, L.Dense(classes)(x), name=name)
