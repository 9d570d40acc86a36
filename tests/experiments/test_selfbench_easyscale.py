"""``python -m lab bench easyscale``: flags reach the EST micro-benchmark, its numbers reach
results/bench/easyscale.json and the printed table. The benchmark itself (real EST runs) is
what the Fig 11/13 notebook runs; here it is replaced by a recorder, so no torch starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.__main__ import main as lab_main
from lab.experiments.easyscale import overhead
from lab.experiments.selfbench.cli import BENCHMARKS

NUMBERS = {
    "switch_us": 123.4,
    "grad_copy_us": 45.6,
    "switch_share": 0.0123,
    "overhead_vs_plain": 0.031,
    "switch_overhead": -0.002,
}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def recorder(**kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        params = {"ests": 4, "steps": kwargs["steps"], "repeats": kwargs["repeats"]}
        return {"params": params, **NUMBERS, "runs": ["runs/easyscale-overhead/r1"]}

    monkeypatch.setattr(overhead, "microbench", recorder)
    return seen


def test_easyscale_bench_writes_its_json_and_table(
    tmp_path: Path, calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "easyscale", "--results", str(tmp_path), "--est-steps", "5"]
    assert lab_main([*argv, "--est-repeats", "3"]) == 0
    assert calls == [{"steps": 5, "repeats": 3, "results_root": tmp_path}]
    assert "easyscale" in BENCHMARKS  # so plain `make bench` runs it too
    doc = json.loads((tmp_path / "bench" / "easyscale.json").read_text())
    assert doc["benchmark"] == "easyscale" and doc["machine"]["cpu_count"] >= 1
    assert {k: doc[k] for k in NUMBERS} == NUMBERS
    assert doc["params"]["steps"] == 5 and doc["runs"] == ["runs/easyscale-overhead/r1"]
    assert not (tmp_path / "bench" / "launch_overhead.json").exists()  # only what was named
    out = capsys.readouterr().out
    assert "123.4 µs" in out and "+3.10%" in out and "1.23%" in out


@pytest.mark.parametrize("flag", [["--est-steps", "1"], ["--est-repeats", "0"]])
def test_easyscale_bench_refuses_bad_counts_before_running(
    tmp_path: Path, calls: list[dict[str, Any]], flag: list[str]
) -> None:
    assert lab_main(["bench", "easyscale", "--results", str(tmp_path), *flag]) == 2
    assert calls == [] and not (tmp_path / "bench").exists()
