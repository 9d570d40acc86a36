"""An OpenSSH server inside each emulated host (``emulated: {sshd: true}``).

With it, tools that reach hosts over SSH (``mpirun -H``, the ps launcher) reach emulated
hosts by address exactly as real nodes. Each sshd runs inside its host's namespace and
cgroup, so sessions it starts do too, and it ends with the host's cgroup. Sessions see the
host's name as hostname and get its variables (lifecycle.host_env). Keys are throw-away
ones in the cluster's own directory under the lab's cache; the cluster's
``extra["ssh_options"]`` carries the identity and known_hosts to use.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from lab.cluster.inventory import Host
from lab.errors import LaunchError

START_TIMEOUT = 15.0


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "distlab-emulated", "-f", str(path)],
        check=True, timeout=30, stdin=subprocess.DEVNULL, capture_output=True,
    )  # fmt: skip


def _config(d: Path) -> Path:
    config = d / "sshd_config"
    config.write_text(
        f"HostKey {d / 'host_key'}\nAuthorizedKeysFile {d / 'authorized_keys'}\nPidFile none\n"
        "StrictModes no\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "X11Forwarding no\nAllowTcpForwarding no\nPrintMotd no\nAcceptEnv *\n"
    )
    return config


def start(
    hosts: Sequence[Host],
    directory: Path,
    wrap: Callable[[Host, Sequence[str]], list[str]],
    servers: list[subprocess.Popen],
    env: Callable[[Host], Mapping[str, str]] | None = None,
) -> list[str]:
    """Start one sshd per host (through ``wrap``, i.e. wrap_argv) and wait until each listens.

    ``servers`` receives each sshd process as it starts (for ``stop``). ``env(host)`` is
    set in every session of that host (sshd's ``SetEnv``): a session starts from a fresh
    environment, so ranks started over SSH would otherwise miss the host's variables
    (e.g. lifecycle.host_env's interface names) that ranks started by wrap_argv get.

    Returns:
        The ssh options that reach them: identity, known_hosts, strict host-key checking.
    """
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not Path(sshd).is_file() or shutil.which("ssh-keygen") is None:
        raise LaunchError("emulated.sshd needs OpenSSH (apt-get install openssh-server)")
    if shutil.which("unshare") is None or shutil.which("hostname") is None:
        raise LaunchError("emulated.sshd needs unshare and hostname (util-linux, hostname)")
    _privsep_directory()
    directory.mkdir(parents=True, exist_ok=True)
    _keygen(directory / "host_key")
    _keygen(directory / "client_key")
    (directory / "authorized_keys").write_text((directory / "client_key.pub").read_text())
    kind, key = (directory / "host_key.pub").read_text().split()[:2]
    known = directory / "known_hosts"
    known.write_text("".join(f"{h.address} {kind} {key}\n" for h in hosts))
    config = _config(directory)
    procs = []
    for h in hosts:
        log = (directory / f"sshd-{h.name}.log").open("w")
        argv = [sshd, "-D", "-e", "-f", str(config), "-o", f"ListenAddress={h.address}"]
        argv = [*_own_hostname(h.name), *argv, *_set_env(env(h) if env else {})]
        proc = subprocess.Popen(wrap(h, argv), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        servers.append(proc)
        procs.append((h, proc))
    deadline = time.monotonic() + START_TIMEOUT
    for h, proc in procs:
        while True:
            if proc.poll() is not None:
                text = (directory / f"sshd-{h.name}.log").read_text()
                raise LaunchError(f"sshd on emulated host {h.name} exited: {text.strip()}")
            try:
                socket.create_connection((h.address, 22), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise LaunchError(f"sshd on emulated host {h.name} is not listening") from None
                time.sleep(0.1)
    return [
        "-F", "/dev/null", "-i", str(directory / "client_key"), "-o", "IdentitiesOnly=yes",
        "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
    ]  # fmt: skip


def _privsep_directory() -> None:
    """sshd refuses to start without /run/sshd, which the distribution's service unit creates
    at boot (a runtime directory on tmpfs). Emulated hosts run as root, so create it as that
    unit would; a machine that never started the service (a fresh container) has none."""
    privsep = Path("/run/sshd")
    if privsep.is_dir():
        return
    try:
        privsep.mkdir(mode=0o755)
    except FileExistsError:
        pass
    except OSError as error:
        raise LaunchError(
            f"sshd needs its privilege-separation directory {privsep}: {error}"
        ) from error


def _own_hostname(name: str) -> list[str]:
    """Run sshd (and so every session) in a UTS namespace named after its host. Engines
    that start ranks over SSH tell nodes apart by hostname: OpenMPI with the machine's one
    name on every host mixes up which ranks share a node, and its collectives hang or fail
    (MPI_ERR_TRUNCATE in MPI_Comm_split_type)."""
    return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', name]


def _set_env(env: Mapping[str, str]) -> list[str]:
    """``-o "SetEnv K=V ..."`` for sshd; values with blanks or quotes are left out (SetEnv
    would need them quoted, and the lab's host variables never have any)."""
    pairs = [f"{k}={v}" for k, v in env.items() if v and not set(v) & set(" \t\n\"'")]
    return ["-o", "SetEnv " + " ".join(pairs)] if pairs else []


def stop(servers: Sequence[subprocess.Popen], grace: float = 5.0) -> None:
    """End the sshds (SIGTERM, then SIGKILL after ``grace``); their sessions end with them
    or with the host's cgroup."""
    for proc in servers:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in servers:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=grace)
