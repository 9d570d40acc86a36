"""SSH: the command line (pure), then real runs against a real sshd on loopback."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.inventory import Cluster, Host
from lab.cluster.rundir import read_manifest
from lab.cluster.ssh import (
    check_reachable,
    guard_source,
    needs_ssh_config,
    split_config_option,
    ssh_argv,
    ssh_config_text,
    ssh_options,
)
from lab.cluster.supervisor import RunState
from lab.errors import HostSpecError, LaunchError, RanksFailed

REMOTE = Host("node7", slots=2, ssh_port=2222, ssh_user="lab", python="/opt/py/bin/python3")


def test_ssh_argv_runs_the_guard_inline_with_env_and_cwd() -> None:
    argv = ssh_argv(REMOTE, ["python", "train.py", "--lr", "0.1 x"], {"RANK": "1"}, cwd="/w")
    cut = argv.index("--")
    opts, target, remote = argv[:cut], argv[cut - 1], argv[cut + 1 :]
    assert opts[0] == "ssh" and target == "node7"
    assert "BatchMode=yes" in opts and "ConnectTimeout=10" in opts
    assert opts[opts.index("-p") + 1] == "2222" and opts[opts.index("-l") + 1] == "lab"
    assert opts[opts.index("StrictHostKeyChecking=yes") - 1] == "-o"  # keys checked
    assert len(remote) == 1
    words = shlex.split(remote[0])
    assert words[:3] == ["/opt/py/bin/python3", "-c", guard_source()]
    assert words[3:] == [
        "--env", "RANK=1", "--cwd", "/w", "--grace", "5",
        "--", "python", "train.py", "--lr", "0.1 x",
    ]  # fmt: skip


def test_ssh_options_from_env_and_cluster(monkeypatch) -> None:
    monkeypatch.setenv("DISTLAB_SSH_OPTIONS", "-i '/k ey' -o IdentitiesOnly=yes")
    cluster = Cluster(name="c", hosts=(REMOTE,), extra={"ssh_options": ["-o", "Port=1"]})
    assert ssh_options(cluster) == ["-i", "/k ey", "-o", "IdentitiesOnly=yes", "-o", "Port=1"]
    argv = ssh_argv(REMOTE, ["true"], {}, options=ssh_options(cluster))
    assert argv.index("/k ey") < argv.index("node7")


def test_unreachable_host_fails_before_launch(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = Host("127.0.0.1", slots=2, ssh_port=port)
    with pytest.raises(LaunchError, match=r"127\.0\.0\.1.*unreachable.*refused"):
        check_reachable(host, timeout=10)
    with pytest.raises(LaunchError, match="unreachable"):
        launch(["true"], np=2, cluster=Cluster("c", (host,)), results_root=tmp_path, view=None)
    assert not (tmp_path / "runs").exists()


# -- against a real sshd --------------------------------------------------------------------


def _cluster(sshd, slots: int = 2) -> Cluster:
    host = Host("127.0.0.1", slots=slots, ssh_port=sshd.port)
    return Cluster(name="sshd", hosts=(host,), extra={"ssh_options": sshd.options})


@pytest.mark.root
@pytest.mark.slow
def test_two_ranks_over_ssh(sshd, tmp_path: Path, probe) -> None:
    cluster = _cluster(sshd)
    assert not cluster.hosts[0].is_local
    result = launch(
        probe.rank_command("--lines", "50", "--progress"),
        np=2,
        cluster=cluster,
        results_root=tmp_path,
        view=None,
        params={"where": "sshd"},
    )
    assert result.state is RunState.SUCCEEDED and result.rank_exit_codes == {0: 0, 1: 0}
    for r in (0, 1):
        lines = (result.run_dir / f"rank-{r}.log").read_text().splitlines()
        assert [x for x in lines if " line " in x] == [f"rank {r} line {i}" for i in range(50)]
        assert f"rank {r} progress 5/5" in lines and f"rank {r} stderr note" in lines
    manifest = read_manifest(result.run_dir)
    assert manifest["cluster"]["hosts"][0]["ssh_port"] == sshd.port
    assert manifest["params"] == {"where": "sshd"}
    started = manifest["processes"][0]["started_argv"]
    assert "ssh" in started and "'<guard.py source>'" in started[-1]
    probe.assert_nothing_left(result.run_dir)


@pytest.mark.root
@pytest.mark.slow
def test_remote_failure_carries_exit_code(sshd, tmp_path: Path, probe) -> None:
    cmd = probe.rank_command("--exitcode", "3@1", "--sleep", "60", "--spawn-child", "0")
    with pytest.raises(RanksFailed) as info:
        launch(cmd, np=2, cluster=_cluster(sshd), results_root=tmp_path, view=None, grace=1)
    err = info.value
    assert err.exit_code == 3 and err.root_cause is not None
    assert err.root_cause.rank == 1 and err.root_cause.host == "127.0.0.1"
    assert any("failing with 3" in t for t in err.root_cause.tail)
    run_dir = Path(err.run_dir or "")
    probe.assert_nothing_left(run_dir, probe.logged_pids(run_dir))


@pytest.mark.root
def test_host_key_checking_stays_on(sshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    # ssh takes the first value given for an option, so the good file must not come first
    options = ["-o", f"UserKnownHostsFile={empty}", *sshd.options]
    with pytest.raises(LaunchError, match="Host key verification failed"):
        check_reachable(Host("127.0.0.1", ssh_port=sshd.port), options=options)
    check_reachable(Host("127.0.0.1", ssh_port=sshd.port), options=sshd.options)


@pytest.mark.root
@pytest.mark.slow
def test_kill_9_of_launcher_leaves_no_remote_rank(sshd, start_driver, probe) -> None:
    cmd = probe.rank_command("--sleep", "120", "--ignore-term", "1", "--setsid-child", "0")
    driver = start_driver(command=cmd, np=2, ssh_port=sshd.port, ssh_options=sshd.options, grace=1)
    run_dir = driver.wait_ready(2)
    run_id = json.loads((run_dir / "manifest.json").read_text())["run_id"]
    remote = [p for p in probe.marked_pids(run_id) if b"fake_rank" in _cmdline(p)]
    assert len(remote) >= 3  # two remote ranks and the escapee
    driver.proc.send_signal(signal.SIGKILL)
    driver.proc.communicate(timeout=10)
    assert probe.wait_gone(lambda: probe.marked_pids(run_id), within=10.0) == []
    assert not [p for p in probe.logged_pids(run_dir) if probe.alive(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_guard_source_runs_standalone() -> None:
    """The guard needs no lab import: run its source with -c in an isolated interpreter."""
    done = subprocess.run(
        [
            "python3",
            "-I",
            "-c",
            guard_source(),
            "--env",
            "X=42",
            "--",
            "sh",
            "-c",
            "echo $X; exit 7",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout == "42\n" and done.returncode == 7 and done.stderr == ""


# -- mpirun over ssh to a host with its own port and user --------------------------------


def _mpi_ready() -> bool:
    from lab.cluster.launchers.base import find_program
    from lab.cluster.launchers.mpi import detect_mpi_flavor

    return find_program("mpirun") is not None and detect_mpi_flavor() == "openmpi"


@pytest.mark.root
@pytest.mark.slow
def test_mpi_reaches_a_host_with_its_own_port_and_user(sshd, tmp_path: Path, probe) -> None:
    """mpirun's own ssh reaches the host through the run's ssh_config (Port, User)."""
    if not _mpi_ready():
        pytest.skip("needs OpenMPI's mpirun")
    from tests.cluster.conftest import SECOND_LOOPBACK

    host = Host(SECOND_LOOPBACK, slots=2, ssh_port=sshd.port, ssh_user="root")
    cluster = Cluster("sshd-mpi", (host,), extra={"ssh_options": sshd.options})
    echo = Path(__file__).resolve().parents[1] / "bin" / "echo_rank.py"
    result = launch(
        [sys.executable, str(echo), "--lines", "1", "--show-env", "SSH_CONNECTION"],
        np=2,
        launcher="mpi",
        cluster=cluster,
        options={"prefix": str(Path(sys.executable).parent.parent)},  # where prted is
        results_root=tmp_path,
        view=None,
        timeout=120,
    )
    assert result.ok and result.rank_exit_codes == {0: 0, 1: 0}
    config = result.run_dir / "ssh_config"
    text = config.read_text()
    assert f"Host {SECOND_LOOPBACK}\n    Port {sshd.port}\n    User root\n" in text
    assert "Include" not in text  # the cluster's ssh options say -F /dev/null
    manifest = read_manifest(result.run_dir)
    assert manifest["options"]["ssh_config"] == str(config)
    assert f"ssh -F {config} " in " ".join(result.commands[0])
    for r in (0, 1):
        log = (result.run_dir / f"rank-{r}.log").read_text()
        assert f"rank={r} stdout line=0" in log
        # the rank's prted came through that sshd: SSH_CONNECTION names its port
        conn = re.search(r"env SSH_CONNECTION=(.*)", log)
        assert conn and conn.group(1).split()[2:] == [SECOND_LOOPBACK, str(sshd.port)], log


def test_ssh_config_carries_port_user_and_includes() -> None:
    hosts = [
        Host("node1", slots=4, ssh_port=2222, ssh_user="lab"),
        Host("node2", slots=4, ssh_user="ubuntu"),
        Host("node3", slots=4),
        Host("localhost", slots=1),
    ]
    assert needs_ssh_config(hosts) and not needs_ssh_config(hosts[2:])
    assert ssh_config_text(hosts) == (
        "# Written by distlab for this run: how its launcher's ssh reaches each host.\n"
        "Host node1\n    Port 2222\n    User lab\n"
        "Host node2\n    User ubuntu\n"
        "Match all\nInclude ~/.ssh/config\nInclude /etc/ssh/ssh_config\n"
    )
    assert split_config_option(["-i", "k", "-F", "/dev/null"]) == (["-i", "k"], [])
    assert split_config_option(["-F/x/cfg", "-v"]) == (["-v"], ["/x/cfg"])
    assert split_config_option(["-v"]) == (["-v"], None)
    with pytest.raises(HostSpecError, match="ssh_config"):
        ssh_config_text([Host("a b", ssh_port=1)])
