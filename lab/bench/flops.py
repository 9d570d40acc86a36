"""Forward FLOPs of a model, counted by TensorFlow's profiler (not by hand).

The model is traced once for one input image; ``tf.compat.v1.profiler`` sums the float
operations of the graph's ops (a multiply-add counts as two). Run as
``python -m lab.bench.flops --model cifar_resnet20`` it prints a ``metric`` record.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

from lab.bench.models import check_image_size, get_spec


@functools.lru_cache(maxsize=64)
def forward_flops(model: str, image_size: int = 32, num_classes: int = 10) -> int:
    """Float operations of one forward pass of one ``image_size`` image through ``model``."""
    spec = get_spec(model)
    check_image_size(spec, image_size)
    from lab.bench.backends.common import setup_tensorflow
    from lab.bench.models import build_model

    tf = setup_tensorflow()
    net = build_model(spec.name, image_size, num_classes)
    sig = tf.TensorSpec([1, image_size, image_size, 3], tf.float32)
    graph = tf.function(lambda x: net(x, training=False)).get_concrete_function(sig).graph
    opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    opts["output"] = "none"
    prof = tf.compat.v1.profiler.profile(graph=graph, run_meta=None, cmd="op", options=opts)
    return int(prof.total_float_ops)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.bench.flops", description=__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-classes", type=int, default=10)
    ns = p.parse_args(argv)
    from lab.metrics.records import emit

    flops = forward_flops(ns.model, ns.image_size, ns.num_classes)
    emit("metric", name="forward_flops", value=flops, model=ns.model, image_size=ns.image_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
