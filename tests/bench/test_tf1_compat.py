"""Upstream TF1 scripts run unmodified on TensorFlow 2 (lab.bench.tf1_compat): the graph-mode
API they use is there, tf.contrib fails only when used, and the script gets its own argv."""

from __future__ import annotations

import subprocess
import sys

import pytest

TF1_SCRIPT = """
import sys
import tensorflow as tf
from tensorflow.contrib.image.python.ops import distort_image_ops

config = tf.ConfigProto()
x = tf.placeholder(tf.float32, [2])
y = tf.reduce_sum(x * 2)
with tf.Session(config=config) as session:
    print("sum", session.run(y, {x: [1.0, 2.0]}))
try:
    distort_image_ops.random_hsv_in_yiq
except RuntimeError as e:
    print("contrib:", e)
print("argv", sys.argv[1:], __name__)
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lab.bench.tf1_compat", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.slow
def test_a_tf1_script_runs_as_it_is(tmp_path):
    script = tmp_path / "tf1.py"
    script.write_text(TF1_SCRIPT)
    done = run(str(script), "--model=x", "-v")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sum 6.0" in done.stdout
    assert "contrib: tensorflow.contrib.image.python.ops.distort_image_ops." in done.stdout
    assert "tf.contrib is not in TensorFlow 2" in done.stdout
    assert "argv ['--model=x', '-v'] __main__" in done.stdout


def test_no_script_is_a_usage_error(tmp_path):
    done = run(str(tmp_path / "missing.py"))
    assert done.returncode == 2 and "usage" in done.stderr
