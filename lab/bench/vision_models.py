"""The papers' ImageNet CNNs in torch, by name, from torchvision (random weights, no download).

EasyScale's figures train ResNet50, VGG19, ShuffleNetV2 and SwinTransformer among the
CNN and vision workloads of its Table 1; P3's train VGG-19, ResNet-50 and InceptionV3;
ResNet18 is a cheaper member of the ResNet family for checks on the CPU. The lab builds
each with torchvision's own definition (``torchvision.models.<name>(weights=None)``), so a
paper-scale run trains the architecture the papers name, not a look-alike.

torchvision's wheel on PyPI is the CUDA build: its compiled operators (``nms``,
``roi_align``: detection only) link against CUDA torch, and with the CPU-only torch of a
machine without a GPU ``import torchvision`` failed while registering them. env/setup.sh
patches that registration (env/torchvision-patches/apply.py), so the package imports in
the lab's venv; where it is installed unpatched, the classification models, plain Python
that uses none of those operators, are imported from the installed files without the
package's operator registration. On a GPU node with the matching CUDA torch the package
imports as usual.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types
from dataclasses import dataclass
from typing import Any

from lab.errors import ParameterError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VisionModel:
    """A paper model: torchvision's builder name, the keyword arguments it needs for random
    initialisation without auxiliary heads, and its smallest and usual input sides."""

    name: str
    builder: str
    min_size: int
    paper_size: int = 224
    kwargs: tuple[tuple[str, Any], ...] = ()


_INCEPTION = (("aux_logits", False), ("init_weights", False))
MODELS = {
    m.name: m
    for m in (
        VisionModel("resnet50", "resnet50", 32),
        VisionModel("vgg19", "vgg19", 32),
        VisionModel("shufflenet_v2", "shufflenet_v2_x1_0", 32),
        VisionModel("swin_t", "swin_t", 32),
        VisionModel("inception_v3", "inception_v3", 75, 299, _INCEPTION),
        VisionModel("resnet18", "resnet18", 32),
    )
}
NAMES = tuple(MODELS)


def spec(name: str) -> VisionModel:
    """The VisionModel called ``name``; ParameterError naming ``model`` if there is none."""
    if name not in MODELS:
        raise ParameterError("model", name, ", ".join(NAMES))
    return MODELS[name]


def check_size(name: str, image_size: int) -> None:
    """ParameterError naming ``image_size`` if the model cannot take inputs that small."""
    low = spec(name).min_size
    if image_size < low:
        raise ParameterError("image_size", image_size, f">= {low} for {name}")


def torchvision_models() -> Any:
    """``torchvision.models``, importing the package as usual when it can be, else the model
    definitions alone (see the module's docstring).

    Raises:
        ModuleNotFoundError: torchvision is not installed.
    """
    try:
        return importlib.import_module("torchvision.models")
    except ModuleNotFoundError:
        raise
    except Exception as e:  # compiled operators built for another torch
        log.info("torchvision imports without its compiled operators (%s)", e)
    found = importlib.util.find_spec("torchvision")
    if found is None or not found.submodule_search_locations:
        raise ModuleNotFoundError("torchvision")
    for key in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
        del sys.modules[key]  # the half-imported package of the failed attempt
    package = types.ModuleType("torchvision")
    package.__path__ = list(found.submodule_search_locations)
    package.__spec__ = found
    package.__file__ = found.origin
    sys.modules["torchvision"] = package
    return importlib.import_module("torchvision.models")


def build(name: str, num_classes: int = 1000) -> Any:
    """A randomly initialised torchvision ``name`` with ``num_classes`` outputs.

    Raises:
        ParameterError: an unknown name, or torchvision is not installed.
    """
    model = spec(name)
    try:
        tvm = torchvision_models()
    except ModuleNotFoundError as e:
        allowed = f"a model of an installed torchvision (requirements.txt pins it): {e}"
        raise ParameterError("model", name, allowed) from None
    return getattr(tvm, model.builder)(weights=None, num_classes=num_classes, **dict(model.kwargs))
