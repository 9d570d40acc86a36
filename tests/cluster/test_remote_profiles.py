"""The shipped example profile (hosts with ssh user and port) and the launchers that run
their own ssh: mpirun takes it through an ssh_config, horovodrun what it can say."""

from __future__ import annotations

import os

import pytest

from lab.cluster.inventory import Cluster, allocate, load_profile
from lab.cluster.launchers.base import Job, find_program
from lab.cluster.launchers.horovod import HorovodLauncher
from lab.cluster.launchers.mpi import MpiLauncher
from lab.errors import LaunchError


def _job(cluster: Cluster, **options: object) -> Job:
    return Job(command=("python", "train.py"), np=8, cluster=cluster, options=options)


def test_mpi_accepts_the_example_profile_through_an_ssh_config() -> None:
    if find_program("mpirun") is None:
        pytest.skip("no mpirun")
    example = load_profile("example")
    assert example.hosts[0].ssh_user == "ubuntu" and example.hosts[0].ssh_port == 22
    job = _job(example, flavor="openmpi", ssh_config="/r/run-1/ssh_config")
    MpiLauncher().check(job)
    (spec,) = MpiLauncher(as_root=False).build(job, allocate(example, 8))
    agent = spec.argv[spec.argv.index("plm_ssh_agent") + 1]
    assert agent == ("ssh -F /r/run-1/ssh_config -o StrictHostKeyChecking=yes -o ConnectTimeout=10")
    assert spec.argv[spec.argv.index("-H") + 1] == "node1:4,node2:4"


def test_mpich_refuses_per_host_ssh_settings() -> None:
    if find_program("mpirun") is None:
        pytest.skip("no mpirun")
    with pytest.raises(LaunchError, match="MPICH's mpirun takes no ssh arguments"):
        MpiLauncher().check(_job(load_profile("example"), flavor="mpich"))


def test_horovodrun_reaches_the_example_profile_through_the_labs_ssh() -> None:
    """Per-host users and ports reach horovodrun's ssh through the run's own ``ssh`` first on
    its PATH (it reads the run's ssh_config), not through --ssh-port."""
    if find_program("horovodrun") is None:
        pytest.skip("no horovodrun")
    example = load_profile("example")
    job = _job(example, ssh_bin="/r/run-1/bin")
    HorovodLauncher().check(job)
    (spec,) = HorovodLauncher().build(job, allocate(example, 8))
    assert spec.env["PATH"].split(os.pathsep)[0] == "/r/run-1/bin"
    assert "--ssh-port" not in spec.argv
    assert spec.argv[spec.argv.index("-H") + 1] == "node1:4,node2:4"
