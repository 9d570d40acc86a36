"""Reaching remote hosts: the ssh command line that runs a rank under the guard, and the
reachability check done before launch (DESIGN.md, contract 4).

Host keys are always checked (``StrictHostKeyChecking=yes``; lab.cluster.host_keys refuses
options that weaken it unless the profile allows it). Extra ssh options (an identity, a
known_hosts file, a jump host) come from ``$DISTLAB_SSH_OPTIONS`` (shell-quoted, e.g.
``-i ~/.ssh/lab -o UserKnownHostsFile=~/.ssh/lab_known_hosts``) and from a cluster's
``ssh_options`` (``Cluster.extra["ssh_options"]``, a list of arguments).
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lab.cluster.host_keys import INSECURE, refuse_weakening, strict, weakening
from lab.cluster.inventory import Cluster, Host
from lab.errors import HostSpecError, LaunchError

log = logging.getLogger(__name__)

GUARD_PATH = Path(__file__).with_name("guard.py")
SSH_OPTIONS_ENV = "DISTLAB_SSH_OPTIONS"
CONNECT_TIMEOUT = 10
SSH_FAILED = 255  # what the ssh client exits with when it, not the remote command, failed


@functools.cache
def guard_source() -> str:
    """guard.py's source, sent inline as ``python3 -c SRC`` so remote hosts need no install."""
    return GUARD_PATH.read_text()


def insecure_host_keys(cluster: Cluster | None) -> bool:
    """Whether the cluster's profile turns host-key checking off explicitly
    (``ssh: {insecure_host_keys: true}``)."""
    return cluster is not None and cluster.extra.get(INSECURE) is True


def ssh_options(cluster: Cluster | None = None) -> list[str]:
    """Extra ssh arguments: ``$DISTLAB_SSH_OPTIONS`` first, then the cluster's.

    Raises ParameterError naming an option that weakens host-key checking, unless the
    cluster's profile allows it (lab.cluster.host_keys)."""
    options = shlex.split(os.environ.get(SSH_OPTIONS_ENV, ""))
    extra = (cluster.extra.get("ssh_options") if cluster is not None else None) or []
    if isinstance(extra, str):
        extra = shlex.split(extra)
    extra = [str(x) for x in extra]
    allowed = insecure_host_keys(cluster)
    refuse_weakening(options, SSH_OPTIONS_ENV, allowed)
    refuse_weakening(extra, "ssh.options", allowed)
    return [*options, *extra]


def ssh_prefix(
    host: Host, options: Sequence[str] = (), connect_timeout: int = CONNECT_TIMEOUT
) -> list[str]:
    """``ssh [options] host``: batch mode (never prompt), keep-alives, host keys checked
    (``StrictHostKeyChecking=yes`` first, unless ``options`` weaken it, which ssh_options
    lets through only for a profile that says so)."""
    if host.name.startswith("-"):
        raise HostSpecError(f"host name {host.name!r} may not start with '-'")
    ssh = shutil.which("ssh")
    if ssh is None:
        raise LaunchError(
            f"host {host.name!r} is remote but 'ssh' is not on PATH; "
            "install the OpenSSH client (apt-get install openssh-client)"
        )
    argv = [
        "ssh",
        "-T",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={connect_timeout}",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3",
    ]  # fmt: skip
    if host.ssh_port is not None:
        argv += ["-p", str(host.ssh_port)]
    if host.ssh_user:
        argv += ["-l", host.ssh_user]
    return [*argv, *strict(options, insecure=bool(weakening(options))), host.name]


def remote_guard_argv(
    host: Host,
    remote_argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None = None,
    grace: float = 5.0,
    stdin_env: Sequence[str] = (),
) -> list[str]:
    """The remote side: the guard, inline, with the rank's environment and directory. The
    ``stdin_env`` variables (secret values) are read from the guard's stdin, not given
    here: a command line is readable by every user of the host."""
    argv = [host.python or "python3", "-c", guard_source()]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    if stdin_env:
        argv += ["--stdin-env", str(len(stdin_env))]
    if cwd or host.workdir:
        argv += ["--cwd", str(cwd or host.workdir)]
    return [*argv, "--grace", f"{grace:g}", "--", *remote_argv]


def ssh_argv(
    host: Host,
    remote_argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None = None,
    options: Sequence[str] = (),
    grace: float = 5.0,
    stdin_env: Sequence[str] = (),
) -> list[str]:
    """The local argv that runs ``remote_argv`` on ``host`` under the remote guard.

    The remote command is one ``shlex.join``-quoted string (ssh hands it to the remote
    user's shell). When the ssh client ends, the remote guard reads EOF on its stdin and
    ends the remote rank.
    """
    remote = remote_guard_argv(host, remote_argv, env, cwd, grace, stdin_env)
    return [*ssh_prefix(host, options), "--", shlex.join(remote)]


