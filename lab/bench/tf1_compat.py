"""Run an upstream TensorFlow 1 script on the lab's TensorFlow 2, unmodified:
``python -m lab.bench.tf1_compat SCRIPT [ARGS...]``.

The KungFu artifact's benchmarks (``benchmarks/system/benchmark_kungfu.py``,
``benchmarks/monitoring/benchmark.py``) are TF1 graph-mode programs (``tf.ConfigProto``,
``tf.Session``, ``tf.train.*Optimizer``). TensorFlow 2 still carries that API as
``tensorflow.compat.v1``; this runs the script with v2 behaviour disabled and that module
standing in for ``tensorflow``, as TensorFlow's own migration guide suggests (``import
tensorflow.compat.v1 as tf``), without copying or editing the script.

``tf.contrib`` is gone from TensorFlow 2 and has no stand-in: KungFu's ImageNet helper
imports ``tensorflow.contrib.image`` at the top but uses it only for real data
(``--data-dir``), so those modules are importable here and any use of them fails saying so
(the lab's runs use the scripts' synthetic data).
"""

from __future__ import annotations

import os
import runpy
import sys
import types
from collections.abc import Sequence
from typing import Any

CONTRIB = "tensorflow.contrib.image.python.ops.distort_image_ops"


class _Gone(types.ModuleType):
    """A ``tf.contrib`` module: importable, failing on use."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(
            f"{self.__name__}.{name}: tf.contrib is not in TensorFlow 2 (real-data input "
            "of TF1 scripts is unavailable; use their synthetic data)"
        )


def _contrib_gone() -> None:
    parts = CONTRIB.split(".")
    for i in range(2, len(parts) + 1):
        name = ".".join(parts[:i])
        sys.modules.setdefault(name, _Gone(name))
        if i > 2:
            setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], sys.modules[name])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or not os.path.isfile(args[0]):
        print("usage: python -m lab.bench.tf1_compat SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    import tensorflow as tf
    import tensorflow.keras  # (loaded before the swap: the script's imports find it)

    tf.compat.v1.disable_v2_behavior()
    _contrib_gone()
    sys.modules["tensorflow"] = tf.compat.v1
    sys.argv = list(args)
    runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
