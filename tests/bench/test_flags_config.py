"""Typed workload configs (lab.bench.config): one class parses a rank's flags, checks a
point's values and writes the flags back, naming the field or the flag that is wrong."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from lab.bench import synthetic, torch_step_sweep
from lab.bench.config import WorkloadConfig
from lab.bench.flags import check_argv, config_class, parse_command
from lab.errors import ParameterError

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = [
    "lab.bench.synthetic",
    "lab.bench.elastic",
    "lab.bench.kungfu_elastic",
    "lab.bench.pair_averaging",
    "lab.bench.kungfu_regression",
    "lab.bench.adaptive",
    "lab.bench.torch_step_sweep",
    "lab.bench.torch_synthetic",
    "lab.bench.p3.mxnet_workload",
    "lab.bench.p3",
    "lab.bench.easyscale",
    "lab.bench.allreduce",
    "lab.bench.spin",
]


@pytest.mark.parametrize("module", WORKLOADS)
def test_every_workload_exports_a_config_that_round_trips_through_its_flags(module) -> None:
    cls = config_class(module)
    assert cls is not None and issubclass(cls, WorkloadConfig)
    cfg = cls.from_argv([])
    assert cls.from_argv(cfg.to_argv()) == cfg
    assert cls.from_values({}) == cfg
    assert importlib.import_module(module).Config is cls


def test_the_lab_hears_the_field_and_a_shell_the_flag() -> None:
    with pytest.raises(ParameterError) as lab_side:
        synthetic.Config.from_values({"batch_size": 0})
    assert lab_side.value.name == "batch_size"
    with pytest.raises(ParameterError) as shell:
        synthetic.Config.from_argv(["--batch-size", "0"])
    assert shell.value.name == "--batch-size" and ">= 1" in shell.value.allowed
    with pytest.raises(ParameterError) as err:
        synthetic.Config.from_values({"image_size": "big"})
    assert (err.value.name, err.value.allowed) == ("image_size", "an integer")
    with pytest.raises(ParameterError) as err:
        synthetic.Config.from_values({"workers": 2})  # not a setting of the workload
    assert err.value.name == "workers" and "batch_size" in err.value.allowed


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--batch-size", "eight"], "--batch-size"),
        (["--batch-size"], "--batch-size"),  # no value
        (["--bogus", "1"], "flags"),
        (["--b", "1"], "flags"),  # ambiguous: --batch-size or --backend
    ],
)
def test_flags_argparse_refuses_raise_instead_of_exiting(argv, name) -> None:
    with pytest.raises(ParameterError) as err:
        synthetic.Config.from_argv(argv)
    assert err.value.name == name


def test_values_are_converted_as_the_rank_converts_its_flags() -> None:
    cfg = synthetic.Config.from_values({"batch_size": "16", "lr": 1, "model": "resnet50"})
    assert (cfg.batch_size, cfg.lr, cfg.model, cfg.image_size) == (16, 1.0, "ResNet50", 224)
    sweep = torch_step_sweep.Config.from_values({"image_sizes": [32, 48], "in_step": True})
    assert sweep.image_sizes == (32, 48) and sweep.in_step is True
    argv = sweep.to_argv()
    assert argv[argv.index("--image-sizes") + 1] == "32,48" and "--in-step" in argv
    assert torch_step_sweep.Config.from_argv(argv) == sweep
    assert "--checkpoint-dir" not in synthetic.Config().to_argv()  # no empty argument


def test_a_command_is_checked_behind_a_wrapper() -> None:
    """run_point pins ranks with lab.cluster.affinity: its ``-m`` comes first."""
    wrapped = [sys.executable, "-m", "lab.cluster.affinity", "--slots", "2", "--"]
    workload = [sys.executable, "-m", "lab.bench.synthetic", "--model", "nosuch"]
    with pytest.raises(ParameterError, match="--model"):
        check_argv([*wrapped, *workload])
    cfg = parse_command([*wrapped, *workload[:3], "--steps", "7"])
    assert isinstance(cfg, synthetic.Config) and cfg.steps == 7
    assert parse_command([*workload[:3], "--help"]) is None  # the rank prints its help
    assert parse_command([sys.executable, "-m", "lab.bench.tf1_compat", "x.py"]) is None


def test_the_flags_module_imports_no_workload_and_no_engine() -> None:
    """flags <-> backends.common <-> synthetic imported each other; now nothing points up."""
    code = (
        "import sys, lab.bench.flags, lab.bench.backends.common\n"
        "bad = [m for m in ('lab.bench.synthetic', 'tensorflow', 'torch') if m in sys.modules]\n"
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
