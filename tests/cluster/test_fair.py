"""Emulated hosts give their ranks fair engine settings by default, overridable."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lab.cluster import emulation, launch
from lab.cluster.emulation import fair, spec
from lab.cluster.inventory import cluster_from_dict
from lab.errors import ParameterError

WHY = emulation.missing()
needs_root = pytest.mark.skipif(WHY is not None, reason=WHY or "")
SHOWN = ("OMPI_MCA_mpi_yield_when_idle", "HOROVOD_CYCLE_TIME", "TF_NUM_INTRAOP_THREADS",
         "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")  # fmt: skip


def test_threads_follow_the_cpu_share() -> None:
    small = fair.fair_env(0.4)
    assert small["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert small["HOROVOD_CYCLE_TIME"] == str(fair.CYCLE_TIME_MS)
    compute = [v for v in fair.THREAD_VARIABLES if v != "TF_NUM_INTEROP_THREADS"]
    assert {small[v] for v in compute} == {"1"}
    assert small["TF_NUM_INTEROP_THREADS"] == "2"  # TF's PS runtime deadlocks with one
    assert {fair.fair_env(2.5)[v] for v in fair.THREAD_VARIABLES} == {"3"}
    assert not set(fair.THREAD_VARIABLES) & set(fair.fair_env(None))  # no quota, no caps


def test_profile_turns_them_off_or_changes_one() -> None:
    assert fair.fair_env(0.4, False) == {}
    changed = fair.fair_env(0.4, {"HOROVOD_CYCLE_TIME": 1, "OMP_NUM_THREADS": None})
    assert changed["HOROVOD_CYCLE_TIME"] == "1" and "OMP_NUM_THREADS" not in changed
    assert changed["TF_NUM_INTRAOP_THREADS"] == "1"


@pytest.mark.parametrize("bad", ["yes", 1, ["OMP_NUM_THREADS"], {"": 1}])
def test_bad_fair_setting_fails_before_anything_starts(bad: object) -> None:
    with pytest.raises(ParameterError, match=r"emulated\.fair"):
        spec.host_specs({"hosts": 1, "fair": bad}, ["h1"])


def _seen(tmp_path: Path, emulated: dict, env: dict | None = None) -> tuple[dict, dict]:
    """What a rank on an emulated host sees of SHOWN, and the manifest's record."""
    cluster = cluster_from_dict({"name": "fair", "emulated": emulated}, "fair")
    code = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {SHOWN!r}}}))"
    result = launch([sys.executable, "-c", code], np=1, cluster=cluster, experiment="fair",
                    view=None, results_root=tmp_path, timeout=60, env=env)  # fmt: skip
    seen = json.loads((result.run_dir / "rank-0.log").read_text().strip().splitlines()[-1])
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    return seen, manifest["cluster"]["emulation"]


@needs_root
@pytest.mark.root
@pytest.mark.timeout(60)
def test_ranks_get_the_fair_defaults_and_the_manifest_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SHOWN:
        monkeypatch.delenv(name, raising=False)
    seen, emu = _seen(tmp_path, {"hosts": 1, "cpu": 0.4}, env={"HOROVOD_CYCLE_TIME": "2"})
    assert seen["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert seen["TF_NUM_INTRAOP_THREADS"] == "1" and seen["OMP_NUM_THREADS"] == "1"
    assert seen["HOROVOD_CYCLE_TIME"] == "2"  # the run's own setting wins
    assert emu["fair"] is True and emu["hosts"]["h1"]["env"]["HOROVOD_CYCLE_TIME"] == "5"
    seen, emu = _seen(tmp_path, {"hosts": 1, "cpu": 0.4, "fair": False})
    assert set(seen.values()) == {None}
    assert emu["fair"] is False and emu["hosts"]["h1"]["env"] == {}


@needs_root
@pytest.mark.slow
@pytest.mark.root
def test_a_tensorflow_parameter_server_job_runs_under_the_fair_defaults(tmp_path) -> None:
    """With one inter-op thread TF's PS runtime never took a step here (timed out)."""
    import sys

    import lab

    result = lab.launch(
        [sys.executable, "-m", "lab.bench.synthetic", "--backend", "ps", "--model", "tiny_cnn",
         "--steps", "3", "--warmup-steps", "1"],
        np=1, launcher="ps", cluster="emulated-2", options={"num_ps": 1}, timeout=150,
        view=None, check=False, experiment="t/fair-ps", results_root=tmp_path,
    )  # fmt: skip
    assert result.ok, result.reason
