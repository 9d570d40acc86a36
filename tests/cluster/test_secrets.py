"""Secret environment values reach the ranks, but no file of the run and no command line
(lab.cluster.secret_env): through the CLI with the local and mpi launchers, and over SSH."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.inventory import Cluster, Host
from lab.cluster.launchers.base import Job, find_program
from lab.cluster.launchers.horovod import warn_gloo_exposes
from lab.cluster.secret_env import REDACTED, redact, secrets_of

REPO = Path(__file__).resolve().parents[2]

# Each rank says the token's hash (never the token) and which live processes carry the token
# in their command line.
RANK = r"""
import hashlib, os, pathlib
token = os.environ["API_TOKEN"].encode()
found = []
for p in pathlib.Path("/proc").iterdir():
    if p.name.isdigit():
        try:
            if token in (p / "cmdline").read_bytes():
                found.append(int(p.name))
        except OSError:
            pass
print("seen", hashlib.sha256(token).hexdigest(), "cmdlines", sorted(found), flush=True)
"""


def _token() -> str:
    return "tok-" + secrets.token_hex(16)


def _files_holding(root: Path, text: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def _seen(run_dir: Path) -> list[tuple[str, list[int]]]:
    out = []
    for log in sorted(run_dir.glob("rank-*.log")):
        for line in log.read_text().splitlines():
            m = re.match(r"seen (\w+) cmdlines (\[.*\])$", line)
            if m:
                out.append((m.group(1), json.loads(m.group(2))))
    return out


def test_secret_names_and_redaction() -> None:
    env = {"API_TOKEN": "abcdef", "DB_PASSWORD": "pw", "aws_secret_access_key": "s3", "A": "1"}
    assert sorted(secrets_of(env)) == ["API_TOKEN", "DB_PASSWORD", "aws_secret_access_key"]
    assert secrets_of(env, ["A"])["A"] == "1"
    found = {"API_TOKEN": "abcdef", "DB_PASSWORD": "pw"}
    record = {
        "env": {"API_TOKEN": "abcdef", "DB_PASSWORD": "pw", "A": "1"},
        "argv": ["--env", "DB_PASSWORD=pw", "-genv", "DB_PASSWORD", "pw", "x=abcdef!", "pw"],
    }
    assert redact(record, found) == {
        "env": {"API_TOKEN": REDACTED, "DB_PASSWORD": REDACTED, "A": "1"},
        "argv": ["--env", f"DB_PASSWORD={REDACTED}", "-genv", "DB_PASSWORD", REDACTED,
                 f"x={REDACTED}!", "pw"],  # a 2-letter value is not searched for alone
    }  # fmt: skip


@pytest.mark.parametrize("launcher", ["local", "mpi"])
def test_a_token_reaches_ranks_but_no_file_and_no_command_line(tmp_path: Path, launcher) -> None:
    if launcher == "mpi" and find_program("mpirun") is None:
        pytest.skip("no mpirun")
    token = _token()
    cli = subprocess.Popen(
        [sys.executable, "-m", "lab", "launch", "--launcher", launcher, "-np", "2",
         "--results", str(tmp_path), "--env", f"API_TOKEN={token}", "--env", "NOTE=plain",
         "--", sys.executable, "-c", RANK],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    run_dir = Path(out.splitlines()[-1])
    seen = _seen(run_dir)
    assert [s[0] for s in seen] == [hashlib.sha256(token.encode()).hexdigest()] * 2
    # The only command line holding it is the one it was typed on: the CLI's own.
    assert [pids for _, pids in seen] == [[cli.pid]] * 2, seen
    assert _files_holding(tmp_path, token) == []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["env"]["API_TOKEN"] == REDACTED and manifest["env"]["NOTE"] == "plain"
    assert manifest["secret_env"] == ["API_TOKEN"]
    assert f"API_TOKEN={REDACTED}" in manifest["launched_by"]["argv"]
    if launcher == "mpi":
        (mpirun,) = manifest["processes"]
        x = mpirun["argv"].index("API_TOKEN")
        assert mpirun["argv"][x - 1] == "-x"  # by name; the value is in mpirun's env


def test_a_token_from_the_shell_is_on_no_command_line_at_all(tmp_path: Path) -> None:
    token = _token()
    done = subprocess.run(
        [sys.executable, "-m", "lab", "launch", "-np", "1", "--results", str(tmp_path),
         "--env", "API_TOKEN", "--", sys.executable, "-c", RANK],
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "API_TOKEN": token},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ((digest, pids),) = _seen(Path(done.stdout.splitlines()[-1]))
    assert digest == hashlib.sha256(token.encode()).hexdigest() and pids == []
    assert _files_holding(tmp_path, token) == []


def test_a_declared_secret_is_kept_too(tmp_path: Path) -> None:
    result = launch(
        ["sh", "-c", 'test "$PLAIN_NAME" = hunter22'], env={"PLAIN_NAME": "hunter22"},
        secret_env=["PLAIN_NAME"], results_root=tmp_path, view=None,
    )  # fmt: skip
    assert result.ok
    assert _files_holding(tmp_path, "hunter22") == []


@pytest.mark.root
@pytest.mark.slow
def test_over_ssh_the_token_goes_through_the_channel(sshd, tmp_path: Path) -> None:
    """Remote ranks get secrets on the ssh channel (the guards' stdin), not on the ssh
    command line; the sshd is on this machine, so the rank sees every process of the run."""
    token = _token()
    host = Host("127.0.0.1", slots=2, ssh_port=sshd.port, python=sys.executable)
    cluster = Cluster(name="sshd", hosts=(host,), extra={"ssh_options": sshd.options})
    result = launch(
        [sys.executable, "-c", RANK], np=2, cluster=cluster, env={"API_TOKEN": token},
        results_root=tmp_path, view=None, timeout=60,
    )  # fmt: skip
    seen = _seen(result.run_dir)
    assert seen == [(hashlib.sha256(token.encode()).hexdigest(), [])] * 2
    assert _files_holding(tmp_path, token) == []


def test_gloo_horovod_says_which_secrets_it_would_expose(monkeypatch, caplog) -> None:
    monkeypatch.setenv("HF_TOKEN", "x")
    job = Job(command=("python", "x.py"), env={"API_TOKEN": "y", "A": "1"})
    assert warn_gloo_exposes(job) == ["API_TOKEN", "HF_TOKEN"]
    assert "HF_TOKEN" in caplog.text and "controller': 'mpi'" in caplog.text


@pytest.mark.root
@pytest.mark.timeout(120)
def test_mpirun_over_emulated_hosts_passes_the_token_by_name(tmp_path: Path) -> None:
    """mpirun reaches emulated hosts over their sshds and starts its daemons there: the
    token, given as ``-x API_TOKEN``, is on none of their command lines either."""
    from lab.cluster import emulation

    if emulation.missing() is not None or find_program("mpirun") is None:
        pytest.skip(emulation.missing() or "no mpirun")
    profile = tmp_path / "emulated-secret.yaml"
    profile.write_text("emulated: {hosts: 2, slots: 1, cpu: 0.5}\n")
    token = _token()
    result = launch(
        [sys.executable, "-c", RANK], np=2, launcher="mpi", cluster=str(profile),
        env={"API_TOKEN": token, "OMP_NUM_THREADS": "1"}, results_root=tmp_path, view=None,
        timeout=90,
    )  # fmt: skip
    assert _seen(result.run_dir) == [(hashlib.sha256(token.encode()).hexdigest(), [])] * 2
    assert _files_holding(tmp_path, token) == []
