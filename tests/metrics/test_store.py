"""The results store on run directories fabricated the way the supervisor writes them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from lab.metrics import store
from lab.metrics.records import format_record
from lab.metrics.stats import mean_ci

MakeRun = Callable[..., Path]
Lines = Callable[..., list[str]]

R0 = [1.0, 0.5, 0.25, 0.5]  # seconds per step of 32 samples; the first is warm-up
R1 = [2.0, 1.0, 0.5, 1.0]


def test_load_run_parses_every_rank_log(make_run: MakeRun, rank_lines: Lines) -> None:
    run = make_run(
        params={"model": "smoke", "np": 2, "opt": {"lr": 0.1}},
        logs={0: rank_lines(0, R0), 1: rank_lines(1, R1)},
    )
    df = store.load_run(run)
    assert set(df["rank"]) == {0, 1}
    assert (df["run_id"] == run.name).all()
    assert (df["experiment"] == "exp").all()
    assert (df["np"] == 2).all() and (df["opt.lr"] == 0.1).all()
    lab_steps = df[(df["kind"] == "step") & (df["source"] == "lab")]
    assert len(lab_steps) == 8
    r0 = lab_steps[lab_steps["rank"] == 0].sort_values("step")
    assert r0["throughput"].tolist() == pytest.approx([32.0, 64.0, 128.0, 64.0])
    assert set(df["kind"]) == {"header", "step", "summary", "metric"}
    # a record field and a parameter of the same name: the record's value wins
    header = df[df["kind"] == "header"]
    assert set(header["model"]) == {"smoke"}
    assert (df["log"].isin(["rank-0.log", "rank-1.log"])).all()


def test_load_run_caches_and_rebuilds_when_logs_change(
    make_run: MakeRun, rank_lines: Lines
) -> None:
    run = make_run(logs={0: rank_lines(0, R0)})
    first = store.load_run(run)
    cache = run / store.CACHE_NAME
    assert cache.exists()
    stamp = cache.stat().st_mtime_ns
    again = store.load_run(run)
    assert cache.stat().st_mtime_ns == stamp  # read from the cache, not rebuilt
    pd.testing.assert_frame_equal(first, again, check_dtype=False)

    with (run / "rank-0.log").open("a") as fh:
        fh.write(format_record("step", rank=0, step=4, samples=32, seconds=0.125) + "\n")
    later = os.stat(run / "rank-0.log").st_mtime_ns + 10**9
    os.utime(run / "rank-0.log", ns=(later, later))
    rebuilt = store.load_run(run)
    assert len(rebuilt) == len(first) + 1
    assert rebuilt["throughput"].max() == pytest.approx(256.0)


def test_load_run_tolerates_a_sparse_or_missing_manifest(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "adhoc" / "20250101-000000-abcdef"
    run.mkdir(parents=True)
    (run / "rank-0.log").write_text("[127.0.0.1.10000::stdout] Iter #0: 48.7 img/sec per /gpu:0\n")
    df = store.load_run(run, use_cache=False)
    assert df["throughput"].tolist() == [48.7]
    assert df["experiment"].tolist() == ["adhoc"]
    (run / "manifest.json").write_text(json.dumps({"params": {"np": 1}}))
    row = store.summarize_run(run)
    assert row["state"] is None and row["exit_code"] is None and row["np"] == 1
    assert row["throughput_total"] == pytest.approx(48.7)


def test_load_run_reads_launcher_log_with_tagged_ranks(
    make_run: MakeRun, rank_lines: Lines
) -> None:
    run = make_run(logs={0: rank_lines(0, R0)})
    (run / "launcher.log").write_text(
        "[127.0.0.1.10001::stdout] Iter #0: 47.4 img/sec per /gpu:0\n[I] done\n"
    )
    df = store.load_run(run)
    from_launcher = df[df["log"] == "launcher.log"]
    assert from_launcher["rank"].tolist() == [1]


def test_load_run_of_an_empty_run(make_run: MakeRun) -> None:
    run = make_run(params={"np": 1}, state="failed", exit_code=1)
    df = store.load_run(run)
    assert df.empty
    row = store.summarize_run(run)
    assert row["ranks"] == 0 and row["state"] == "failed" and row["exit_code"] == 1


def _expected_total(*rank_seconds: list[float]) -> float:
    return sum(mean_ci([32 / s for s in secs[1:]]).mean for secs in rank_seconds)


def test_summarize_runs_writes_and_rebuilds_from_directories(
    make_run: MakeRun, rank_lines: Lines, tmp_path: Path
) -> None:
    root = tmp_path / "results"
    one = make_run(params={"model": "smoke", "np": 1}, logs={0: rank_lines(0, R0)})
    two = make_run(
        params={"model": "smoke", "np": 2}, logs={0: rank_lines(0, R0), 1: rank_lines(1, R1)}
    )
    df = store.summarize_runs("exp", root, group_by="np")
    assert df["np"].tolist() == [1, 2]
    assert df["run_id"].tolist() == [one.name, two.name]
    assert df.columns[0] == "np"
    assert df["state"].tolist() == ["succeeded", "succeeded"]
    assert df["ranks"].tolist() == [1, 2]
    assert df["steps"].tolist() == [3, 6]
    assert df["throughput_total"].tolist() == pytest.approx(
        [_expected_total(R0), _expected_total(R0, R1)]
    )
    assert df["throughput_per_rank"].iloc[1] == pytest.approx(_expected_total(R0, R1) / 2)
    ci0 = mean_ci([64, 128, 64]).ci
    ci1 = mean_ci([32, 64, 32]).ci
    assert df["throughput_total_ci"].iloc[1] == pytest.approx((ci0**2 + ci1**2) ** 0.5)
    assert str(df["started"].iloc[0]).endswith("+00:00")

    parquet = root / "exp" / "summary.parquet"
    csv = root / "exp" / "summary.csv"
    assert parquet.exists() and csv.exists()
    saved = pd.read_parquet(parquet)
    parquet.unlink()
    csv.unlink()
    for run in (one, two):
        (run / store.CACHE_NAME).unlink()
    rebuilt = store.summarize_runs("exp", root, group_by="np")
    pd.testing.assert_frame_equal(saved, pd.read_parquet(parquet), check_dtype=False)
    assert rebuilt["throughput_total"].tolist() == pytest.approx(saved["throughput_total"].tolist())
    assert len(pd.read_csv(csv)) == 2


def test_a_later_summary_keeps_the_one_before(
    make_run: MakeRun, rank_lines: Lines, tmp_path: Path
) -> None:
    """A summary written again is a new file; summary.parquet/.csv link to the latest."""
    root = tmp_path / "results"
    make_run(params={"np": 1}, logs={0: rank_lines(0, R0)})
    store.summarize_runs("exp", root)
    latest = store.summary_path("exp", root)
    first = latest.resolve()
    make_run(params={"np": 2}, logs={0: rank_lines(0, R0), 1: rank_lines(1, R1)})
    store.summarize_runs("exp", root)
    assert len(pd.read_parquet(first)) == 1, "the first summary was replaced"
    assert len(pd.read_parquet(latest)) == 2 and latest.resolve() != first
    assert latest.resolve().parent == root / "exp" / "summary"
    csv = latest.with_suffix(".csv")
    assert csv.is_symlink() and csv.resolve().stem == latest.resolve().stem
    kept = root / "exp" / "summary"
    assert len(list(kept.glob("*.parquet"))) == 2 and len(list(kept.glob("*.csv"))) == 2


def test_results_root_from_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make_run: MakeRun, rank_lines: Lines
) -> None:
    make_run(experiment="envexp", params={"np": 1}, logs={0: rank_lines(0, R0)})
    monkeypatch.setenv("DISTLAB_RESULTS", str(tmp_path / "results"))
    assert store.results_root() == tmp_path / "results"
    assert len(store.list_runs("envexp")) == 1
    monkeypatch.delenv("DISTLAB_RESULTS")
    assert store.results_root() == Path(store.__file__).resolve().parents[2] / "results"


def test_list_runs_of_unknown_experiment_is_empty(tmp_path: Path) -> None:
    assert store.list_runs("nothing-here", tmp_path) == []
    assert store.summarize_runs("nothing-here", tmp_path, write=False).empty


def test_aggregate_runs_over_repeats(make_run: MakeRun, rank_lines: Lines, tmp_path: Path) -> None:
    for secs in (R0, R1):
        make_run(params={"np": 1}, logs={0: rank_lines(0, secs)})
    make_run(params={"np": 1}, state="failed", exit_code=1)
    summary = store.summarize_runs("exp", tmp_path / "results", write=False)
    agg = store.aggregate_runs(summary, "np")
    assert agg["runs"].tolist() == [2]
    expected = mean_ci([_expected_total(R0), _expected_total(R1)])
    assert agg["throughput_total"].iloc[0] == pytest.approx(expected.mean)
    assert agg["throughput_total_ci"].iloc[0] == pytest.approx(expected.ci)


def test_pool_runs_pools_every_step_of_repeated_runs(tmp_path) -> None:
    import pandas as pd

    from lab.cluster.rundir import new_run_dir, write_manifest
    from lab.metrics.records import format_record
    from lab.metrics.store import pool_runs

    dirs = []
    for seconds in (1.0, 2.0):  # two repeats of one setting: 10 and 5 samples/s per step
        d = new_run_dir("pool", tmp_path)
        write_manifest(d, params={"setting": "a"}, state="succeeded")
        (d / "rank-0.log").write_text(
            "\n".join(
                format_record("step", rank=0, step=i, samples=10, seconds=seconds) for i in range(4)
            )
            + "\n"
        )
        dirs.append(str(d))
    summary = pd.DataFrame({"setting": ["a", "a"], "state": ["succeeded"] * 2, "run_dir": dirs})
    (row,) = pool_runs(summary, by="setting").to_dict("records")
    assert row["runs"] == 2 and row["steps"] == 8
    assert row["throughput_per_rank"] == 7.5
    assert 0 < row["throughput_per_rank_ci"] < 7.5
