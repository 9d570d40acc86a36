"""``python -m lab bench`` at a tiny size: real launches (local and mpirun), real JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.__main__ import main as lab_main
from lab.experiments.selfbench.streaming import check_log

LINES = 2000


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bench-results")
    argv = ["bench", "launch", "streaming", "--results", str(root), "--repeats", "1"]
    argv += ["--stream-repeats", "1"]
    assert lab_main([*argv, "--lines", str(LINES), "--timeout", "120"]) == 0
    return root / "bench"


def test_launch_overhead_json(bench_dir: Path) -> None:
    doc = json.loads((bench_dir / "launch_overhead.json").read_text())
    assert doc["benchmark"] == "launch_overhead"
    kept = list(bench_dir.glob("launch_overhead-*.json"))  # the dated copy that is never replaced
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == doc
    assert doc["machine"]["cpu_count"] >= 1 and doc["machine"]["python"]
    assert "commit" in doc["machine"]["git"]
    assert doc["params"]["np"] == 2 and doc["params"]["repeats"] == 1
    assert doc["target_overhead_s"] == 0.05 and doc["core_speed"]["before"] > 0
    assert set(doc["launchers"]) == {"local", "mpi"}
    for entry in doc["launchers"].values():
        assert len(entry["bare_s"]) == len(entry["lab_s"]) == len(entry["lab_run_s"]) == 1
        assert entry["bare_median_s"] > 0 and entry["lab_median_s"] > 0
        assert entry["ratio"] == pytest.approx(entry["lab_median_s"] / entry["bare_median_s"])
    mpirun = doc["launchers"]["mpi"]["bare_command"]
    assert mpirun[-2:] == ["-c", "pass"] and "-np" in mpirun and "--bind-to" in mpirun


def test_streaming_json_loses_no_line(bench_dir: Path) -> None:
    doc = json.loads((bench_dir / "streaming.json").read_text())
    assert doc["benchmark"] == "streaming"
    assert doc["params"]["lines_per_rank"] == LINES and doc["params"]["np"] == 2
    assert doc["lines_lost"] == 0
    assert len(doc["devnull"]["rank_s"]) == 2 and doc["devnull"]["rank_median_s"] > 0
    settings = {(r["launcher"], r["sink"]) for r in doc["runs"]}
    assert settings == {(la, s) for la in ("local", "mpi") for s in ("files", "files+widget")}
    # an untimed short run of each setting first (its lines checked too), apart from the runs
    warmup = doc["warmup_runs"]
    assert {(r["launcher"], r["sink"]) for r in warmup} == settings and len(warmup) == 4
    assert all(r["lost"] == 0 and r["ranks"]["0"]["found"] == 1000 for r in warmup)
    for run in doc["runs"]:
        assert run["lost"] == 0 and run["out_of_order"] == 0
        for rank in ("0", "1"):
            assert run["ranks"][rank]["found"] == LINES
            assert run["ranks"][rank]["rank_seconds"] > 0  # the count line arrived too
        if run["sink"] == "files+widget":
            # every numbered line and the count line reached the observers and the view
            assert run["observer_lines"]["0"] == run["observer_lines"]["1"] == LINES + 1
            assert run["widget_lines"] >= 2 * (LINES + 1)
            assert run["widget_shows_end"] is True
    for row in doc["summary"]:
        assert row["lines_per_s"] > 0 and row["slowdown"] > 0 and row["lost"] == 0
        assert row["met_lines_per_s"] == (row["lines_per_s"] >= row["target_lines_per_s"])
        assert row["met_slowdown"] == (row["slowdown"] <= doc["targets"]["slowdown"])
        if row["launcher"] == "mpi":  # held to what mpirun alone passes on, if lower
            ceiling = doc["mpirun_devnull"]["lines_per_s"]
            assert row["target_lines_per_s"] == min(1_000_000, 0.8 * ceiling)
            assert row["slowdown_against"] == "mpirun into /dev/null"
            against = doc["mpirun_devnull"]["rank_median_s"]
        else:
            assert row["target_lines_per_s"] == 1_000_000
            against = doc["devnull"]["rank_median_s"]
        assert row["slowdown"] == pytest.approx(row["rank_s"] / against)
        if row["sink"] == "files+widget":  # the widget path, measured on its own
            assert row["observer_lines_per_s"] > 0 and row["redraw_s"] >= 0
    assert doc["targets"] == {
        "lines_per_s": 1_000_000,
        "slowdown": 3.0,
        "lost": 0,
        "mpi_share_of_mpirun": 0.8,
    }
    assert len(doc["mpirun_devnull"]["wall_s"]) == 1 and doc["mpirun_devnull"]["lines_per_s"] > 0
    assert len(doc["mpirun_devnull"]["rank_s"]) == 2  # each rank's own time under mpirun
    assert doc["core_speed"]["before"] > 0 and doc["core_speed"]["after"] > 0


def test_check_log_counts_lost_and_reordered_lines(tmp_path: Path) -> None:
    log = tmp_path / "rank-1.log"
    numbers = [0, 1, 2, 5, 4, 6, 7]  # 3 missing, 4 after 5
    body = [f"rank 1 line {i}" for i in numbers]
    log.write_text("\n".join([*body, "[guard] noise", "spew done rank=1 lines=8 seconds=0.5"]))
    got = check_log(log, rank=1, lines=8)
    assert got["found"] == 6 and got["lost"] == 2
    assert got["out_of_order"] == 1 and got["other"] == 1
    assert got["rank_seconds"] == 0.5


def test_bench_rejects_unknown_benchmark(tmp_path: Path) -> None:
    assert lab_main(["bench", "--results", str(tmp_path), "nosuch"]) == 2
    assert not (tmp_path / "bench").exists()
