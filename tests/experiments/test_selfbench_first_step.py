"""``python -m lab bench first-step``: real 2-rank Horovod (Gloo) and KungFu launches, their
start-up read from the records into results/bench/first_step.json and the table."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lab.__main__ import main as lab_main
from lab.errors import NothingMeasured
from lab.experiments.selfbench import first_step as fs
from lab.experiments.selfbench.cli import BENCHMARKS
from lab.experiments.systems import get_system


def test_first_step_bench_times_each_engines_start_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in fs.SYSTEMS:
        reason = get_system(name).unavailable()
        if reason:
            pytest.skip(f"{name}: {reason}")
    argv = ["bench", "first-step", "--results", str(tmp_path), "--first-step-repeats", "1"]
    assert lab_main(argv) == 0
    assert "first-step" in BENCHMARKS  # so plain `make bench` runs it too
    doc = json.loads((tmp_path / "bench" / "first_step.json").read_text())
    assert doc["benchmark"] == "first_step" and doc["params"]["repeats"] == 1
    assert [r["system"] for r in doc["runs"]] == list(fs.SYSTEMS)
    for run in doc["runs"]:
        assert all(run[m] > 0 for m in fs.MEASURES), run
        # the launch holds the ranks' start-up and their first step; not their sum: the
        # header's time is when the lab read it, which on a loaded machine can fall after
        # the rank began step 0 (seen: 13.0 s + 4.3 s in a 16.7 s launch)
        assert run["wall_s"] > max(run["to_header_s"], run["first_step_s"]), run
    assert set(doc["systems"]) == set(fs.SYSTEMS)
    assert not list(tmp_path.glob("runs/**/manifest.json"))  # runs went to a temporary root
    out = capsys.readouterr().out
    assert "horovod-gloo" in out and "kungfu-sync" in out and "step 0 s" in out


def test_step_times_refuses_a_run_without_steps(tmp_path: Path, monkeypatch) -> None:
    header = pd.DataFrame([{"kind": "header", "rank": 0, "time": 10.0}])
    monkeypatch.setattr("lab.metrics.load_run", lambda run_dir: header)
    with pytest.raises(NothingMeasured, match="no header or no step"):
        fs.step_times(tmp_path, started=5.0)
