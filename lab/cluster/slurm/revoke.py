"""A revocation through the scheduler: a node of the run's Slurm job taken away, as a
cloud takes a transient server (CM-DARE), by Slurm itself rather than by the lab ending
the processes it started there.

Two ways, a fault plan's ``via`` (lab.cluster.faults.Revocation):

- ``"scontrol"``: ``scontrol update NodeName=N State=DOWN Reason=...``. Slurm ends the
  job's tasks on N at once (0.1 s on the test Slurm) and takes N out of the job; the job
  lives on with its other nodes because the lab asks for it with ``--no-kill``. After the
  revocation's delay the node is resumed (``State=RESUME``): it comes back to its
  partition, idle, not to the job, so nothing can be started on it again in this run.
  Needs a Slurm administrator (root on the test Slurm); a node is never left DOWN by a
  run that ends, whatever way it ends, nor by a lab killed meanwhile: the node's DOWN
  reason names the job, and the job's keeper (lab.cluster.slurm.keeper), which cancels a
  dead lab's job, resumes the nodes left DOWN under its name.
- ``"scancel"``: ``scancel JOB.STEP`` for each of the job's steps on N, what any user may
  do: the tasks end, N stays in the job, and a cold replacement starts there again as a
  new step.

Every call has a timeout and raises LaunchError with Slurm's words when it fails.
"""

from __future__ import annotations

import logging
import subprocess

from lab.cluster.slurm.allocation import client
from lab.errors import LaunchError

SLURM_JOB = "slurm_job"  # cluster.extra: the job id of a run on a slurm profile
SLURM_NODES = "slurm_nodes"  # cluster.extra: a profile's host name -> the job's node
SLURM_JOB_NAME = "slurm_job_name"  # cluster.extra: the job's name (its keeper knows it by it)
log = logging.getLogger(__name__)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    done = client(*argv)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-400:]
        raise LaunchError(f"{' '.join(argv)} failed ({done.returncode}): {said}")
    return done


def down_argv(node: str, reason: str) -> list[str]:
    """``scontrol`` taking ``node`` DOWN with ``reason`` (what sinfo -R then shows)."""
    return ["scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={reason}"]


def resume_argv(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


def reason_for(job_name: str | None, run: str) -> str:
    """The DOWN reason of a node a run revoked (what ``sinfo -R`` shows); it names the job,
    so that the job's keeper finds the node should the lab die before resuming it."""
    return f"distlab revoked it (job {job_name or '?'}, run {run})"


def down_for(job_name: str) -> list[str]:
    """The nodes that are DOWN because a run of the job called ``job_name`` revoked them."""
    out = _run("sinfo", "-h", "-N", "-R", "-o", "%N|%E").stdout  # node names, one a line
    mark = f"(job {job_name},"
    rows = (line.partition("|") for line in out.splitlines())
    return sorted({node for node, _, why in rows if mark in why})


def resume_left_down(job_name: str) -> list[str]:
    """Resume every node a run of ``job_name`` left DOWN (its lab died before doing it);
    the nodes resumed. Errors are logged, never raised: a keeper calls this on its way out."""
    try:
        nodes = down_for(job_name)
    except (LaunchError, OSError, subprocess.TimeoutExpired) as e:
        log.error("cannot list the nodes job %s left DOWN: %s", job_name, e)
        return []
    resumed = []
    for node in nodes:
        try:
            resume(node)
            resumed.append(node)
        except (LaunchError, OSError, subprocess.TimeoutExpired) as e:
            log.error("cannot resume node %s (left DOWN by job %s): %s", node, job_name, e)
    return resumed


def take_down(node: str, reason: str) -> None:
    """Take ``node`` DOWN: Slurm ends every task on it."""
    _run(*down_argv(node, reason))


def resume(node: str) -> None:
    """Give ``node`` back to its partition."""
    _run(*resume_argv(node))


def steps_on(job_id: str, node: str) -> list[str]:
    """The job's steps (``JOB.STEP``) whose nodes include ``node``."""
    out = _run("squeue", "-h", "-s", "-j", job_id, "-o", "%i %N").stdout
    steps = []
    for line in out.splitlines():
        step, _, nodes = line.partition(" ")
        if step and node in _hostnames(nodes.strip()):
            steps.append(step)
    return steps


def _hostnames(nodelist: str) -> list[str]:
    if not nodelist or ("[" not in nodelist and "," not in nodelist):
        return [nodelist]
    return _run("scontrol", "show", "hostnames", nodelist).stdout.split()


def cancel_steps(steps: list[str]) -> None:
    """End these steps' tasks (Slurm signals them, then kills what is left)."""
    if steps:
        _run("scancel", "--quiet", *steps)


__all__ = [
    "SLURM_JOB",
    "SLURM_JOB_NAME",
    "SLURM_NODES",
    "cancel_steps",
    "down_argv",
    "down_for",
    "reason_for",
    "resume",
    "resume_argv",
    "resume_left_down",
    "steps_on",
    "take_down",
]
