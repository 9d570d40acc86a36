"""A run's hosts from Slurm: allocate (or join) a job, start every rank with ``srun``.

A profile with a ``slurm`` section names no hosts: they are the nodes of a Slurm job. When
the lab itself runs inside an allocation (``SLURM_JOB_ID`` is set: ``salloc``, ``sbatch``
or an interactive ``srun --pty``), the run uses it and leaves it alone. Otherwise it asks
for one with ``salloc --no-shell`` named after the run, and cancels it (``scancel``) when
the run ends, whatever way it ends, so nothing stays queued. Each process the launcher
builds for a node is started here, on the lab's machine, as ``srun --jobid J -w NODE
-N1 -n1 --overlap -- argv``: srun places it on its node, carries the environment, and when
the supervisor ends srun (Stop, a timeout, a failed rank) Slurm ends the task.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from lab.cluster.hooks import LaunchHook
from lab.cluster.inventory import Cluster, Host, Slot
from lab.cluster.launchers.base import Job, Launcher, ProcessSpec, launcher_host
from lab.errors import LaunchError

# per-rank launchers only: a launcher process (mpirun, horovodrun) would need srun as its
# remote agent, which is not done yet
LAUNCHERS_SUPPORTED = ("local",)
CLIENTS = ("salloc", "srun", "scancel", "scontrol")
ALLOC_SECONDS = 300.0  # how long salloc may wait for nodes before the run is refused
CLIENT_SECONDS = 30.0
_GRANTED = re.compile(r"Granted job allocation (\d+)")


def slurm_env() -> dict[str, str]:
    """The environment Slurm's clients run with (``SLURM_CONF`` and friends pass through)."""
    return dict(os.environ)


def _client(*argv: str, timeout: float = CLIENT_SECONDS) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=slurm_env(), check=False
    )


def salloc_argv(slurm: dict[str, Any], name: str) -> list[str]:
    """``salloc --no-shell`` asking for what the profile's ``slurm`` section says."""
    argv = ["salloc", "--no-shell", f"--job-name={name}"]
    argv.append(f"--nodes={int(slurm.get('nodes', 1))}")
    argv.append(f"--ntasks-per-node={int(slurm.get('tasks_per_node', 1))}")
    for key, flag in (("partition", "--partition"), ("account", "--account"), ("time", "--time")):
        if slurm.get(key):
            argv.append(f"{flag}={slurm[key]}")
    if slurm.get("gres"):
        argv.append(f"--gres={slurm['gres']}")
    elif int(slurm.get("gpus_per_node", 0)) > 0:
        argv.append(f"--gres=gpu:{int(slurm['gpus_per_node'])}")
    argv.extend(str(o) for o in slurm.get("options") or ())
    return argv


def allocate_job(slurm: dict[str, Any], name: str) -> str:
    """A new job's id; LaunchError with salloc's words when Slurm refuses, or gives no
    nodes within the profile's ``wait`` seconds (ALLOC_SECONDS by default)."""
    argv = salloc_argv(slurm, name)
    wait = int(slurm.get("wait", ALLOC_SECONDS))
    try:
        done = _client(*argv, f"--immediate={wait}", timeout=wait + 30)
    except subprocess.TimeoutExpired:
        cancel_by_name(name)
        raise LaunchError(f"{' '.join(argv)} got no nodes in {wait} s") from None
    except BaseException:  # interrupted while waiting: the pending job must not stay queued
        cancel_by_name(name)
        raise
    found = _GRANTED.search(done.stderr + done.stdout)
    if done.returncode != 0 or not found:
        cancel_by_name(name)
        said = (done.stderr or done.stdout).strip()[-600:]
        raise LaunchError(f"{' '.join(argv)} failed ({done.returncode}): {said}")
    return found.group(1)


def cancel(job_id: str) -> None:
    """Cancel a job the lab allocated; a job already gone is fine."""
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        _client("scancel", job_id)


