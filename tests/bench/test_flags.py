"""Flags of ``python -m lab.bench.synthetic``: checked at once, before TensorFlow is imported."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.bench import synthetic
from lab.bench.models import MODELS, get_spec, model_names
from lab.errors import ParameterError

ROOT = Path(__file__).resolve().parents[2]

# (argv, text the error must contain)
BAD = [
    (["--model", "ResNet49"], "ResNet50"),
    (["--model", "nope"], "tiny_cnn"),
    (["--backend", "mpi"], "horovod"),
    (["--batch-size", "0"], "batch-size=0"),
    (["--steps", "0"], "steps=0"),
    (["--model", "ResNet50", "--image-size", "31"], ">= 32"),
    (["--model", "InceptionV3", "--image-size", "74"], ">= 75"),
    (["--model", "Xception", "--image-size", "70"], ">= 71"),
    (["--optimizer", "rmsprop"], "adam"),
    (["--monitor", "noise-scale"], "horovod"),  # the single backend has no all-reduce
    (["--backend", "ps", "--monitor", "variance"], "horovod"),
    (["--monitor", "entropy"], "noise-scale"),
    (["--interval", "0", "--backend", "horovod", "--monitor", "variance"], "interval"),
    (["--lr", "0"], "lr=0"),
    (["--backend", "mwms", "--monitor", "variance"], "at least 2 ranks"),  # world of one
    (["--backend", "kungfu-sync"], "KungFu is not installed"),  # no kungfu here
    (["--backend", "kungfu-async"], "pip install"),
]

_PROBE = """
import json, sys, contextlib, io
from lab.bench import synthetic
results = []
for argv, _ in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = synthetic.main(argv)
        except SystemExit as exc:
            code = exc.code
    results.append({"code": code, "stderr": err.getvalue()})
print(json.dumps({"results": results, "tf": "tensorflow" in sys.modules}))
"""


def test_bad_flags_exit_2_with_allowed_values_and_no_tensorflow():
    cases = BAD
    if importlib.util.find_spec("kungfu") is not None:  # the KungFu cases need it absent
        cases = [c for c in BAD if not any(a.startswith("kungfu") for a in c[0])]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "RANK", "WORLD_SIZE")}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(cases)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["tf"] is False, "a bad flag must be refused before TensorFlow is imported"
    for (argv, needle), res in zip(cases, out["results"], strict=True):
        assert res["code"] == 2, (argv, res)
        assert needle in res["stderr"], (argv, res["stderr"])


def test_unknown_model_lists_every_model():
    with pytest.raises(ParameterError) as info:
        get_spec("ResNet49")
    for name in ("tiny_cnn", "small_cnn", "ResNet50", "MobileNetV2", "VGG16", "InceptionV3"):
        assert name in info.value.allowed


def test_names_resolve_case_insensitively_with_default_sizes():
    cfg = synthetic.parse_args(["--model", "resnet50", "--backend", "horovod"])
    assert (cfg.model, cfg.image_size, cfg.backend) == ("ResNet50", 224, "horovod")
    assert synthetic.parse_args(["--model", "InceptionV3"]).image_size == 299
    cfg = synthetic.parse_args(
        ["--model", "mobilenetv2", "--image-size", "64", "--batch-size", "8"]
    )
    assert (cfg.model, cfg.image_size, cfg.batch_size) == ("MobileNetV2", 64, 8)
    assert get_spec("InceptionV3").min_size == 75
    assert model_names()[:2] == ["tiny_cnn", "small_cnn"]


@pytest.mark.slow
def test_every_keras_name_exists_and_inception_min_size_is_keras_own():
    pytest.importorskip("tf_keras")
    from lab.bench.backends.common import setup_tensorflow

    setup_tensorflow()
    import tf_keras

    keras_names = [n for n, s in MODELS.items() if s.family == "keras"]
    missing = [n for n in keras_names if not hasattr(tf_keras.applications, n)]
    assert not missing
    with pytest.raises(ValueError, match="at least 75"):
        tf_keras.applications.InceptionV3(weights=None, input_shape=(74, 74, 3), classes=10)


def test_config_round_trips_through_argv_and_is_checked_without_parsing():
    cfg = synthetic.parse_args(["--model", "MobileNetV2", "--image-size", "64", "--steps", "3"])
    assert synthetic.parse_args(cfg.to_argv()) == cfg
    with pytest.raises(ParameterError, match="backend"):
        synthetic.Config(backend="mpi").checked()
    with pytest.raises(ParameterError, match="image-size"):
        synthetic.Config(model="InceptionV3", image_size=64).checked()
