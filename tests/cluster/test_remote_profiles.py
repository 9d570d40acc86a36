"""The shipped example profile (hosts with ssh user and port) and the launchers that run
their own ssh: mpirun takes it through an ssh_config, horovodrun what it can say."""

from __future__ import annotations

import pytest

from lab.cluster.inventory import Cluster, Host, allocate, load_profile
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
    assert agent == "ssh -F /r/run-1/ssh_config -o ConnectTimeout=10"
    assert spec.argv[spec.argv.index("-H") + 1] == "node1:4,node2:4"


def test_mpich_refuses_per_host_ssh_settings() -> None:
    if find_program("mpirun") is None:
        pytest.skip("no mpirun")
    with pytest.raises(LaunchError, match="MPICH's mpirun takes no ssh arguments"):
        MpiLauncher().check(_job(load_profile("example"), flavor="mpich"))


def test_horovodrun_takes_one_port_and_refuses_users() -> None:
    if find_program("horovodrun") is None:
        pytest.skip("no horovodrun")
    with pytest.raises(LaunchError) as caught:
        HorovodLauncher().check(_job(load_profile("example")))
    assert str(caught.value) == (
        "host 'node1' sets ssh_port/ssh_user, but horovodrun builds 'ssh -o ... HOST -p PORT' "
        "itself (horovod/runner/util/remote.py) with one --ssh-port for every host and no "
        "user or ssh_config: put 'Host node1' with Port/User in ~/.ssh/config instead, or "
        "use launcher='mpi' with OpenMPI (it is given an ssh_config per run)"
    )
    same = Cluster("p", (Host("n1", slots=4, ssh_port=2222), Host("n2", slots=4, ssh_port=2222)))
    HorovodLauncher().check(_job(same))
    (spec,) = HorovodLauncher().build(_job(same), allocate(same, 8))
    assert spec.argv[spec.argv.index("--ssh-port") + 1] == "2222"
    mixed = Cluster("m", (Host("n1", slots=4, ssh_port=2222), Host("n2", slots=4)))
    with pytest.raises(LaunchError, match="one --ssh-port for every host"):
        HorovodLauncher().check(_job(mixed))
