"""env/horovod-patches/apply.py: the installed Horovod's Keras modules take tf.keras's
backend; a second run changes nothing; a tree it does not know fails loudly."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
APPLY = REPO / "env" / "horovod-patches" / "apply.py"

ORIGINAL = """import tensorflow as tf
from tensorflow import keras

if is_version_greater_equal_than(tf.__version__, "2.6.0"):
    from keras import backend as K
else:
    from tensorflow.python.keras import backend as K
"""


def _apply(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-B", str(APPLY), str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _tree(tmp_path: Path, text: str) -> Path:
    keras_dir = tmp_path / "horovod" / "tensorflow" / "keras"
    keras_dir.mkdir(parents=True)
    for name in ("__init__.py", "callbacks.py"):
        (keras_dir / name).write_text(text)
    (keras_dir / "elastic.py").write_text("import tensorflow as tf\n")
    return tmp_path / "horovod"


def test_patch_takes_tf_keras_backend_and_is_idempotent(tmp_path: Path) -> None:
    root = _tree(tmp_path, ORIGINAL)
    first = _apply(root)
    assert first.returncode == 0, first.stderr
    for name in ("__init__.py", "callbacks.py"):
        text = (root / "tensorflow" / "keras" / name).read_text()
        assert "from keras import backend" not in text
        assert "    K = keras.backend" in text
        assert "from tensorflow.python.keras import backend as K" in text  # TF < 2.6 kept
    patched = (root / "tensorflow" / "keras" / "callbacks.py").read_text()
    second = _apply(root)
    assert second.returncode == 0, second.stderr
    assert "(applied)" in second.stdout
    assert (root / "tensorflow" / "keras" / "callbacks.py").read_text() == patched


def test_unknown_tree_fails(tmp_path: Path) -> None:
    done = _apply(_tree(tmp_path, "import tensorflow as tf\n"))
    assert done.returncode != 0
    assert "matched nothing" in done.stderr


def test_installed_horovod_callbacks_use_legacy_keras() -> None:
    """The venv's Horovod, as env/setup.sh leaves it, under the lab's rank default."""
    if importlib.util.find_spec("horovod") is None:
        pytest.skip("horovod is not installed")
    probe = (
        "import horovod.tensorflow.keras.callbacks as c; "
        "print(c.K.__name__.split('.')[0], hasattr(c.K, 'constant'))"
    )
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["tf_keras", "True"]
