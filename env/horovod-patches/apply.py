"""distlab's changes to the installed Horovod 0.28.1 Python files (no rebuild of the wheel).

Run as ``python apply.py [HOROVOD_PACKAGE_DIR]`` after the wheel is installed (env/setup.sh
does); without a directory it patches the ``horovod`` package of the Python running it.
Every fix is a (why, files, pattern, replacement, applied) rule; a rule that matches nothing
in a tree it has not already patched fails, so a changed Horovod is noticed instead of
half-patched. Running it twice changes nothing. Standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from patching import main  # noqa: E402  (env/patching.py: the shared rule loop)

# (why, glob of files under horovod/, regex, replacement, text present once applied)
RULES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "horovod.tensorflow.keras took Keras's backend from the standalone 'keras' package, "
        "which is Keras 3 beside TensorFlow >= 2.16 even under TF_USE_LEGACY_KERAS=1: its "
        "callbacks (MetricAverageCallback, BroadcastGlobalVariablesCallback) then failed at "
        "the end of the first epoch ('keras.backend' has no attribute 'constant'). Take the "
        "backend of tf.keras, the Keras these modules already use (tf_keras under "
        "TF_USE_LEGACY_KERAS=1, as the lab sets for ranks; unchanged otherwise)",
        "tensorflow/keras/*.py",  # __init__.py and callbacks.py
        r"(?m)^(\s*)from keras import backend as K$",
        r"\1K = keras.backend  # tf.keras's own backend (distlab)",
        "K = keras.backend  # tf.keras's own backend (distlab)",
    ),
)


if __name__ == "__main__":
    main("horovod", RULES)
