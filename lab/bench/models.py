"""The models the synthetic workload can train, by name, and their input-size limits.

Names and minimum sizes are plain data, so flags are checked before TensorFlow is imported.
Every ``tf.keras.applications`` architecture is here (built from tf-keras, random weights,
no download), plus two small smoke models that run at useful speed on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.bench import cifar_resnet
from lab.errors import ParameterError


@dataclass(frozen=True)
class ModelSpec:
    """What the lab knows about a model before building it.

    Args:
        name: the canonical name (as ``tf.keras.applications`` spells it).
        min_size: the smallest square input (pixels) the model accepts.
        default_size: the input size the model was designed for.
        family: ``"keras"`` (a keras application), ``"smoke"`` (the lab's small models) or
            ``"cifar"`` (CIFAR ResNets, lab.bench.cifar_resnet).
    """

    name: str
    min_size: int
    default_size: int
    family: str = "keras"


def _keras(names: str, min_size: int = 32, default_size: int = 224) -> list[ModelSpec]:
    return [ModelSpec(n, min_size, default_size) for n in names.split()]


_REGNET_SIZES = ("002", "004", "006", "008", "016", "032", "040", "064", "080", "120", "160", "320")

# Minimum sizes are those tf_keras.applications enforces (imagenet_utils.obtain_input_shape);
# default sizes are the architectures' published input resolutions.
_SPECS: list[ModelSpec] = [
    *_keras("VGG16 VGG19 ResNet50 ResNet101 ResNet152 ResNet50V2 ResNet101V2 ResNet152V2"),
    *_keras("DenseNet121 DenseNet169 DenseNet201 MobileNet MobileNetV2"),
    *_keras("MobileNetV3Small MobileNetV3Large NASNetMobile"),
    ModelSpec("NASNetLarge", 32, 331),
    ModelSpec("InceptionV3", 75, 299),
    ModelSpec("InceptionResNetV2", 75, 299),
    ModelSpec("Xception", 71, 299),
    *_keras("EfficientNetB0"),
    ModelSpec("EfficientNetB1", 32, 240),
    ModelSpec("EfficientNetB2", 32, 260),
    ModelSpec("EfficientNetB3", 32, 300),
    ModelSpec("EfficientNetB4", 32, 380),
    ModelSpec("EfficientNetB5", 32, 456),
    ModelSpec("EfficientNetB6", 32, 528),
    ModelSpec("EfficientNetB7", 32, 600),
    *_keras("EfficientNetV2B0"),
    ModelSpec("EfficientNetV2B1", 32, 240),
    ModelSpec("EfficientNetV2B2", 32, 260),
    ModelSpec("EfficientNetV2B3", 32, 300),
    ModelSpec("EfficientNetV2S", 32, 384),
    ModelSpec("EfficientNetV2M", 32, 480),
    ModelSpec("EfficientNetV2L", 32, 480),
    *_keras("ConvNeXtTiny ConvNeXtSmall ConvNeXtBase ConvNeXtLarge ConvNeXtXLarge"),
    *_keras(" ".join(f"RegNet{k}{n}" for k in "XY" for n in _REGNET_SIZES)),
    *_keras("ResNetRS50 ResNetRS101", default_size=160),
    *_keras("ResNetRS152 ResNetRS200", default_size=256),
    ModelSpec("ResNetRS270", 32, 256),
    ModelSpec("ResNetRS350", 32, 288),
    ModelSpec("ResNetRS420", 32, 320),
    ModelSpec("tiny_cnn", 8, 32, "smoke"),
    ModelSpec("small_cnn", 16, 32, "smoke"),
    *(ModelSpec(n, 8, 32, "cifar") for n in cifar_resnet.names()),
]

MODELS: dict[str, ModelSpec] = {s.name: s for s in _SPECS}
_BY_LOWER: dict[str, ModelSpec] = {s.name.lower(): s for s in _SPECS}


def model_names() -> list[str]:
    """All model names, smoke models first, then keras applications alphabetically."""
    smoke = [s.name for s in _SPECS if s.family in ("smoke", "cifar")]
    return smoke + sorted(s.name for s in _SPECS if s.family not in ("smoke", "cifar"))


def get_spec(name: str) -> ModelSpec:
    """The spec of ``name`` (case-insensitive); unknown names list every known one."""
    spec = MODELS.get(name) or _BY_LOWER.get(name.lower())
    if spec is None:
        raise ParameterError("model", name, ", ".join(model_names()))
    return spec


def check_image_size(spec: ModelSpec, image_size: int) -> None:
    """Raise ParameterError if ``image_size`` is below what ``spec`` accepts."""
    if image_size < spec.min_size:
        raise ParameterError(
            "image-size", image_size, f"an integer >= {spec.min_size} for {spec.name}"
        )


def build_model(name: str, image_size: int, num_classes: int) -> Any:
    """A freshly initialised tf-keras model that outputs logits.

    Imports tf_keras here, so call it after the backend has set up TensorFlow (and
    ``TF_USE_LEGACY_KERAS=1``); weights come from the global seed, so seed first.
    """
    spec = get_spec(name)
    check_image_size(spec, image_size)
    try:
        import tf_keras
    except ImportError as exc:  # pragma: no cover - depends on the node
        raise ImportError("tf-keras is not installed; install it: pip install tf-keras") from exc
    shape = (image_size, image_size, 3)
    if spec.family == "smoke":
        return _smoke_model(tf_keras, spec.name, shape, num_classes)
    if spec.family == "cifar":
        return cifar_resnet.build(tf_keras, spec.name, shape, num_classes)
    builder = getattr(tf_keras.applications, spec.name)
    return builder(weights=None, input_shape=shape, classes=num_classes, classifier_activation=None)


def _smoke_model(keras: Any, name: str, shape: tuple[int, int, int], classes: int) -> Any:
    """Small CNNs: enough layers to have real gradients and all-reduce traffic, fast on CPU."""
    L = keras.layers
    if name == "tiny_cnn":
        body = [
            L.Conv2D(8, 3, strides=2, padding="same", activation="relu"),
            L.Conv2D(16, 3, strides=2, padding="same", activation="relu"),
        ]
    else:
        body = [
            L.Conv2D(32, 3, padding="same", use_bias=False),
            L.BatchNormalization(),
            L.ReLU(),
            L.Conv2D(64, 3, strides=2, padding="same", use_bias=False),
            L.BatchNormalization(),
            L.ReLU(),
            L.Conv2D(128, 3, strides=2, padding="same", use_bias=False),
            L.BatchNormalization(),
            L.ReLU(),
            L.Conv2D(128, 3, padding="same", activation="relu"),
        ]
    layers = [
        L.InputLayer(input_shape=shape),
        *body,
        L.GlobalAveragePooling2D(),
        L.Dense(classes),
    ]
    return keras.Sequential(layers, name=name)


def count_params(model: Any) -> int:
    """The number of trainable and non-trainable parameters."""
    return int(model.count_params())
