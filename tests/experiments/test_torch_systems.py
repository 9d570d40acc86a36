"""The PyTorch systems, really launched as a notebook's point is: DDP under torchrun and
Horovod's PyTorch API under mpirun train the lab's small CNN on 2 ranks, every rank reports
its steps, and the run's total is the sum over ranks (the lab's own workload)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.experiments import SYSTEMS, run_point
from lab.metrics import load_run, summarize_run


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("system", ["torch-ddp", "horovod-torch"])
def test_pytorch_system_trains_on_two_ranks(tmp_path: Path, system: str) -> None:
    why = SYSTEMS[system].unavailable()
    if why:
        pytest.skip(why)
    point = {"system": system, "model": "small_cnn", "workers": 2, "steps": 4}
    result = run_point(point, "try/torch", results_root=tmp_path, view=None, timeout=300)
    logs = {p.name: p.read_text()[-1500:] for p in result.run_dir.glob("*.log")}
    assert result.ok, logs
    records = load_run(result.run_dir)
    headers = records[records["kind"] == "header"].set_index("rank")
    assert sorted(headers.index) == [0, 1]
    assert set(headers["backend"]) == {system}
    assert set(headers["world_size"]) == {2}
    engine = {"torch-ddp": "torch.distributed (gloo)", "horovod-torch": "horovod.torch"}[system]
    assert set(headers["engine"]) == {engine}
    steps = records[(records["kind"] == "step") & (records["source"] == "lab")]
    assert sorted(steps.groupby("rank").size().items()) == [(0, 7), (1, 7)]  # 3 warm-up + 4
    row = summarize_run(result.run_dir)
    assert row["throughput_from"] == "sum over ranks" and row["throughput_total"] > 0
