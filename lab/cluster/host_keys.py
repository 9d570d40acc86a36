"""Host keys are checked on every SSH connection the lab causes (DESIGN.md, contract 4).

The lab's own ssh calls say ``StrictHostKeyChecking=yes``; engines that run their own ssh get
it too: mpirun through its ssh agent, horovodrun (whose ssh says
``StrictHostKeyChecking=no``, hard-coded) through a per-run ``ssh`` first on its PATH that
drops that option and applies the run's ssh_config (each host's user and port), the
profile's options and strict checking (lab/cluster/checked_ssh.py).

Options that weaken checking (``StrictHostKeyChecking=no|off|accept-new``,
``UserKnownHostsFile=/dev/null``) are refused, wherever they come from
(``$DISTLAB_SSH_OPTIONS``, a profile's ``ssh.options``), unless the profile says
``ssh: {insecure_host_keys: true}``; such a run is then recorded in its manifest
(``ssh.insecure_host_keys``) and said at launch.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from lab.errors import LaunchError, ParameterError

STRICT = ("-o", "StrictHostKeyChecking=yes")
INSECURE = "insecure_host_keys"  # the profile's ssh key, and Cluster.extra's
WEAK_CHECKING = frozenset({"no", "off", "accept-new"})
KNOWN_FILES = ("userknownhostsfile", "globalknownhostsfile")
NO_FILES = frozenset({"/dev/null", "none"})
CHECKED_SSH = Path(__file__).with_name("checked_ssh.py")
WRAPPER_DIR = "bin"  # in the run directory: the ssh put first on an engine's PATH


def _settings(options: Sequence[str]) -> Iterator[tuple[str, str, str]]:
    """Each ``-o`` setting in ``options`` as (name in lower case, value, as written)."""
    it = iter(options)
    for opt in it:
        if opt == "-o":
            given = next(it, "")
        elif opt.startswith("-o") and len(opt) > 2:
            given = opt[2:]
        else:
            continue
        name, _, value = given.replace("=", " ", 1).strip().partition(" ")
        yield name.lower(), value.strip().strip('"'), given


def weakening(options: Sequence[str]) -> list[str]:
    """The settings in ``options`` that would let ssh connect to a host whose key is not
    known, or not the one known (as written, e.g. ``StrictHostKeyChecking=no``)."""
    found = []
    for name, value, given in _settings(options):
        unchecked = name == "stricthostkeychecking" and value.lower() in WEAK_CHECKING
        no_files = name in KNOWN_FILES and bool(value) and set(value.split()) <= NO_FILES
        if unchecked or no_files:
            found.append(given)
    return found


def refuse_weakening(options: Sequence[str], source: str, allowed: bool) -> list[str]:
    """Raise ParameterError naming the first setting in ``options`` (from ``source``) that
    weakens host-key checking, unless ``allowed``; return those settings."""
    weak = weakening(options)
    if weak and not allowed:
        raise ParameterError(
            source,
            weak[0],
            "ssh options that keep host keys checked; a cluster profile may turn checking "
            f"off explicitly with 'ssh: {{{INSECURE}: true}}'",
        )
    return weak


def strict(options: Sequence[str], insecure: bool = False) -> list[str]:
    """``options`` with ``StrictHostKeyChecking=yes`` first (ssh keeps the first value it
    reads), unless the profile allows insecure host keys or ``options`` say it already."""
    said = any(n == "stricthostkeychecking" and v == "yes" for n, v, _ in _settings(options))
    if insecure or (said and not weakening(options)):
        return list(options)
    return [*STRICT, *options]


def write_ssh_wrapper(directory: Path, options: Sequence[str]) -> Path:
    """Write ``directory/ssh``: an ssh that runs the real one with ``options`` first and
    without the caller's own host-key settings (lab/cluster/checked_ssh.py). Put
    ``directory`` first on an engine's PATH. Returns the script's path."""
    ssh = shutil.which("ssh")
    if ssh is None:
        raise LaunchError("'ssh' is not on PATH; install the OpenSSH client")
    directory.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-I", "-S", str(CHECKED_SSH), ssh, str(len(options)), *options]
    path = directory / "ssh"
    path.write_text(
        "#!/bin/sh\n"
        "# Written by distlab for one run: the engine's ssh, with host keys checked.\n"
        f'exec {shlex.join(args)} "$@"\n'
    )
    path.chmod(0o700)
    return path


def write_agent_wrapper(directory: Path, agent: Sequence[str]) -> Path:
    """Write ``directory/ssh`` that runs ``agent`` with ssh's arguments: for hosts that are
    reached by another program in ssh's place (a Slurm job's nodes: srun, through
    lab.cluster.slurm.agent), no ssh connection is made at all. Returns the script's path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ssh"
    path.write_text(
        "#!/bin/sh\n"
        "# Written by distlab for one run: the hosts are reached without ssh.\n"
        f'exec {shlex.join(agent)} "$@"\n'
    )
    path.chmod(0o700)
    return path


__all__ = [
    "INSECURE",
    "STRICT",
    "refuse_weakening",
    "strict",
    "weakening",
    "write_agent_wrapper",
    "write_ssh_wrapper",
]
