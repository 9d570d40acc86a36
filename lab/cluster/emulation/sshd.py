"""An OpenSSH server inside each emulated host (``emulated: {sshd: true}``).

With it, tools that reach hosts over SSH (``mpirun -H``, ``horovodrun -H``, the ps
launcher) reach emulated hosts by address exactly as real nodes. Each sshd runs inside its
host's namespace and cgroup, so sessions it starts do too, and it ends with the host's
cgroup. Keys are throw-away ones in the cluster's own directory under the lab's cache;
the cluster's ``extra["ssh_options"]`` carries the identity and known_hosts to use.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
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
) -> list[str]:
    """Start one sshd per host (through ``wrap``, i.e. wrap_argv) and wait until each listens.

    ``servers`` receives each sshd process as it starts (for ``stop``).

    Returns:
        The ssh options that reach them: identity, known_hosts, strict host-key checking.
    """
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not Path(sshd).is_file() or shutil.which("ssh-keygen") is None:
        raise LaunchError("emulated.sshd needs OpenSSH (apt-get install openssh-server)")
    if not Path("/run/sshd").is_dir():
        raise LaunchError("sshd needs its privilege-separation directory: mkdir -p /run/sshd")
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
