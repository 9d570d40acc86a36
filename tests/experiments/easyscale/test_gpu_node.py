"""The GPU node's EasyScale driver runs the rooms' functions outside Jupyter, and one
figure's failure does not stop the others (checked on this machine's CPU profile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.experiments.easyscale import gpu_node
from lab.experiments.saved import load_verdict


def test_runs_fig12_on_a_cpu_profile_and_saves_its_verdict(_isolated_results: Path) -> None:
    argv = ["--cluster", "easyscale-local", "--model", "bn_cnn", "--image-size", "16",
            "--batch-size", "8", "--steps", "3", "--figures", "fig12",
            "--scale", "smoke"]  # fmt: skip
    assert gpu_node.main(argv) == 0
    saved = load_verdict("easyscale", "Fig 12", "smoke", results=_isolated_results)
    assert saved["runs"], "a verdict with the runs behind it"
    assert "CPU device types" in saved["hardware"] and saved["scale"] == "smoke"


def test_a_failing_figure_is_reported_and_the_exit_status_says_so(capsys) -> None:
    # easyscale-gpu-1's device types are kind cuda: refused before launch on a CPU machine
    pytest.importorskip("torch")
    from lab.bench.easyscale.device import cuda_available

    if cuda_available():
        pytest.skip("this machine has a GPU")
    assert gpu_node.main(["--figures", "fig12,fig10", "--steps", "2"]) == 1
    out = capsys.readouterr()
    assert "failed: fig12, fig10" in out.err
    assert "ParameterError" in out.err  # each figure's traceback says why it failed


def test_an_unknown_figure_is_refused_before_any_runs(_isolated_results: Path) -> None:
    with pytest.raises(SystemExit):
        gpu_node.main(["--cluster", "easyscale-local", "--figures", "fig12,fig99"])
    assert not (_isolated_results / "runs").exists()
