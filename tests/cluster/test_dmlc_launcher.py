"""The dmlc launcher (MXNet's ps-lite jobs): the processes it builds, bad input refused
before launch, and real MXNet 1.9.1 runs from .venv-mxnet: two workers with their servers
and scheduler start, train (in a network namespace of their own that has only lo), end and
leave nothing behind; a failing worker takes the
servers and the scheduler down with it; the workload's real Speedometer lines parse.
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.inventory import Cluster, Host, allocate
from lab.cluster.launchers.base import Job
from lab.cluster.launchers.dmlc import DmlcLauncher, local_python
from lab.errors import ParameterError
from lab.metrics.parsers import parse_lines
from lab.metrics.store import summarize_run

TWO_HOSTS = Cluster("two-local", (Host("localhost", slots=1), Host("127.0.0.1", slots=1)))
WORKLOAD = ["python", "-m", "lab.bench.p3.mxnet_workload"]
SMALL = ["--model", "tiny", "--batch-size", "8", "--steps", "3", "--warmup-steps", "1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def needs_mxnet() -> None:
    if not local_python().is_file():
        pytest.skip("MXNet is not installed here (make setup creates .venv-mxnet)")


def test_build_places_scheduler_servers_and_workers() -> None:
    hosts = (Host("h1", slots=2, address="10.0.0.1"), Host("h2", slots=2, address="10.0.0.2"))
    cluster = Cluster("c", hosts)
    job = Job(command=("python", "-m", "x"), np=4, cluster=cluster, options={"root_port": 9100})
    specs = DmlcLauncher().build(job, allocate(cluster, 4))
    roles = [(s.role, s.host.name, s.ranks) for s in specs]
    assert roles == [
        ("worker", "h1", (0,)),
        ("worker", "h1", (1,)),
        ("worker", "h2", (2,)),
        ("worker", "h2", (3,)),
        ("server", "h1", (4,)),
        ("server", "h2", (5,)),
        ("scheduler", "h1", (6,)),
    ]
    for spec in specs:
        assert spec.env["DMLC_ROLE"] == spec.role
        assert spec.env["DMLC_PS_ROOT_URI"] == "10.0.0.1"
        assert spec.env["DMLC_PS_ROOT_PORT"] == "9100"
        assert (spec.env["DMLC_NUM_SERVER"], spec.env["DMLC_NUM_WORKER"]) == ("2", "4")
        assert spec.env["DMLC_NODE_HOST"] == spec.host.reach_address
        # SSH hosts run the MXNet venv of their working directory
        assert spec.argv == (".venv-mxnet/bin/python", "-m", "x")


def test_build_runs_the_mxnet_venv_locally_and_keeps_other_programs() -> None:
    job = Job(command=("python", "a.py"), np=2, cluster=TWO_HOSTS)
    specs = DmlcLauncher().build(job, allocate(TWO_HOSTS, 2))
    assert {s.argv[0] for s in specs} == {str(local_python())}
    job = Job(command=("/opt/p3/bin/python3.6", "train.py"), np=2, cluster=TWO_HOSTS)
    assert DmlcLauncher().build(job, allocate(TWO_HOSTS, 2))[0].argv[0] == "/opt/p3/bin/python3.6"


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"num_servers": 3}, "num_servers"),  # more servers than the workers' two hosts
        ({"num_servers": 0}, "num_servers"),
        ({"num_servers": "two"}, "num_servers"),
        ({"root_port": 70000}, "root_port"),
    ],
)
def test_bad_options_fail_before_launch(options: dict, name: str, tmp_path: Path) -> None:
    with pytest.raises(ParameterError) as err:
        opts = {**options, "python": "/bin/false"}
        launch(["python", "-c", "pass"], np=2, launcher="dmlc", cluster=TWO_HOSTS,
               options=opts, results_root=tmp_path, view=None)  # fmt: skip
    assert err.value.name == name
    assert not (tmp_path / "runs").exists()  # nothing started, no run directory


@pytest.mark.parametrize(
    ("flags", "text"),
    [
        (["--model", "alexnet"], "model"),
        (["--kvstore", "local"], "kvstore"),
        (["--warmup-steps", "0"], "warmup-steps"),
    ],
)
def test_bad_workload_flags_fail_before_launch(flags: list, text: str, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=text):
        launch([*WORKLOAD, *flags], np=2, launcher="dmlc", cluster=TWO_HOSTS,
               results_root=tmp_path, view=None)  # fmt: skip


@pytest.mark.slow
def test_two_workers_train_and_every_process_ends(probe, tmp_path: Path) -> None:
    needs_mxnet()
    # no root_port: the launcher takes a free one for this job
    result = launch([*WORKLOAD, *SMALL], np=2, launcher="dmlc", cluster=TWO_HOSTS,
                    env={"OMP_NUM_THREADS": "1"}, results_root=tmp_path, view=None,
                    timeout=120)  # fmt: skip
    assert result.ok, result.reason
    # two workers, a server on each worker host, the scheduler: all ended by themselves
    assert result.rank_exit_codes == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0}
    probe.assert_nothing_left(result.run_dir)
    # ps-lite binds every interface: a job on this machine alone ran where only lo is
    network = json.loads((result.run_dir / "manifest.json").read_text())["network"]
    assert network["private"] is True, network
    for rank in (0, 1):
        lines = (result.run_dir / f"rank-{rank}.log").read_text().splitlines()
        assert sum("Speed:" in line and "samples/sec" in line for line in lines) == 3
        records = parse_lines(lines, rank=rank)
        steps = [r for r in records if r["kind"] == "step" and r["source"] == "mxnet"]
        assert [r["step"] for r in steps] == [1, 2, 3]
        assert all(r["throughput"] > 0 and r["rank"] == rank for r in steps)
        losses = [r["value"] for r in records if r["kind"] == "metric" and r["name"] == "loss"]
        assert len(losses) == 3 and all(0 < v < 10 for v in losses)
        header = next(r for r in records if r["kind"] == "header")
        assert header["engine"] == "MXNet 1.9.1 KVStore" and header["world_size"] == 2
    row = summarize_run(result.run_dir)  # the store sums the two workers' Speedometer rates
    assert row["ranks"] == 2 and row["steps"] == 6 and row["throughput_total"] > 0


@pytest.mark.slow
def test_a_failing_worker_ends_the_servers_and_scheduler(probe, tmp_path: Path) -> None:
    needs_mxnet()
    # workers leave without finalising the KVStore: ps-lite's servers would wait forever
    crash = "import os, mxnet as mx; mx.kv.create('dist_sync'); os._exit(3)"
    result = launch(["python", "-c", crash], np=2, launcher="dmlc", cluster=TWO_HOSTS,
                    options={"root_port": free_port()}, results_root=tmp_path, view=None,
                    timeout=60, grace=1.0, check=False)  # fmt: skip
    assert not result.ok and result.seconds < 40, result.reason
    # the first worker's exit ends the run: the other exits with 3 too, or is ended first
    codes = {result.rank_exit_codes[r] for r in (0, 1)}
    assert 3 in codes and codes <= {3, 128 + signal.SIGTERM}, codes
    assert result.exit_code == 3  # the root cause's code
    probe.assert_nothing_left(result.run_dir)


@pytest.mark.root
@pytest.mark.slow
def test_emulated_hosts_each_get_a_worker_and_a_server(probe, tmp_path: Path) -> None:
    from lab.cluster import emulation
    from lab.cluster.emulation import netns

    needs_mxnet()
    if emulation.missing():
        pytest.skip(emulation.missing())
    profile = tmp_path / "emulated-dmlc.yaml"
    profile.write_text("name: emulated-dmlc\nemulated:\n  hosts: 2\n  slots: 1\n  cpu: 1.0\n"
                       "  link: {bandwidth: 1gbit}\n")  # fmt: skip
    result = launch([*WORKLOAD, *SMALL], np=2, launcher="dmlc", cluster=str(profile),
                    env={"OMP_NUM_THREADS": "1"}, results_root=tmp_path, view=None,
                    timeout=120)  # fmt: skip
    assert result.ok, result.reason
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    placed = [(p["role"], p["host"]) for p in manifest["processes"]]
    assert placed == [("worker", "h1"), ("worker", "h2"), ("server", "h1"), ("server", "h2"),
                      ("scheduler", "h1")]  # fmt: skip
    addresses = {h["name"]: h["address"] for h in manifest["cluster"]["hosts"]}
    for p in manifest["processes"]:  # ps-lite announces the host's shaped address
        assert p["env"]["DMLC_NODE_HOST"] == addresses[p["host"]]
        assert p["env"]["DMLC_PS_ROOT_URI"] == addresses["h1"]
    # the workers' warm-up step records give the hosts their shares before the timed steps
    assert manifest["cpu_shares"]["why"] == "first step"
    probe.assert_nothing_left(result.run_dir)
    tag = manifest["cluster"]["hosts"][0]["namespace"].split("-")[1]
    assert [n for n in netns.list_netns() if tag in n] == []
