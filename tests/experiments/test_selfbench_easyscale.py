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
from lab.experiments.selfbench.cli import BENCHMARKS, easyscale_table

NUMBERS = {
    "switch_us": 123.4,
    "grad_copy_us": 45.6,
    "switch_share": 0.0123,
    "overhead_vs_plain": 0.031,
    "switch_overhead": -0.002,
    "est_step_s": 0.0301,
    "est_step_cpu_s": 0.0052,
}
LONG = {
    "params": {"ests": 4, "steps": 6, "repeats": 3, "image_size": 112, "batch_size": 16},
    "switch_us": 98.7,
    "switch_share": 0.0021,
    "switch_share_runs": [0.0019, 0.0024],
    "est_step_s": 0.41,
    "est_step_cpu_s": 0.118,
}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def recorder(**kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        params = {"ests": 4, "steps": kwargs["steps"], "repeats": kwargs["repeats"]}
        out = {"params": params, **NUMBERS, "runs": ["runs/easyscale-overhead/r1"]}
        if kwargs["long_steps"]:
            fig11 = {"status": "reproduced", "compared_with": "paper-like step (x)",
                     "target_share": 0.01}  # fmt: skip
            out |= {"long_step": LONG, "fig11": fig11}
        return out

    monkeypatch.setattr(overhead, "microbench", recorder)
    return seen


def test_easyscale_bench_writes_its_json_and_table(
    tmp_path: Path, calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "easyscale", "--results", str(tmp_path), "--est-steps", "5"]
    assert lab_main([*argv, "--est-repeats", "3"]) == 0
    assert calls == [{"steps": 5, "repeats": 3, "long_steps": 6, "results_root": tmp_path}]
    assert "easyscale" in BENCHMARKS  # so plain `make bench` runs it too
    doc = json.loads((tmp_path / "bench" / "easyscale.json").read_text())
    assert doc["benchmark"] == "easyscale" and doc["machine"]["cpu_count"] >= 1
    assert {k: doc[k] for k in NUMBERS} == NUMBERS
    assert doc["params"]["steps"] == 5 and doc["runs"] == ["runs/easyscale-overhead/r1"]
    assert not (tmp_path / "bench" / "launch_overhead.json").exists()  # only what was named
    assert doc["long_step"] == LONG and doc["fig11"]["compared_with"] == "paper-like step (x)"
    assert doc["core_speed"]["before"] > 0 and doc["core_speed"]["after"] > 0
    out = capsys.readouterr().out
    assert "123.4 µs" in out and "+3.10%" in out and "1.23%" in out and "load average" in out
    assert "an EST mini-batch 5.2 ms CPU, 30.1 ms wall" in out
    assert "(bn_cnn, 112 px, batch 16), 6 steps x 3 run(s): an EST mini-batch 118.0 ms CPU" in out
    assert "98.7 µs" in out and "0.21%   target <= 1%: ok (per run: 0.19%, 0.24%)" in out
    assert "Fig 11: reproduced, compared with paper-like step (x)" in out
    assert "core speed" in out


def test_a_paper_like_step_beyond_the_target_is_flagged() -> None:
    dear = {**LONG, "switch_share": 0.015, "switch_share_runs": []}
    fig11 = {"status": "not reproduced", "compared_with": "p", "target_share": 0.01}
    data = {"params": {"ests": 4, "steps": 5, "repeats": 1}, **NUMBERS, "long_step": dear,
            "fig11": fig11}  # fmt: skip
    table = easyscale_table(data)
    assert "1.50%   target <= 1%: MISSED" in table and "Fig 11: not reproduced" in table
    skipped = easyscale_table({"params": data["params"], **NUMBERS})
    assert "paper-like" not in skipped and "Fig 11" not in skipped


@pytest.mark.parametrize(
    "flag",
    [["--est-steps", "1"], ["--est-repeats", "0"], ["--est-long-steps", "1"],
     ["--est-long-steps", "-2"]],
)  # fmt: skip
def test_easyscale_bench_refuses_bad_counts_before_running(
    tmp_path: Path, calls: list[dict[str, Any]], flag: list[str]
) -> None:
    assert lab_main(["bench", "easyscale", "--results", str(tmp_path), *flag]) == 2
    assert calls == [] and not (tmp_path / "bench").exists()