def check_reachable(host: Host, timeout: float = 15.0, options: Sequence[str] = ()) -> None:
    """Fail unless ``host`` answers over SSH and has its Python; raises LaunchError."""
    python = host.python or "python3"
    argv = [
        *ssh_prefix(host, options, connect_timeout=max(1, min(CONNECT_TIMEOUT, int(timeout)))),
        "--",
        shlex.join([python, "-c", "pass"]),
    ]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise LaunchError(
            f"host {host.name!r} is unreachable: ssh gave no answer within {timeout:g}s"
        ) from None
    said = done.stderr.strip() or f"exit code {done.returncode}"
    if done.returncode == SSH_FAILED:
        raise LaunchError(f"host {host.name!r} is unreachable over SSH: {said}")
    if done.returncode != 0:
        raise LaunchError(f"host {host.name!r}: {python!r} cannot run there: {said}")


def check_hosts(hosts: Iterable[Host], timeout: float = 15.0, options: Sequence[str] = ()) -> None:
    """check_reachable for every remote host at once; one error naming all that failed."""
    remote = list(dict.fromkeys(h for h in hosts if not h.is_local and h.namespace is None))
    if not remote:
        return
    log.debug("checking %d remote host(s) over SSH", len(remote))
    with ThreadPoolExecutor(max_workers=min(16, len(remote))) as pool:
        futures = [pool.submit(check_reachable, h, timeout, options) for h in remote]
    errors = [str(f.exception()) for f in futures if f.exception() is not None]
    if errors:
        raise LaunchError("\n".join(errors))


# -- an ssh_config for launchers that run their own ssh (mpirun) ---------------------------

SSH_CONFIG_NAME = "ssh_config"
USER_SSH_CONFIG = "~/.ssh/config"
SYSTEM_SSH_CONFIG = "/etc/ssh/ssh_config"


def needs_ssh_config(hosts: Iterable[Host]) -> bool:
    """Whether a remote host sets a port or user that only an ssh_config can carry to a
    launcher's own ssh (mpirun starts one ssh per host, with the same arguments for all)."""
    return any(not h.is_local and h.namespace is None and (h.ssh_port or h.ssh_user) for h in hosts)


def ssh_config_text(hosts: Iterable[Host], includes: Sequence[str] | None = None) -> str:
    """An ssh_config that gives each remote host its own Port and User, then everything
    else from the configs plain ``ssh`` reads (``includes``; default the user's and the
    system's). ssh takes the first value it finds for a setting, so these win; no
    HostName is set, so an ``~/.ssh/config`` alias still says where the host is."""
    lines = ["# Written by distlab for this run: how its launcher's ssh reaches each host."]
    for h in dict.fromkeys(hosts):
        if h.is_local or h.namespace is not None or not (h.ssh_port or h.ssh_user):
            continue
        if any(c.isspace() or c in "\"'#*?!," for c in h.name):
            raise HostSpecError(f"host name {h.name!r} cannot be written into an ssh_config")
        lines.append(f"Host {h.name}")
        if h.ssh_port:
            lines.append(f"    Port {int(h.ssh_port)}")
        if h.ssh_user:
            if any(c.isspace() for c in str(h.ssh_user)):
                raise HostSpecError(f"ssh user {h.ssh_user!r} of host {h.name!r} has spaces")
            lines.append(f"    User {h.ssh_user}")
    lines.append("Match all")
    for path in (USER_SSH_CONFIG, SYSTEM_SSH_CONFIG) if includes is None else includes:
        lines.append(f"Include {path}")
    return "\n".join(lines) + "\n"


def split_config_option(options: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Take ``-F FILE`` out of ssh options: (the rest, [FILE]) or (options, None) when none
    is given. A generated ssh_config includes FILE instead of the default configs
    (``-F /dev/null``: none), so the options keep their meaning."""
    rest, given = [], None
    it = iter(options)
    for opt in it:
        if opt == "-F":
            given = next(it, None)
        elif opt.startswith("-F") and len(opt) > 2:
            given = opt[2:]
        else:
            rest.append(opt)
    if given is None:
        return rest, None
    return rest, [] if given == os.devnull else [given]


def write_ssh_config(hosts: Sequence[Host], run_dir: Path, options: Sequence[str]) -> Path | None:
    """For launchers that run their own ssh (mpirun): when remote ``hosts`` set ssh_port or
    ssh_user, write ``run_dir/ssh_config`` saying them and return its path (None when no
    host needs one). It includes the configs plain ssh reads (or the file an ``-F`` in
    ``options`` names), so nothing else changes."""
    if not needs_ssh_config(hosts):
        return None
    _, given = split_config_option(options)
    includes = None if given is None else [os.path.abspath(os.path.expanduser(g)) for g in given]
    path = run_dir / SSH_CONFIG_NAME
    path.write_text(ssh_config_text(hosts, includes))
    path.chmod(0o600)  # ssh refuses a config that others may write
    return path
