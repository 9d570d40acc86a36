"""distlab's changes to the installed Horovod 0.28.1 Python files (no rebuild of the wheel).

Run as ``python apply.py [HOROVOD_PACKAGE_DIR]`` after the wheel is installed (env/setup.sh
does); without a directory it patches the ``horovod`` package of the Python running it.
Every fix is a (why, files, pattern, replacement, applied) rule; a rule that matches nothing
in a tree it has not already patched fails, so a changed Horovod is noticed instead of
half-patched. Running it twice changes nothing. Standard library only.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

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


def horovod_dir() -> Path:
    """The installed ``horovod`` package of this interpreter, found without importing it."""
    spec = importlib.util.find_spec("horovod")
    if spec is None or spec.origin is None:
        raise SystemExit("horovod is not installed in this Python")
    return Path(spec.origin).parent


def apply(root: Path) -> list[str]:
    """Apply every rule under ``root``; one line per rule; raise if one matches nothing."""
    done = []
    for why, pattern, regex, replacement, applied in RULES:
        files = sorted(root.glob(pattern))
        total = already = 0
        for path in files:
            text = path.read_text()
            new, n = re.subn(regex, replacement, text)
            if n:
                path.write_text(new)
                total += n
            already += text.count(applied)
        if total == 0 and already == 0:
            raise SystemExit(f"patch rule matched nothing ({pattern}: {regex!r}): {why}")
        state = f"{total:3d} x" if total else "  (applied)"
        done.append(f"{state} {pattern}: {why[:80]}...")
    return done


if __name__ == "__main__":
    if len(sys.argv) > 2:
        raise SystemExit("usage: apply.py [HOROVOD_PACKAGE_DIR]")
    target = Path(sys.argv[1]) if len(sys.argv) == 2 else horovod_dir()
    for line in apply(target):
        print(line)
