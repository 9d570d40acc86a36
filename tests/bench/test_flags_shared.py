"""Workloads share one flag parser, and the lab runs a workload's flag checks before launch."""

from __future__ import annotations

import sys

import pytest

import lab
from lab.bench import elastic, pair_averaging, synthetic
from lab.bench.flags import check_argv
from lab.errors import ParameterError
from lab.metrics.layout import results_root


@pytest.mark.parametrize("module", [synthetic, pair_averaging, elastic])
def test_the_shared_flags_are_checked_alike(module, capsys) -> None:
    for argv, text in (
        (["--batch-size", "0"], "batch-size=0"),
        (["--model", "nope"], "tiny_cnn"),
        (["--lr", "-1"], "lr=-1"),
    ):
        with pytest.raises(SystemExit) as exc:
            module.parse_args(argv)
        assert exc.value.code == 2 and text in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, text",
    [
        (["-m", "lab.bench.synthetic", "--model", "ResNet49"], "ResNet50"),
        (["-m", "lab.bench.synthetic", "--batch-size", "0"], "batch-size=0"),
        (["-m", "lab.bench.elastic", "--optimizer", "rmsprop"], "adam"),
    ],
)
def test_bad_workload_flags_fail_before_any_rank_starts(argv, text) -> None:
    with pytest.raises(ParameterError, match=text):
        check_argv([sys.executable, *argv])
    with pytest.raises(ParameterError, match=text):
        lab.launch([sys.executable, *argv], np=2, experiment="t/flags")
    assert not (results_root() / "runs" / "t" / "flags").exists()  # nothing was started


def test_good_flags_and_other_commands_pass() -> None:
    check_argv([sys.executable, "-m", "lab.bench.synthetic", "--model", "tiny_cnn"])
    check_argv([sys.executable, "-c", "print(1)"])
    check_argv(["python3", "train_imagenet.py", "--batch-size", "0"])  # not ours to check
