"""P3's own MXNet fork, for GPU nodes where it is built (env/gpu-node.txt says how).

With ``P3_MXNET_HOME`` naming the fork's checkout on the nodes (the same path on every node)
and ``P3_MXNET_PYTHON`` the Python its ``python/`` package is installed into, the
``p3-mxnet-fork`` system runs the artifact's command line (its ``ck_run.sh``):
``example/image-classification/train_imagenet.py --gpus 0 --network ... --kv-store
dist_device_sync --num-epochs 1`` through the ``dmlc`` launcher (which plays the part of
the fork's ``tools/launch.py``), and the lab reads the Speedometer lines it prints. With
``P3_IMAGENET_REC`` naming a directory with ``imagenet1k_train.rec`` and
``imagenet1k_val.rec`` it trains on them, as the artifact does; otherwise on synthetic
data (``--benchmark 1`` of MXNet's example), which is what the throughput needs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lab.errors import ParameterError

HOME_ENV = "P3_MXNET_HOME"
PYTHON_ENV = "P3_MXNET_PYTHON"
DATA_ENV = "P3_IMAGENET_REC"
SCRIPT = "example/image-classification/train_imagenet.py"
# the lab's model names -> the artifact's (--network, extra options, --image-shape)
NETWORKS = {
    "vgg19": ("vgg", ["--num-layers", "19"], "3,224,224"),
    "resnet50": ("resnet", ["--num-layers", "50"], "3,224,224"),
    "inception_v3": ("inception-v3", [], "3,299,299"),
}


def fork_home() -> str:
    home = os.environ.get(HOME_ENV, "")
    if not home:
        raise ParameterError(HOME_ENV, home, "the path of P3's MXNet fork, built, on the nodes")
    return home.rstrip("/")


def fork_argv(point: Mapping[str, Any], python: str) -> list[str]:
    """The artifact's ``train_imagenet.py`` command for ``point`` (model, batch_size, steps,
    warmup_steps, hosts): one epoch of (steps + warmup) batches per worker, a Speedometer
    line every 10 batches."""
    model = point.get("model", "vgg19")
    if model not in NETWORKS:
        raise ParameterError("model", model, ", ".join(NETWORKS))
    network, extra, shape = NETWORKS[model]
    data = os.environ.get(DATA_ENV)
    inputs = (
        ["--data-train", f"{data}/imagenet1k_train.rec", "--data-val", f"{data}/imagenet1k_val.rec"]
        if data
        else ["--benchmark", "1"]
    )
    batch = int(point.get("batch_size", 32))
    steps = int(point.get("steps", 100)) + int(point.get("warmup_steps", 10))
    examples = batch * steps * int(point.get("hosts") or 1)  # one short epoch
    return [
        os.environ.get(PYTHON_ENV) or python,  # the fork's Python, never .venv-mxnet's
        f"{fork_home()}/{SCRIPT}",
        "--gpus", "0", "--network", network, *extra,
        "--batch-size", str(batch), "--image-shape", shape, "--num-epochs", "1",
        "--num-examples", str(examples), "--disp-batches", "10",
        "--kv-store", "dist_device_sync", *inputs,
    ]  # fmt: skip
