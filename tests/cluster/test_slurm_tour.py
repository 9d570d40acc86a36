"""The tour notebook at smoke scale on the ``slurm-local`` profile, against a real
single-node Slurm (lab.cluster.slurm.testbed; the kernel finds it through SLURM_CONF): its
run is a Slurm job, listed by squeue while it runs and gone afterwards."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from lab.cluster.inventory import PROFILE_DIR
from lab.cluster.slurm.testbed import LocalSlurm
from lab.experiments.notebooks import NOTEBOOK_DIR, run_notebook


@pytest.mark.slow
def test_the_tour_runs_as_a_slurm_job(
    slurm: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_results: Path
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.update(slurm.queue())
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        result = run_notebook(
            NOTEBOOK_DIR / "00_tour.ipynb",
            tmp_path / "00_tour.ipynb",
            {"scale": "smoke", "cluster": str(PROFILE_DIR / "slurm-local.yaml")},
            timeout=300,
        )
    finally:
        stop.set()
        watcher.join(5)
    took = time.monotonic() - started
    assert result.ok, f"the tour failed: {result.error} (executed copy: {tmp_path})"
    (manifest,) = (_isolated_results / "runs" / "tour").glob("*/manifest.json")
    info = json.loads(manifest.read_text())
    job = info["slurm"]["job_id"]
    assert info["state"] == "succeeded" and info["slurm"]["nodes"] == [slurm.node]
    assert job in seen, f"squeue never listed the tour's job {job} (saw {sorted(seen)})"
    assert slurm.queue_within(5.0) == []
    print(f"tour through Slurm: {took:.1f} s, job {job}, launcher {info['launcher']}")
