"""kungfu-run's command lines: -logdir in the run directory, -q, the monitoring variable,
elastic mode with its config server, and bad options refused before launch."""

from __future__ import annotations

import pytest

from lab.cluster.inventory import Cluster, Host, allocate
from lab.cluster.launchers.base import Job, Line
from lab.cluster.launchers.kungfu import KungFuLauncher
from lab.errors import ParameterError

KF = "kungfu-run-under-test"
CMD = ("python", "w.py")
A = Host("a", slots=2, address="10.0.0.1")
B = Host("b", slots=2, address="10.0.0.2")


def specs(np: int, *hosts: Host, **options):
    hosts = hosts or (Host("localhost", slots=2),)
    job = Job(command=CMD, np=np, cluster=Cluster("t", hosts), options=options)
    return KungFuLauncher(program=KF).build(job, allocate(job.cluster, np))


def test_logdir_goes_into_the_run_directory(tmp_path):
    (spec,) = specs(2, run_dir=str(tmp_path))
    argv = list(spec.argv)
    assert argv[argv.index("-logdir") + 1] == str(tmp_path / "kungfu" / "localhost")
    assert "-q" in argv and argv[-2:] == list(CMD)


def test_remote_hosts_log_under_their_working_directory_not_a_shared_tmp(tmp_path):
    first, _ = specs(4, A, B, run_dir=str(tmp_path / "20250101-000000-abcdef"))
    logdir = first.argv[list(first.argv).index("-logdir") + 1]
    assert logdir == "distlab-runs/20250101-000000-abcdef/kungfu/a"  # relative: the workdir


def test_quiet_and_monitoring_are_options():
    (loud,) = specs(2, quiet=False)
    assert "-q" not in loud.argv
    assert "KUNGFU_CONFIG_ENABLE_MONITORING" not in loud.env
    (mon,) = specs(2, monitoring=True)
    assert mon.env["KUNGFU_CONFIG_ENABLE_MONITORING"] == "true"


def test_elastic_one_host_lists_capacity_and_serves_its_config():
    (spec,) = specs(1, elastic=True, max_np=2, config_port=9200, port_range="10000-10001")
    argv = list(spec.argv)
    assert argv[:5] == [KF, "-np", "1", "-H", "127.0.0.1:2"]
    tail = argv[argv.index("-w") :]
    assert tail == [
        "-w",
        "-config-server",
        "http://127.0.0.1:9200/config",
        "-builtin-config-port",
        "9200",
        *CMD,
    ]
    assert spec.ranks == (0, 1)  # a peer started by a resize is still demultiplexed
    launcher = KungFuLauncher()
    assert launcher.demux(spec, "stdout", "[127.0.0.1.10001::stdout] x") == Line(1, "stdout", "x")


def test_elastic_two_hosts_one_config_server_on_the_first():
    first, second = specs(1, A, B, elastic=True, max_np=3)
    assert all("-H" in s.argv and "10.0.0.1:2,10.0.0.2:1" in s.argv for s in (first, second))
    assert "-builtin-config-port" in first.argv and "-builtin-config-port" not in second.argv
    port = first.argv[first.argv.index("-builtin-config-port") + 1]
    assert f"http://10.0.0.1:{port}/config" in second.argv
    assert f"http://10.0.0.1:{port}/config" in first.argv
    assert (first.ranks, second.ranks) == ((0, 1), (2,))
    assert second.argv[second.argv.index("-self") + 1] == "10.0.0.2"
    # a peer a resize adds on b, which had none, takes KungFu's own 10000 (growOne)
    begin = int(second.argv[second.argv.index("-port-range") + 1].split("-")[0])
    launcher = KungFuLauncher()
    for port in (begin, 10000):
        line = launcher.demux(second, "stdout", f"[10.0.0.2.{port}::stdout] x")
        assert line == Line(2, "stdout", "x")


@pytest.mark.parametrize(
    "options, name",
    [
        ({"elastic": True, "max_np": 0}, "max_np"),
        ({"elastic": True, "max_np": 5}, "max_np"),
        ({"elastic": "yes"}, "elastic"),
        ({"quiet": 1}, "quiet"),
        ({"config_port": 70000}, "config_port"),
    ],
)
def test_bad_options_name_themselves(options, name):
    with pytest.raises(ParameterError) as info:
        specs(1, **options)
    assert info.value.name == name