def cancel_by_name(name: str) -> None:
    """Cancel any job of this run's name (an salloc that was ended while it waited)."""
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        _client("scancel", f"--name={name}", f"--user={os.getuid()}")


def job_nodes(job_id: str) -> list[str]:
    """The node names of a job, expanded (``node[1-2]`` is node1, node2)."""
    info = _client("scontrol", "show", "job", job_id, "--oneliner")
    found = re.search(r"\bNodeList=(\S+)", info.stdout)
    if info.returncode != 0 or not found or found.group(1) == "(null)":
        raise LaunchError(f"scontrol show job {job_id}: no nodes ({info.stderr.strip()})")
    names = _client("scontrol", "show", "hostnames", found.group(1))
    nodes = names.stdout.split()
    if names.returncode != 0 or not nodes:
        raise LaunchError(f"scontrol show hostnames {found.group(1)}: {names.stderr.strip()}")
    return nodes


def tasks_per_node(slurm: dict[str, Any]) -> int:
    """Ranks per node: the profile's, or inside an allocation Slurm's own count."""
    env = os.environ.get("SLURM_NTASKS_PER_NODE", "")
    if "tasks_per_node" not in slurm and env.isdigit():
        return int(env)
    return int(slurm.get("tasks_per_node", 1))


class SlurmHook(LaunchHook):
    """Hosts from a Slurm job, ranks through ``srun`` (one hook per run: it holds the job)."""

    def __init__(self) -> None:
        self.job_id: str | None = None
        self.nodes: list[str] = []
        self.owned = False

    def check(self, job: Job, slots: Sequence[Slot], launcher: Launcher) -> None:
        if launcher.name not in LAUNCHERS_SUPPORTED:
            raise LaunchError(
                f"launcher {launcher.name!r} is not wired to Slurm yet; a slurm profile runs "
                f"with launcher {', '.join(repr(n) for n in LAUNCHERS_SUPPORTED)}"
            )
        missing = [c for c in CLIENTS if shutil.which(c) is None]
        if missing:
            raise LaunchError(
                f"a slurm profile needs Slurm's clients; missing: {', '.join(missing)} "
                "(apt-get install slurm-client, or load your site's Slurm module)"
            )

    @contextlib.contextmanager
    def hosts(self, cluster: Cluster, launcher: Launcher) -> Iterator[Cluster]:
        slurm = cluster.slurm or {}
        given = os.environ.get("SLURM_JOB_ID")
        name = f"distlab-{uuid.uuid4().hex[:10]}"
        self.job_id, self.owned = (given, False) if given else (allocate_job(slurm, name), True)
        try:
            self.nodes = job_nodes(self.job_id)
            per_node = tasks_per_node(slurm)
            gpus = int(slurm.get("gpus_per_node", 0))
            template = cluster.hosts[0] if cluster.hosts else Host("node")
            hosts = tuple(
                dataclasses.replace(template, name=n, slots=per_node, gpus=gpus) for n in self.nodes
            )
            yield dataclasses.replace(cluster, hosts=hosts)
        finally:
            if self.owned:
                cancel(self.job_id)

    def process(self, spec: ProcessSpec) -> ProcessSpec:
        """Start ``spec`` on its node as one task of the job (the supervisor runs srun here)."""
        argv = [
            "srun",
            f"--jobid={self.job_id}",
            f"--nodelist={spec.host.name}",
            "--nodes=1",
            "--ntasks=1",
            "--overlap",
            "--kill-on-bad-exit=1",
            "--export=ALL",
            "--quiet",
        ]
        if spec.cwd:
            argv.append(f"--chdir={spec.cwd}")
        return dataclasses.replace(spec, argv=(*argv, "--", *spec.argv), host=launcher_host())

    def manifest(self) -> dict[str, Any]:
        return {
            "slurm": {
                "job_id": self.job_id,
                "nodes": list(self.nodes),
                "allocated_by_run": self.owned,
            }
        }


__all__ = ["SlurmHook", "allocate_job", "job_nodes", "salloc_argv"]
