"""A user's own scripts, unmodified, launched from their own directory with ``python -m lab
launch``: ranks start there (a relative script path and relative data are found, checkpoints
land there, nothing lands in the checkout), Horovod's Keras callbacks work under the lab's
default rank environment, Horovod's PyTorch API and DDP train under horovodrun, mpirun and
torchrun, and the lab's total is the script's own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster.launchers.base import find_program
from lab.metrics import store

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "tests" / "bin"


def _checkout_state() -> str:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


def _launch(where: Path, launcher: str, np: int, *command: str) -> tuple[Path, str]:
    """``python -m lab launch`` run from ``where``; (its run directory, its output)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    argv = [
        sys.executable, "-m", "lab", "launch", "--launcher", launcher, "-np", str(np),
        "--results", str(where / "results"), "--timeout", "300", "--", *command,
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=400)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    return Path(done.stdout.strip().splitlines()[-1]), said


def _user_dir(tmp_path: Path, script: str) -> Path:
    where = tmp_path / "my-model"
    where.mkdir()
    shutil.copy(BIN / script, where / script)
    return where


@pytest.mark.parametrize("launcher", ["local", "mpi"])
def test_script_reads_relative_data_and_checkpoints_where_launched(
    tmp_path: Path, launcher: str
) -> None:
    if launcher == "mpi" and find_program("mpirun") is None:
        pytest.skip("mpirun is not installed")
    before = _checkout_state()
    where = _user_dir(tmp_path, "relative_files.py")
    (where / "data").mkdir()
    (where / "data" / "points.csv").write_text("".join(f"{x},{2 * x + 1}\n" for x in range(5)))

    run_dir, said = _launch(where, launcher, 2, "python", "relative_files.py", "--steps", "200")

    shown = set(re.findall(r"rank (\d) cwd (\S+)", said))
    assert shown == {("0", str(where)), ("1", str(where))}
    saved = (where / "checkpoint.json").read_text()
    assert '"steps": 200' in saved
    assert run_dir.is_relative_to(where / "results")
    assert "saved checkpoint.json" in (run_dir / "rank-0.log").read_text()
    assert _checkout_state() == before


@pytest.mark.slow
def test_keras_fit_with_horovod_callbacks(tmp_path: Path) -> None:
    if find_program("horovodrun") is None:
        pytest.skip("horovodrun is not installed")
    before = _checkout_state()
    where = _user_dir(tmp_path, "hvd_keras_fit.py")

    run_dir, said = _launch(where, "horovod", 2, "python", "hvd_keras_fit.py", "--epochs", "3")

    assert "has no attribute 'constant'" not in said
    assert sorted(p.name for p in where.glob("checkpoint-*.h5")) == [
        "checkpoint-1.h5", "checkpoint-2.h5", "checkpoint-3.h5",
    ]  # fmt: skip
    rank0 = (run_dir / "rank-0.log").read_text()
    total = re.search(r"^Total img/sec on 2 CPU\(s\): ([0-9.]+) \+-", rank0, re.M)
    assert total, rank0[-2000:]
    row = store.summarize_run(run_dir)
    assert row["throughput_total"] == pytest.approx(float(total.group(1)))
    assert row["throughput_from"] == "script total line"
    assert _checkout_state() == before


def _script_total(run_dir: Path) -> float:
    """X of rank 0's ``Total img/sec on 2 CPU(s): X +-Y`` line, as the script printed it."""
    rank0 = (run_dir / "rank-0.log").read_text()
    total = re.search(r"^Total img/sec on 2 CPU\(s\): ([0-9.]+) \+-", rank0, re.M)
    assert total, rank0[-2000:]
    return float(total.group(1))


def _saved(path: Path) -> dict:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.parametrize("launcher", ["horovod", "mpi"])
def test_horovod_torch_benchmark_script(tmp_path: Path, launcher: str) -> None:
    program = {"horovod": "horovodrun", "mpi": "mpirun"}[launcher]
    if find_program(program) is None:
        pytest.skip(f"{program} is not installed")
    before = _checkout_state()
    where = _user_dir(tmp_path, "hvd_torch_loop.py")

    run_dir, _ = _launch(where, launcher, 2, "python", "hvd_torch_loop.py", "--num-iters", "3")

    assert run_dir.is_relative_to(where / "results")
    saved = _saved(where / "checkpoint.pt")
    assert set(saved) == {"model", "optimizer"}
    assert saved["model"]["4.weight"].shape == (10, 128)
    rank0 = (run_dir / "rank-0.log").read_text()
    assert len(re.findall(r"^Iter #\d: [0-9.]+ img/sec per CPU$", rank0, re.M)) == 3
    row = store.summarize_run(run_dir)
    assert row["throughput_total"] == pytest.approx(_script_total(run_dir))
    assert row["throughput_from"] == "script total line"
    assert _checkout_state() == before


def test_ddp_tutorial_script_under_torchrun(tmp_path: Path) -> None:
    before = _checkout_state()
    where = _user_dir(tmp_path, "ddp_loop.py")

    run_dir, _ = _launch(where, "torchrun", 2, "python", "ddp_loop.py", "3", "1")

    assert run_dir.is_relative_to(where / "results")
    assert _saved(where / "snapshot.pt")["EPOCHS_RUN"] == 3
    for rank in (0, 1):  # both ranks trained every epoch on their half of the data
        log = (run_dir / f"rank-{rank}.log").read_text()
        epochs = re.findall(rf"^\[CPU {rank}\] Epoch (\d) \| Batchsize: 16 \| Steps: 8$", log, re.M)
        assert epochs == ["0", "1", "2"], log[-2000:]
    row = store.summarize_run(run_dir)
    assert row["throughput_total"] == pytest.approx(_script_total(run_dir))
    assert row["throughput_from"] == "script total line"
    assert _checkout_state() == before
