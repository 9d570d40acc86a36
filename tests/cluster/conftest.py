"""Fixtures for supervision tests: the fake rank, finding a run's processes, a real sshd,
a real Slurm (lab.cluster.slurm.testbed).

The sshd fixture needs root and Debian's OpenSSH server (``apt-get install -y
openssh-server``; it provides /usr/sbin/sshd). It runs on a free loopback port with a
throw-away host key, client key, authorized_keys and known_hosts in a temporary directory,
so host-key checking stays on.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE_RANK = REPO / "tests" / "bin" / "fake_rank.py"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
# The sshd listens here too: an address mpirun does not take for this machine (127.0.0.1
# is on an interface, so OpenMPI would start its ranks locally, without ssh).
SECOND_LOOPBACK = "127.0.0.2"

# Runs launch() in its own process, so a test can interrupt or kill -9 it.
# The driver stands for a person's Python session, where Ctrl-C raises KeyboardInterrupt:
# a test run started in the background (``make test &``) passes SIGINT down ignored.
DRIVER = r"""
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from lab.cluster import launch
from lab.cluster.inventory import Cluster, Host
cfg = json.loads(sys.argv[1])
cluster = None
if cfg.get("ssh_port"):
    host = Host("127.0.0.1", slots=cfg["np"], ssh_port=cfg["ssh_port"])
    cluster = Cluster(name="sshd", hosts=(host,), extra={"ssh_options": cfg["ssh_options"]})
launch(cfg["command"], np=cfg["np"], hosts=cfg.get("hosts"), cluster=cluster,
       results_root=cfg["results"], view=None, grace=cfg.get("grace", 2.0))
"""


class Probe:
    """Helpers to find a run's processes (tests get one through the ``probe`` fixture)."""

    @staticmethod
    def rank_command(*args: str) -> list[str]:
        """argv of tests/bin/fake_rank.py with ``args``."""
        return [sys.executable, str(FAKE_RANK), *args]

    @staticmethod
    def marked_pids(run_id: str) -> list[int]:
        """Processes carrying ``LAB_RUN_ID=run_id`` in their environment or command line."""
        marker = f"LAB_RUN_ID={run_id}".encode()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
                if stat[stat.rfind(b")") + 2 :].startswith(b"Z"):
                    continue
                data = b""
                for part in ("environ", "cmdline"):
                    with open(f"/proc/{name}/{part}", "rb") as f:
                        data += f.read()
            except OSError:
                continue
            if marker in data:
                found.append(int(name))
        return found

    @staticmethod
    def wait_gone(pids: Callable[[], list[int]], within: float) -> list[int]:
        """Poll until ``pids()`` is empty or ``within`` seconds pass; return what is left."""
        end = time.monotonic() + within
        left = pids()
        while left and time.monotonic() < end:
            time.sleep(0.1)
            left = pids()
        return left

    @staticmethod
    def alive(pid: int) -> bool:
        import psutil

        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    @staticmethod
    def logged_pids(run_dir: Path) -> list[int]:
        """The child/escapee pids fake ranks printed into their logs."""
        pids = []
        for log in run_dir.glob("rank-*.log"):
            for line in log.read_text().splitlines():
                parts = line.split()
                if len(parts) == 4 and parts[2] in ("child", "escapee"):
                    pids.append(int(parts[3]))
        return pids

    @classmethod
    def kill_marked(cls, run_id: str) -> None:
        for pid in cls.marked_pids(run_id):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    @classmethod
    def assert_nothing_left(cls, run_dir: Path, extra_pids: Sequence[int] = ()) -> None:
        """No guard, rank, or listed pid of the run is alive, nor anything marked with its id."""
        manifest = json.loads((run_dir / "manifest.json").read_text())
        pids = [p["guard_pid"] for p in manifest["process_exits"]]
        pids += [r["pid"] for r in manifest["ranks"].values() if r["pid"]]
        pids += list(extra_pids)
        assert pids
        assert not [p for p in pids if cls.alive(p)], "processes of the run are still alive"
        assert cls.marked_pids(manifest["run_id"]) == []


@pytest.fixture
def probe() -> type[Probe]:
    return Probe


