"""Run directories written the way the supervisor writes them (lab.cluster.rundir)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from lab.cluster.rundir import new_run_dir, timestamp, write_manifest
from lab.metrics.records import format_record

MakeRun = Callable[..., Path]


def _rank_lines(
    rank: int, step_seconds: Sequence[float], samples: int = 32, warmup: int = 1
) -> list[str]:
    """What a lab.bench rank prints: a header, ``@lab`` step records, the upstream
    benchmark's lines (which must not be counted twice), monitor output and a summary."""
    lines = [
        "2025-01-01 12:00:00.000000: I tensorflow/core/platform/cpu_feature_guard.cc:210] "
        "This TensorFlow binary is optimized to use available CPU instructions.",
        format_record(
            "header", rank=rank, model="smoke", backend="horovod", world_size=2, time=1.0
        ),
    ]
    for step, sec in enumerate(step_seconds):
        lines.append(
            format_record(
                "step",
                rank=rank,
                step=step,
                samples=samples,
                seconds=sec,
                warmup=step < warmup,
                time=2.0 + step,
            )
        )
        if step >= warmup:
            lines.append(f"Iter #{step - warmup}: {samples / sec:.1f} img/sec per CPU")
    lines.append("Gradient Noise Scale: 996.805725")
    lines.append(format_record("summary", rank=rank, steps=len(step_seconds), time=9.0))
    return lines


@pytest.fixture
def rank_lines() -> Callable[..., list[str]]:
    """``rank_lines(rank, step_seconds, samples=32, warmup=1)``: one rank's log lines."""
    return _rank_lines


@pytest.fixture
def make_run(tmp_path: Path) -> MakeRun:
    """Create a run directory under ``tmp_path/results`` with logs and a manifest."""

    def make(
        experiment: str = "exp",
        params: Mapping[str, Any] | None = None,
        logs: Mapping[int, Sequence[str]] | None = None,
        state: str = "succeeded",
        exit_code: int = 0,
        **manifest: Any,
    ) -> Path:
        root = tmp_path / "results"
        run_dir = new_run_dir(experiment, root)
        now = time.time()
        write_manifest(
            run_dir,
            experiment=experiment,
            params=dict(params or {}),
            launcher="local",
            started=timestamp(now),
        )
        for rank, lines in (logs or {}).items():
            (run_dir / f"rank-{rank}.log").write_text(
                "".join(line + "\n" for line in lines), encoding="utf-8"
            )
        write_manifest(
            run_dir, state=state, exit_code=exit_code, ended=timestamp(now + 1), **manifest
        )
        return run_dir

    return make
