"""A failed rank under a launcher that starts every rank from one process (mpirun,
horovodrun, kungfu-run, torchrun) is named from the engine's own words: the lab reports that
rank, its exit code and its last error line, in the raised error, the manifest and the
summary, with real engines and a two-rank job on this machine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from lab.cluster import launch
from lab.cluster.launchers.base import find_program
from lab.errors import RanksFailed
from lab.metrics.layout import read_manifest
from lab.metrics.summaries import summarize_run

FAIL = Path(__file__).resolve().parents[1] / "bin" / "fail_on_rank.py"


def _missing(launcher: str) -> str | None:
    """Why ``launcher`` cannot run here, or None."""
    if launcher == "mpi" and find_program("mpirun") is None:
        return "mpirun is not installed"
    if launcher == "horovod" and importlib.util.find_spec("horovod") is None:
        return "Horovod is not built in this environment"
    if launcher == "kungfu" and find_program("kungfu-run") is None:
        return "KungFu is not installed (make setup builds it: env/build_kungfu.sh)"
    if launcher == "torchrun" and importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    return None


def _fail(launcher: str, tmp_path: Path, *args: str) -> RanksFailed:
    if reason := _missing(launcher):
        pytest.skip(reason)
    with pytest.raises(RanksFailed) as caught:
        launch(
            [sys.executable, str(FAIL), *args],
            np=2,
            launcher=launcher,
            timeout=150,
            results_root=tmp_path,
            view=None,
            grace=2.0,
        )
    return caught.value


def _recorded(err: RanksFailed) -> tuple[dict[str, Any], dict[str, Any]]:
    assert err.run_dir is not None
    return read_manifest(err.run_dir), summarize_run(err.run_dir)


@pytest.mark.parametrize("launcher", ["mpi", "horovod", "kungfu", "torchrun"])
def test_rank_1_exiting_3_is_named_with_its_code_and_words(launcher, tmp_path, probe) -> None:
    err = _fail(launcher, tmp_path, "--rank", "1", "--exitcode", "3")
    root = err.root_cause
    assert root is not None
    assert (root.rank, root.exit_code, root.signal) == (1, 3, None), str(err)
    assert root.message == "rank 1 giving up with 3" and root.launcher_of == ()
    assert err.exit_code == 3  # horovodrun, kungfu-run and torchrun themselves exit 1
    assert str(err).startswith("rank 1 on localhost ended with exit code 3 (named by ")
    manifest, row = _recorded(err)
    expected = "rank 1 on localhost failed (exit code 3): rank 1 giving up with 3"
    assert manifest["error"] == expected == manifest["reason"] == row["error"]
    assert manifest["ranks"]["1"]["exit_code"] == 3 and manifest["exit_code"] == 3
    assert manifest["failures"][0]["rank"] == 1 and manifest["failures"][0]["named_by"]
    probe.assert_nothing_left(Path(err.run_dir))


@pytest.mark.parametrize("launcher", ["mpi", "horovod", "kungfu"])
def test_a_failure_on_rank_0_still_names_rank_0(launcher, tmp_path) -> None:
    err = _fail(launcher, tmp_path, "--rank", "0", "--raise")
    root = err.root_cause
    assert root is not None and (root.rank, root.exit_code) == (0, 1), str(err)
    assert root.message == "RuntimeError: rank 0 cannot go on"
    manifest, row = _recorded(err)
    assert row["error"] == manifest["error"]
    assert manifest["error"].startswith("rank 0 on localhost failed (exit code 1): RuntimeError")
