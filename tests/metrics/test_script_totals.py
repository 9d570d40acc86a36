"""Summaries of upstream scripts that report on rank 0 only agree with their own totals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lab.metrics import store

MakeRun = Callable[..., Path]

# Captured from tests/bin/hvd_tf2_tape.py under `horovodrun -np 2 --gloo` on this lab's
# 2-core machine (the run view strips horovodrun's "[0]<stdout>:" tags before logging).
RANK0 = [
    "I0000 00:00:1795443580.013370   20611 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "Iter #0: 6.6 img/sec per CPU",
    "Iter #1: 255.6 img/sec per CPU",
    "Iter #2: 143.8 img/sec per CPU",
    "Img/sec per CPU: 135.3 +-199.6",
    "Total img/sec on 2 CPU(s): 270.7 +-399.1",
]
RANK1 = [
    "I0000 00:00:1795443580.018112   20612 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
]


def test_total_is_the_scripts_total_line(make_run: MakeRun) -> None:
    run = make_run(logs={0: RANK0, 1: RANK1}, np=2, launcher="horovod")
    row = store.summarize_run(run)
    assert row["throughput_total"] == pytest.approx(270.7)  # not rank 0's 135.3
    assert row["throughput_total_ci"] == pytest.approx(399.1)
    assert row["throughput_per_rank"] == pytest.approx(135.35)
    assert row["throughput_from"] == "script total line"
    assert row["ranks"] == 1  # ranks that reported steps


def test_without_a_total_line_per_device_times_devices(make_run: MakeRun) -> None:
    run = make_run(logs={0: RANK0[:-1], 1: RANK1}, np=2)
    row = store.summarize_run(run)
    assert row["throughput_total"] == pytest.approx(2 * 135.3)
    assert row["throughput_from"] == "script per-device rate × devices"
    bare = make_run(logs={0: RANK0[:-2], 1: RANK1}, np=2)
    row = store.summarize_run(bare)
    assert row["throughput_total"] == pytest.approx(2 * (6.6 + 255.6 + 143.8) / 3)
    assert row["throughput_from"] == "reporting ranks' mean × devices"


def test_every_rank_reporting_is_summed_as_before(make_run: MakeRun, rank_lines) -> None:
    """The lab's workloads print steps on every rank (and Horovod's lines on rank 0): the
    measured sum wins over rank 0's extrapolated total line."""
    r0 = [*rank_lines(0, [1.0, 0.5, 0.5]), "Total img/sec on 2 CPU(s): 999.0 +-1.0"]
    run = make_run(logs={0: r0, 1: rank_lines(1, [2.0, 1.0, 1.0])}, np=2)
    row = store.summarize_run(run, warmup=0)
    assert row["ranks"] == 2
    assert row["throughput_from"] == "sum over ranks"
    assert row["throughput_total"] == pytest.approx(64 + 32)  # step 0 is flagged warm-up
