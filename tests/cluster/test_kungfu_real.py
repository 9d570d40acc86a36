"""Real KungFu peers through lab.cluster.launch: S-SGD keeps the peers' weights identical,
the noise-scale monitor prints its value and agrees with KungFu's own estimator, pair
averaging converges like the lab's, S-SGD runs across two emulated hosts (one kungfu-run per
network namespace); every run writes only into its run directory and leaves no process.
(Elastic KungFu: tests/cluster/test_ports_real.py, and the Fig 7 notebook's runs.)

KungFu is built by ``make setup`` (env/build_kungfu.sh). Where it is not installed these
tests are skipped, unless KUNGFU_SOURCE is set (CI names the vendored source): then a
missing KungFu is a failed build and the tests fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import kungfu_crosscheck as crosscheck
import pytest

from lab.cluster import emulation, launch
from lab.cluster.emulation import netns
from lab.cluster.launchers.base import find_program

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SMALL = ["--model", "tiny_cnn", "--batch-size", "8", "--image-size", "32", "--threads", "1"]


@pytest.fixture(scope="module", autouse=True)
def kungfu_installed() -> None:
    if find_program("kungfu-run") and importlib.util.find_spec("kungfu"):
        return
    if os.environ.get("KUNGFU_SOURCE"):
        pytest.fail("KUNGFU_SOURCE is set but KungFu is not installed: its build failed")
    pytest.skip("KungFu is not installed here (make setup builds it: env/build_kungfu.sh)")


def strays() -> set[Path]:
    """kungfu-run's per-peer logs where they must not be: the repository and the cwd."""
    return {p for d in {REPO, Path.cwd()} for p in d.glob("*.std*.log")}


def run_kungfu(probe: Any, tmp_path: Path, argv: list[str], np: int, **options: Any) -> Any:
    """Launch with the kungfu launcher; check the run wrote only into its directory and
    left nothing running; return (result, records)."""
    before = strays()
    result = launch(
        ["python", *argv],
        np=np,
        launcher="kungfu",
        hosts=f"localhost:{options.get('max_np', np)}",
        options=options,
        timeout=150,
        results_root=tmp_path,
        view=None,
    )
    assert result.ok, result.reason
    assert strays() == before
    peer_logs = list((result.run_dir / "kungfu" / "localhost").glob("127.0.0.1.*.stdout.log"))
    assert len(peer_logs) >= np
    assert not (Path(tempfile.gettempdir()) / "distlab-kungfu" / result.run_dir.name).exists()
    probe.assert_nothing_left(result.run_dir)
    return result, list(crosscheck.run_records(result.run_dir))


def test_sync_sgd_keeps_both_peers_identical(probe, tmp_path):
    argv = ["-m", "lab.bench.synthetic", "--backend", "kungfu-sync", *SMALL]
    _, recs = run_kungfu(probe, tmp_path, [*argv, "--steps", "4", "--warmup-steps", "1"], 2)
    digests = {r["rank"]: r["digest"] for r in recs if r.get("name") == "weights"}
    assert set(digests) == {0, 1}
    assert digests[0] == digests[1]
    losses = {r["rank"]: r["loss"] for r in recs if r["kind"] == "step" and r["step"] == 4}
    assert losses[0] != losses[1]  # different data per peer, the same model after each step


def test_noise_scale_monitor_prints_and_agrees_with_kungfus(probe, tmp_path):
    argv = ["-m", "lab.bench.synthetic", "--backend", "kungfu-sync", "--monitor", "noise-scale"]
    result, recs = run_kungfu(
        probe, tmp_path, [*argv, *SMALL, "--steps", "5", "--warmup-steps", "0"], 2
    )
    for rank in (0, 1):
        text = (result.run_dir / f"rank-{rank}.log").read_text()
        printed = [ln for ln in text.splitlines() if "Gradient Noise Scale: " in ln]
        assert len(printed) == 5
        float(printed[-1].rsplit(":", 1)[1])
    pairs = crosscheck.noise_scale_pairs(recs)
    assert len(pairs) == 10  # 2 peers x 5 steps, each measured by both estimators
    assert crosscheck.max_relative_difference(pairs) <= crosscheck.NOISE_SCALE_RTOL


