"""A real single-machine Slurm in a temporary directory, for the slurm cluster kind's tests.

Other programs share this machine, so nothing here touches /etc/slurm, the default munge
socket or Slurm's default ports: munged gets its own key and socket, slurm.conf names its
own cluster, ports (lab.cluster.ports), state, spool, logs and pid files, all under one
temporary directory, and clients find it through ``SLURM_CONF``. One node, with this
machine's CPUs by default; or several, each a slurmd of its own started with ``-N NAME``
and listening on a port of its own (the node's ``Port=``), its pid file, log and spool
named after it (``%n``): Debian's Slurm is built without multiple-slurmd support, and
these are the parts of it that work without. The nodes have names of their own
(``NodeHostname`` is this machine, ``NodeAddr`` 127.0.0.1), not this machine's: the lab
then treats each as the compute node it stands for, reached only through Slurm, as from a
cluster's login node (mpirun's daemons start there through srun, not as local
processes). All of them share this machine's CPUs and network, so several nodes test
placement and faults (a node taken DOWN, lab.cluster.slurm.revoke), not speed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lab.cluster.inventory import Host
from lab.cluster.ports import port_block

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo", "squeue", "scancel")
START_SECONDS = 60.0


def missing_programs() -> list[str]:
    """The programs a test Slurm needs that this machine lacks (env/setup.sh installs them)."""
    return [p for p in DAEMONS if _which(p) is None]


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(Path(d) / name) for d in ("/usr/sbin", "/sbin") if (Path(d) / name).is_file()),
        None,
    )


@dataclass(frozen=True)
class LocalSlurm:
    """A running test Slurm: what clients need to reach it."""

    root: Path
    conf: Path
    cluster_name: str
    nodes: tuple[str, ...]
    cpus: int  # per node

    @property
    def node(self) -> str:
        """The first node (the only one of a one-node Slurm)."""
        return self.nodes[0]

    @property
    def env(self) -> dict[str, str]:
        """Variables that point Slurm's clients at this Slurm."""
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this Slurm."""
        return subprocess.run(
            argv,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def queue(self) -> list[str]:
        """Job ids this Slurm still holds, in any state squeue lists (pending, running,
        completing, recently completed ones excluded)."""
        out = self.run("squeue", "-h", "-o", "%i %T").stdout.split("\n")
        return [ln.split()[0] for ln in out if ln.strip() and "COMPLETED" not in ln]

    def queue_within(self, seconds: float) -> list[str]:
        """``queue()`` once it is empty, or as it is after ``seconds``: a job whose ``salloc``
        just returned is still COMPLETING for a moment while its node cleans up."""
        deadline = time.monotonic() + seconds
        while (held := self.queue()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return held


def _conf(root: Path, name: str, nodes: list[str], cpus: int, ctld: int, slurmd: int) -> str:
    """slurm.conf for ``nodes``, the i-th node's slurmd on port ``slurmd + i``.
    ReturnToService=1: a node that did not answer comes back by itself once it does, one
    taken DOWN by an administrator (a revocation) only when it is resumed."""
    here = socket.gethostname()
    lines = [
        f"NodeName={n} NodeHostname={here} NodeAddr=127.0.0.1 Port={slurmd + i} CPUs={cpus} "
        "State=UNKNOWN"
        for i, n in enumerate(nodes)
    ]
    return f"""ClusterName={name}
SlurmctldHost={here}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SlurmdParameters=config_overrides
ReturnToService=1
KillWait=1
MinJobAge=2
InactiveLimit=0
SlurmctldTimeout=10
SlurmdTimeout=10
PlugStackConfig={root}/plugstack.conf
{chr(10).join(lines)}
PartitionName=debug Nodes={",".join(nodes)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@contextlib.contextmanager
def local_slurm(cpus: int | None = None, nodes: int = 1) -> Iterator[LocalSlurm]:
    """Start munged, slurmctld and a slurmd per node under a temporary directory; yield
    when ``sinfo`` shows every node idle; end every daemon (and the directory) after.

    Args:
        cpus: each node's CPUs (default: this machine's).
        nodes: how many nodes (``<cluster>n1``, ``<cluster>n2`` ...), one partition.

    Raises:
        RuntimeError: a daemon did not come up within START_SECONDS (its log's tail said).
    """
    cpus = cpus or os.cpu_count() or 1
    root = Path(tempfile.mkdtemp(prefix="distlab-slurm-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        (root / "munge").mkdir(mode=0o700)
        for d in ("state", "spool"):
            (root / d).mkdir()
        (root / "plugstack.conf").write_text("")
        key = root / "munge" / "key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munged = [
            _which("munged") or "munged",
            "-F",
            "--force",
            f"--socket={root}/munge/socket",
            f"--key-file={key}",
            f"--pid-file={root}/munge/pid",
            f"--log-file={root}/munge/log",
            f"--seed-file={root}/munge/seed",
        ]
        procs.append(_start(munged, root / "munge.out"))
        _wait(lambda: (root / "munge" / "socket").exists(), "munged", root / "munge" / "log")
        ctld = port_block([Host("localhost")], 1 + nodes)
        name = f"dl{uuid.uuid4().hex[:8]}"
        names = [f"{name}n{i + 1}" for i in range(nodes)]
        conf = root / "slurm.conf"
        conf.write_text(_conf(root, name, names, cpus, ctld, ctld + 1))
        env = {**os.environ, "SLURM_CONF": str(conf)}
        procs.append(
            _start(
                [_which("slurmctld") or "slurmctld", "-D", "-i", "-f", str(conf)],
                root / "slurmctld.out",
                env,
            )
        )
        for node in names:
            procs.append(
                _start(
                    [_which("slurmd") or "slurmd", "-D", "-f", str(conf), "-N", node],
                    root / f"slurmd-{node}.out",
                    env,
                )
            )
        bed = LocalSlurm(root=root, conf=conf, cluster_name=name, nodes=tuple(names), cpus=cpus)

        def idle() -> bool:
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}: {_tail(root)}")
            out = bed.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=10).stdout.split()
            return out[1::2] == ["idle"] * nodes

        _wait(idle, "slurmd (nodes idle in sinfo)", root / f"slurmd-{names[-1]}.log")
        try:
            yield bed
        finally:
            _cancel_all(bed)
    finally:
        for p in reversed(procs):
            _stop(p)
        shutil.rmtree(root, ignore_errors=True)


def _cancel_all(bed: LocalSlurm) -> None:
    """Cancel every job still held, so no task outlives the daemons (up to 10 s)."""
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        for job in bed.queue():
            bed.run("scancel", job, timeout=10)
        deadline = time.monotonic() + 10
        while bed.queue() and time.monotonic() < deadline:
            time.sleep(0.2)


def _die_with_parent() -> None:
    """In the child: be killed when the process that started it dies (a killed test run
    must not leave daemons behind); Linux's PR_SET_PDEATHSIG, a no-op elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def _start(argv: list[str], out: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with out.open("wb") as f:
        return subprocess.Popen(
            argv,
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def _stop(p: subprocess.Popen) -> None:
    """End a daemon and what it started (slurmstepd stays in slurmd's session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)  # stragglers of the group (slurmstepd)


def _wait(ready, what: str, log: Path) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.3)
    text = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"{what} did not come up in {START_SECONDS:.0f} s; log: {text}")


def _tail(root: Path) -> str:
    parts = []
    for p in sorted(root.glob("slurm*.log")) + sorted(root.glob("slurm*.out")):
        parts.append(f"{p.name}: {p.read_text(errors='replace')[-800:]}")
    return " | ".join(parts)
