"""Host keys are checked on every connection the lab causes: weakening options refused
unless a profile says so, and the ssh put first on horovodrun's PATH (lab/cluster/checked_ssh.py)
keeping checks on against a real sshd."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.checked_ssh import filtered
from lab.cluster.host_keys import strict, weakening, write_ssh_wrapper
from lab.cluster.inventory import Cluster, Host, cluster_from_dict
from lab.cluster.launchers.base import find_program
from lab.cluster.rundir import read_manifest
from lab.cluster.ssh import ssh_options, ssh_prefix
from lab.errors import LaunchError, ParameterError

HOROVODRUN_SSH = ["-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no"]


@pytest.mark.parametrize(
    ("options", "weak"),
    [
        (["-o", "StrictHostKeyChecking=no"], ["StrictHostKeyChecking=no"]),
        (["-oStrictHostKeyChecking=accept-new"], ["StrictHostKeyChecking=accept-new"]),
        (["-o", "stricthostkeychecking off"], ["stricthostkeychecking off"]),
        (["-o", "UserKnownHostsFile=/dev/null"], ["UserKnownHostsFile=/dev/null"]),
        (["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/k/hosts"], []),
        (["-o", "UserKnownHostsFile=/dev/null /k/hosts"], []),  # /k/hosts is still read
        (["-i", "/k/key", "-p", "22"], []),
    ],
)
def test_weakening_options_are_found(options: list[str], weak: list[str]) -> None:
    assert weakening(options) == weak


def test_weakening_options_are_refused_naming_where_they_came_from(monkeypatch) -> None:
    monkeypatch.setenv("DISTLAB_SSH_OPTIONS", "-i /k/key -o StrictHostKeyChecking=no")
    with pytest.raises(ParameterError) as caught:
        ssh_options(None)
    assert caught.value.name == "DISTLAB_SSH_OPTIONS"
    assert caught.value.value == "StrictHostKeyChecking=no"
    assert "insecure_host_keys: true" in str(caught.value)
    monkeypatch.delenv("DISTLAB_SSH_OPTIONS")
    profile = {"hosts": "node1:1", "ssh": {"options": ["-o", "UserKnownHostsFile=/dev/null"]}}
    with pytest.raises(ParameterError, match=r"ssh\.options='UserKnownHostsFile=/dev/null'"):
        ssh_options(cluster_from_dict(profile, "p"))


def test_a_profile_may_turn_checking_off_and_it_is_recorded_and_said(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    monkeypatch.setenv("DISTLAB_SSH_OPTIONS", "-o StrictHostKeyChecking=no")
    data = {"hosts": "localhost:1", "ssh": {"insecure_host_keys": True}}
    cluster = cluster_from_dict(data, "lax")
    assert ssh_options(cluster) == ["-o", "StrictHostKeyChecking=no"]
    argv = ssh_prefix(Host("node1"), ssh_options(cluster))
    assert "StrictHostKeyChecking=yes" not in argv  # the profile's choice is not overridden
    assert "StrictHostKeyChecking=yes" in ssh_prefix(Host("node1"), [])
    with caplog.at_level(logging.WARNING, logger="lab.cluster.launching"):
        result = launch(["true"], cluster=cluster, results_root=tmp_path, view=None)
    assert read_manifest(result.run_dir)["ssh"] == {
        "insecure_host_keys": True,
        "options": ["StrictHostKeyChecking=no"],
    }
    assert "host keys are NOT checked" in caplog.text


def test_a_checked_run_records_no_ssh_exception(tmp_path: Path) -> None:
    result = launch(["true"], results_root=tmp_path, view=None)
    assert "ssh" not in read_manifest(result.run_dir)


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        # horovodrun's probe: ssh <its options> HOST -p PORT true
        (
            [*HOROVODRUN_SSH, "h1", "-p", "22", "true"],
            ["-o", "PasswordAuthentication=no", "h1", "-p", "22", "true"],
        ),
        (["-oStrictHostKeyChecking=no", "-tt", "h1", "cmd"], ["-tt", "h1", "cmd"]),
        (["-i", "/k", "h1", "-o", "UserKnownHostsFile=/dev/null", "x"], ["-i", "/k", "h1", "x"]),
        # the remote command's own words are never touched
        (
            ["h1", "echo", "-o", "StrictHostKeyChecking=no"],
            ["h1", "echo", "-o", "StrictHostKeyChecking=no"],
        ),
    ],
)
def test_the_wrapper_drops_only_the_callers_host_key_options(args, kept) -> None:
    assert filtered(args) == kept


@pytest.mark.root
def test_the_wrapper_checks_keys_where_horovodrun_would_not(sshd, tmp_path: Path) -> None:
    """horovodrun's exact probe, run through the wrapper: it connects when the key is known,
    and is refused when it is not (horovodrun's own ssh would accept any key)."""
    probe = [*HOROVODRUN_SSH, "127.0.0.1", "-p", str(sshd.port), "true"]
    known = write_ssh_wrapper(tmp_path / "known", ["-o", "BatchMode=yes", *strict(sshd.options)])
    done = subprocess.run([str(known), *probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    options = [o.replace(str(sshd.known_hosts), str(empty)) for o in sshd.options]
    unknown = write_ssh_wrapper(tmp_path / "unknown", ["-o", "BatchMode=yes", *strict(options)])
    done = subprocess.run([str(unknown), *probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 255 and "Host key verification failed" in done.stderr
    assert not empty.read_text()  # nothing was learned either


def test_a_cluster_without_a_profile_may_not_weaken_checks(monkeypatch) -> None:
    monkeypatch.setenv("DISTLAB_SSH_OPTIONS", "-o UserKnownHostsFile=/dev/null")
    with pytest.raises(ParameterError, match="DISTLAB_SSH_OPTIONS"):
        launch(["true"], cluster=Cluster("h", (Host("localhost"),)), view=None)


@pytest.mark.root
def test_horovod_to_a_remote_host_with_an_unknown_key_is_refused_before_anything(
    sshd, tmp_path: Path
) -> None:
    if find_program("horovodrun") is None:
        pytest.skip("no horovodrun")
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    options = [o.replace(str(sshd.known_hosts), str(empty)) for o in sshd.options]
    host = Host("127.0.0.2", slots=2, ssh_port=sshd.port)
    cluster = Cluster("sshd", (host,), extra={"ssh_options": options})
    with pytest.raises(LaunchError, match="Host key verification failed"):
        launch(["true"], np=2, launcher="horovod", cluster=cluster, results_root=tmp_path,
               view=None)  # fmt: skip
    assert not (tmp_path / "runs").exists() and not empty.read_text()