def test_kungfus_own_variance_monitor_prints_every_interval(probe, tmp_path):
    argv = ["-m", "lab.bench.synthetic", "--backend", "kungfu-monitor", "--monitor", "variance"]
    argv += [*SMALL, "--interval", "3", "--steps", "6", "--warmup-steps", "0"]
    result, recs = run_kungfu(probe, tmp_path, argv, 2)
    for rank in (0, 1):
        text = (result.run_dir / f"rank-{rank}.log").read_text()
        printed = [ln for ln in text.splitlines() if ln.startswith("Variance: ")]
        steps = [r for r in recs if r["kind"] == "step" and r["rank"] == rank]
        # KungFu counts steps per traced op; the step is traced once (the broadcast
        # after the first is a function of its own), so steps 0, 3, ... monitor
        assert len(printed) == -(-len(steps) // 3) == 2
        assert all(float(ln.split(":")[1]) > 0 for ln in printed)
    digests = {r["rank"]: r["digest"] for r in recs if r.get("name") == "weights"}
    assert digests[0] == digests[1]  # still synchronous SGD


def test_an_alternating_run_monitors_only_its_on_steps(probe, tmp_path):
    """--alternate 2: warm-up switches every step, timed steps every 2; KungFu's variance
    monitor prints once per step tagged "on"; garbage is frozen before the first timed
    step; the peers stay identical across both optimizers."""
    argv = ["-m", "lab.bench.synthetic", "--backend", "kungfu-monitor", "--monitor", "variance"]
    argv += [*SMALL, "--alternate", "2", "--steps", "8", "--warmup-steps", "2"]
    result, recs = run_kungfu(probe, tmp_path, argv, 2)
    for rank in (0, 1):
        steps = [r for r in recs if r["kind"] == "step" and r["rank"] == rank]
        assert [r["phase"] for r in steps] == ["off", "on"] + ["off", "off", "on", "on"] * 2
        text = (result.run_dir / f"rank-{rank}.log").read_text()
        printed = [ln for ln in text.splitlines() if ln.startswith("Variance: ")]
        assert len(printed) == sum(r["phase"] == "on" for r in steps) == 5
        frozen = [r for r in recs if r.get("name") == "gc_frozen" and r["rank"] == rank]
        assert len(frozen) == 1 and steps[1]["time"] < frozen[0]["time"] < steps[2]["time"]
    digests = {r["rank"]: r["digest"] for r in recs if r.get("name") == "weights"}
    assert digests[0] == digests[1]


def test_pair_averaging_converges_like_the_labs(probe, tmp_path):
    if not (importlib.util.find_spec("mpi4py") and find_program("mpirun")):
        pytest.skip("the lab's pair averaging needs mpi4py and mpirun")
    task = ["--steps", "300", "--warmup-steps", "0", "--lr", "0.05", "--batch-size", "16"]
    task += ["--seed", "5", "--step-time", "0.002"]  # a model's pace: see pad_step
    _, kf = run_kungfu(
        probe, tmp_path, ["-m", "lab.bench.kungfu_regression", "--mode", "pair", *task], 2
    )
    lab = launch(
        ["python", "-m", "lab.bench.pair_averaging", "--task", "regression", *task],
        np=2,
        launcher="mpi",
        timeout=120,
        results_root=tmp_path,
        view=None,
    )
    labs = list(crosscheck.run_records(lab.run_dir))
    assert {r["implementation"] for r in kf if r["kind"] == "header"} == {
        "KungFu PairAveragingOptimizer"
    }
    initial = crosscheck.initial_loss(kf)
    assert initial == pytest.approx(crosscheck.initial_loss(labs), rel=1e-6)
    kf_curve, lab_curve = crosscheck.mean_eval_curve(kf), crosscheck.mean_eval_curve(labs)
    assert kf_curve[299] < initial / 100  # KungFu's pair averaging converges ...
    cmp = crosscheck.compare_curves(lab_curve, kf_curve)
    print("pair averaging, final mean eval loss (lab, KungFu):", cmp)
    assert cmp["ratio"] <= crosscheck.PAIR_AVG_RATIO  # ... where the lab's does


@pytest.mark.root
@pytest.mark.skipif(emulation.missing() is not None, reason=emulation.missing() or "")
def test_sync_sgd_across_two_emulated_hosts(probe, tmp_path, monkeypatch):
    """Each host's kungfu-run runs in that host's namespace with ``-self`` its address, so
    the peers reach each other only over the emulated link, and still agree on the model.
    Two peers per host: co-located peers talk over unix sockets in the /tmp every emulated
    host shares, and no peer may take over another host's socket (upstream KungFu named it
    by port alone; every run logged "already exists ... trying to remove" and could fail to
    bind). The venv's bin/ is off PATH, as in a notebook's kernel: kungfu-run is found
    beside the interpreter."""
    venv_bin = os.path.dirname(find_program("kungfu-run") or "")
    path = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in path if p != venv_bin))
    prof = tmp_path / "emulated-kf.yaml"
    prof.write_text("name: emulated-kf\nemulated: {hosts: 2, slots: 2, cpu: 0.5}\n")
    argv = ["-m", "lab.bench.synthetic", "--backend", "kungfu-sync", *SMALL]
    before = strays()
    result = launch(
        ["python", *argv, "--steps", "3", "--warmup-steps", "1"],
        np=4,
        launcher="kungfu",
        cluster=str(prof),
        timeout=120,
        results_root=tmp_path,
        view=None,
    )
    assert result.ok, result.reason
    assert strays() == before
    hosts = json.loads((result.run_dir / "manifest.json").read_text())["cluster"]["hosts"]
    begins = set()
    for host in hosts:  # each peer's own log, named by its host's address and the job's ports
        logs = sorted((result.run_dir / "kungfu" / host["name"]).glob("*.stdout.log"))
        begin = min(int(p.name.split(".")[4]) for p in logs)
        begins.add(begin)
        assert [p.name for p in logs] == [
            f"{host['address']}.{port}.stdout.log" for port in (begin, begin + 1)
        ]
        for err in (result.run_dir / "kungfu" / host["name"]).glob("*.stderr.log"):
            assert "already exists" not in err.read_text(), err.name
    assert len(begins) == 1  # the same block on every host, as KungFu needs
    recs = list(crosscheck.run_records(result.run_dir))
    digests = {r["rank"]: r["digest"] for r in recs if r.get("name") == "weights"}
    assert set(digests) == {0, 1, 2, 3} and len(set(digests.values())) == 1
    probe.assert_nothing_left(result.run_dir)
    tag = hosts[0]["namespace"].split("-")[1]
    assert [n for n in netns.list_netns() if tag in n] == []
