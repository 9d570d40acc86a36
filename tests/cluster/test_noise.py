"""Start-up noise vs errors in the run view, on lines TensorFlow, absl and Python printed."""

from __future__ import annotations

import pytest

from lab.cluster.noise import classify
from lab.cluster.view_render import log_html
from lab.metrics.records import format_record

# Printed on stderr by TensorFlow 2.20 in this lab's venv on a CPU machine, one rank each.
TF_STARTUP = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795442955.887603   18614 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results due to floating-point round-off errors from "
    "different computation orders. To turn them off, set the environment variable "
    "`TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795442955.892446   18614 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795442956.015682   18614 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other "
    "operations, rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795442964.933237   18614 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    # TensorFlow 2.15/2.16 (the Horovod-era pins) print the same with a timestamp first.
    "2024-03-11 10:02:11.482511: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261]"
    " Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when "
    "one has already been registered",
    "2024-03-11 10:02:11.482571: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:607]"
    " Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when "
    "one has already been registered",
    "2024-03-11 10:02:12.611734: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] "
    "TF-TRT Warning: Could not find TensorRT",
    "WARNING:tensorflow:From /venv/lib/python3.11/site-packages/tf_keras/src/losses.py:2976: "
    "The name tf.losses.sparse_softmax_cross_entropy is deprecated.",
]

REAL_ERRORS = [
    "Traceback (most recent call last):",
    '  File "/work/lab/bench/synthetic.py", line 88, in <module>',
    "AttributeError: 'Variable' object has no attribute 'ref'",
    "lab.errors.ParameterError: model='resnet5' is not allowed; allowed: resnet50, vgg16",
    "RuntimeError: Gloo connectFullMesh failed",
    # an E line that is not known start-up noise stays an error
    "E0000 00:00:1795443000.000001   18614 collective_ops.cc:41] Collective ops is aborted by:"
    " failed to connect to all addresses",
    "2024-03-11 10:02:15.000001: F tensorflow/core/framework/tensor.cc:733] Check failed: "
    "dtype() == expected_dtype",
    "[guard] cannot start 'no-such-program': [Errno 2] No such file or directory",
]

# The lab's own housekeeping on a rank's stderr (lab.cluster.affinity, lab.cluster.guard):
# every rank prints the first, and the guard's lines follow every run's end or stop.
LAB_NOTICES = [
    "distlab: rank pinned to CPU 0",
    "distlab: rank pinned to CPU 0,1",
    "[guard] pid 4242 exited; ending the processes it left behind",
    "[guard] got SIGTERM; ending pid 4242 and its descendants",
    "[guard] 2 process(es) outlived SIGTERM by 5s; sending SIGKILL",
]


@pytest.mark.parametrize("text", TF_STARTUP)
def test_tensorflow_startup_lines_are_info(text: str) -> None:
    assert classify("stderr", text) == "info"


@pytest.mark.parametrize("text", LAB_NOTICES)
def test_lab_housekeeping_lines_are_info(text: str) -> None:
    assert classify("stderr", text) == "info"


@pytest.mark.parametrize("text", REAL_ERRORS)
def test_real_errors_stay_errors(text: str) -> None:
    assert classify("stderr", text) == "error"


def test_stdout_and_records() -> None:
    assert classify("stdout", "Iter #3: 152.4 img/sec per CPU") == "out"
    assert classify("stdout", format_record("step", step=1, samples=8, seconds=0.1)) == "record"
    assert classify("stdout", "Traceback (most recent call last):") == "out"


def test_log_pane_shows_noise_grey_and_errors_red() -> None:
    entries = [("stderr", TF_STARTUP[1]), ("stderr", REAL_ERRORS[2]), ("stdout", "hello")]
    lines = log_html(entries).split("\n")
    assert 'color:#999">I0000' in lines[0] and "#b22" not in lines[0]
    assert 'color:#b22">AttributeError' in lines[1]
    assert lines[2].startswith("hello")
