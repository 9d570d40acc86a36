"""P3's smoke models are the same in both engines: per layer, from the input, the MXNet
Gluon definitions hold as many parameters as the torch ones (so the giant first FC layer
of ``vgg_like`` is where it is in both). MXNet runs in .venv-mxnet, as its ranks do."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lab.bench.p3 import models
from lab.cluster.launchers.dmlc import local_python

REPO = Path(__file__).resolve().parents[2]
COUNT = """
import json, mxnet as mx
from lab.bench.p3 import mxnet_models as m
out = {}
for name in ("vgg_like", "resnet_like"):
    net = m.build(name)
    net.initialize()
    net(mx.nd.zeros((1, 3, 32, 32))).wait_to_read()
    out[name] = [int(p.data().size) for p in m.trainable(net)]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_mxnet_and_torch_models_have_the_same_parameters() -> None:
    if not local_python().is_file():
        pytest.skip("MXNet is not installed here (make setup creates .venv-mxnet)")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(local_python()), "-c", COUNT], capture_output=True, text=True,
                          env=env, timeout=120, check=True)  # fmt: skip
    mxnet_sizes = json.loads(done.stdout.strip().splitlines()[-1])
    for name, sizes in mxnet_sizes.items():
        torch_sizes = [t.numel for t in models.tensors(models.build(name))]
        # Gluon keeps BatchNorm's running statistics as parameters without gradients (not
        # counted), torch as buffers; the trainable tensors match one for one, in order,
        # so a key's index is its layer's distance from the input in both engines
        assert sizes == torch_sizes, name
    vgg = mxnet_sizes["vgg_like"]
    assert max(vgg) == 128 * 4 * 4 * 1024 and max(vgg) / sum(vgg) > 0.7  # "fc6"