@dataclass
class Driver:
    """launch() running in a child process."""

    proc: subprocess.Popen[str]
    results: Path

    def run_dir(self, within: float = 20.0) -> Path:
        end = time.monotonic() + within
        while time.monotonic() < end:
            found = list((self.results / "runs").glob("*/*/manifest.json"))
            if found:
                return found[0].parent
            if self.proc.poll() is not None:
                raise AssertionError(f"driver exited early: {self.proc.communicate()}")
            time.sleep(0.1)
        raise AssertionError("no run directory appeared")

    def wait_ready(self, ranks: int, within: float = 30.0) -> Path:
        run_dir = self.run_dir(within)
        end = time.monotonic() + within
        while time.monotonic() < end:
            ready = sum("ready" in p.read_text() for p in run_dir.glob("rank-*.log") if p.exists())
            if ready >= ranks:
                return run_dir
            if self.proc.poll() is not None:
                raise AssertionError(f"driver exited early: {self.proc.communicate()}")
            time.sleep(0.1)
        raise AssertionError(f"ranks not ready in {run_dir}")


@pytest.fixture
def start_driver(tmp_path: Path) -> Iterator[Callable[..., Driver]]:
    """Start launch() in a subprocess; everything it started is killed at the end."""
    started: list[Driver] = []

    def start(**cfg: object) -> Driver:
        results = tmp_path / f"results-{len(started)}"
        cfg = {"results": str(results), **cfg}
        proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps(cfg)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        d = Driver(proc, results)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
        d.proc.communicate(timeout=30)
        for manifest in (d.results / "runs").glob("*/*/manifest.json"):
            Probe.kill_marked(json.loads(manifest.read_text())["run_id"])


# -- a real sshd on loopback ---------------------------------------------------------------


@dataclass(frozen=True)
class SshServer:
    port: int
    client_key: Path
    known_hosts: Path

    @property
    def options(self) -> list[str]:
        return [
            "-F", "/dev/null",
            "-i", str(self.client_key),
            "-o", "IdentitiesOnly=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
        ]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "distlab-test", "-f", str(path)],
        check=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """An OpenSSH server on 127.0.0.1 and 127.0.0.2, one free port, that accepts one
    throw-away key."""
    if os.geteuid() != 0:
        pytest.skip("the sshd fixture runs sshd as root")
    if not Path(SSHD).is_file():
        pytest.skip("no /usr/sbin/sshd: apt-get install -y openssh-server")
    import psutil

    d = tmp_path_factory.mktemp("sshd")
    _keygen(d / "host_key")
    _keygen(d / "client_key")
    port = _free_port()
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    host_pub = (d / "host_key.pub").read_text().split()
    known = f"[127.0.0.1]:{port},[{SECOND_LOOPBACK}]:{port} {host_pub[0]} {host_pub[1]}\n"
    (d / "known_hosts").write_text(known)
    config = d / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nListenAddress {SECOND_LOOPBACK}\n"
        f"HostKey {d / 'host_key'}\n"
        f"PidFile {d / 'sshd.pid'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        "StrictModes no\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "X11Forwarding no\nAllowTcpForwarding no\nPrintMotd no\nLogLevel VERBOSE\n"
    )
    # sshd insists on its privilege-separation directory existing.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = (d / "sshd.log").open("w")
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        end = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                pytest.fail(f"sshd exited: {(d / 'sshd.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > end:
                    pytest.fail(f"sshd not listening: {(d / 'sshd.log').read_text()}")
                time.sleep(0.1)
        yield SshServer(port, d / "client_key", d / "known_hosts")
    finally:
        try:
            sessions = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            sessions = []
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        for s in sessions:
            with contextlib.suppress(psutil.Error):
                s.kill()
        psutil.wait_procs(sessions, timeout=5)
        log.close()


# -- a real Slurm on this machine ------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm() -> Iterator[Any]:
    """A single-node Slurm for the module (lab.cluster.slurm.testbed), its clients pointed
    at it through ``SLURM_CONF``; every daemon ends with the module, and no test may leave
    a job queued."""
    yield from _test_slurm(cpus=2, nodes=1)


@pytest.fixture(scope="module")
def slurm_two_nodes() -> Iterator[Any]:
    """As ``slurm``, with two nodes of one CPU each (one slurmd per node)."""
    yield from _test_slurm(cpus=1, nodes=2)


def _test_slurm(cpus: int, nodes: int) -> Iterator[Any]:
    from lab.cluster.slurm.testbed import local_slurm, missing_programs

    missing = missing_programs()
    if missing:
        pytest.skip(f"Slurm/munge not installed (missing {', '.join(missing)}; env/setup.sh)")
    old = os.environ.get("SLURM_CONF")
    with local_slurm(cpus=cpus, nodes=nodes) as bed:
        os.environ["SLURM_CONF"] = str(bed.conf)
        try:
            yield bed
        finally:
            if old is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = old
            assert bed.queue_within(10.0) == [], "a test left a job in the queue"
