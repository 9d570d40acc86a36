"""One KungFu and one Horovod figure notebook at smoke scale on the ``slurm-local``
profile, against a real single-node Slurm (lab.cluster.slurm.testbed; the kernel finds it
through SLURM_CONF), each kept to one run by its own parameters (one system, one round):
the run is a Slurm job, listed by squeue while it runs and gone afterwards, and the
notebook saves its verdict with its figure."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from slurm_helpers import Watch

from lab.cluster.inventory import PROFILE_DIR
from lab.cluster.slurm.testbed import LocalSlurm
from lab.experiments.notebooks import NOTEBOOK_DIR, run_notebook

PROFILE = str(PROFILE_DIR / "slurm-local.yaml")


class QueueWatch(Watch):
    """Every job id squeue listed while the block ran (asked every 0.2 s)."""

    def __init__(self, slurm: LocalSlurm) -> None:
        super().__init__(slurm)
        self.seen = set[str]()

    def look(self) -> None:
        self.seen.update(self.slurm.queue())


def run_through_slurm(
    slurm: LocalSlurm, notebook: str, parameters: Mapping[str, Any], out: Path, results: Path
) -> list[dict[str, Any]]:
    """Run ``notebook`` on the slurm-local profile; check it ran its jobs through Slurm
    (each seen in squeue, none left) and saved a verdict on those runs and a figure;
    return the runs' manifests."""
    started = time.monotonic()
    with QueueWatch(slurm) as watch:
        result = run_notebook(
            NOTEBOOK_DIR / notebook,
            out / Path(notebook).name,
            {"scale": "smoke", "cluster": PROFILE, **parameters},
            timeout=400,
        )
    took = time.monotonic() - started
    assert result.ok, f"{notebook} failed: {result.error} (executed copy: {out})"
    assert slurm.queue_within(5.0) == [], "a job stayed queued after the notebook"
    manifests = sorted(results.glob("runs/**/manifest.json"))
    assert manifests, f"{notebook} recorded no run"
    runs = []
    for path in manifests:
        info = json.loads(path.read_text())
        assert info["state"] == "succeeded", (path, info.get("reason"))
        assert info["slurm"]["nodes"] == [slurm.node] and info["slurm"]["allocated_by_run"]
        job = info["slurm"]["job_id"]
        assert job in watch.seen, f"squeue never listed job {job} (saw {sorted(watch.seen)})"
        runs.append(info)
    verdicts = [json.loads(p.read_text()) for p in results.glob("verdicts/*/*/*.json")]
    assert len(verdicts) == 1, f"{notebook} saved {len(verdicts)} verdicts under {results}"
    (verdict,) = verdicts
    assert verdict["runs"] and {str(Path(r)) for r in verdict["runs"]} <= {
        str(m.parent) for m in manifests
    }, f"the verdict names runs {verdict['runs']} that are not these Slurm jobs' runs"
    assert list(results.glob("figures/*/*/*.html")), f"{notebook} saved no figure"
    print(f"verdict: {verdict['status']}: {verdict['why']}")
    jobs = [r["slurm"]["job_id"] for r in runs]
    print(f"{notebook} through Slurm: {took:.1f} s, job(s) {jobs}")
    return runs


@pytest.mark.slow
def test_kungfus_monitoring_overhead_figure_runs_as_slurm_jobs(
    slurm: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_results: Path
) -> None:
    """KungFu's Fig 8, KungFu's own monitors only: one run of kungfu-run per node through
    srun, switching the monitor off and on within it (one round)."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    params = {"systems": ["kungfu-monitor"], "budget_s": 1.0}
    notebook = "kungfu/fig8_monitoring_overhead.ipynb"
    runs = run_through_slurm(slurm, notebook, params, tmp_path, _isolated_results)
    assert {r["launcher"] for r in runs} == {"kungfu"}


@pytest.mark.slow
def test_sync_sgd_figure_with_horovod_runs_as_slurm_jobs(
    slurm: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_results: Path
) -> None:
    """The synchronous-SGD benchmark, Horovod (Gloo, through horovodrun) only, two
    workers, one round."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    params = {"systems": ["horovod-gloo"], "workers": [2], "budget_s": 1.0, "min_rounds": 0}
    notebook = "benchmark/sync_sgd.ipynb"
    runs = run_through_slurm(slurm, notebook, params, tmp_path, _isolated_results)
    assert {r["launcher"] for r in runs} == {"horovod"}
