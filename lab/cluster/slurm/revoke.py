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
  run that ends, whatever way it ends.
- ``"scancel"``: ``scancel JOB.STEP`` for each of the job's steps on N, what any user may
  do: the tasks end, N stays in the job, and a cold replacement starts there again as a
  new step.

Every call has a timeout and raises LaunchError with Slurm's words when it fails.
"""

from __future__ import annotations

import subprocess

from lab.cluster.slurm.allocation import client
from lab.errors import LaunchError

SLURM_JOB = "slurm_job"  # cluster.extra: the job id of a run on a slurm profile
SLURM_NODES = "slurm_nodes"  # cluster.extra: a profile's host name -> the job's node


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
    "SLURM_NODES",
    "cancel_steps",
    "down_argv",
    "resume",
    "resume_argv",
    "steps_on",
    "take_down",
]
