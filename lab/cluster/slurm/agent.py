"""What mpirun runs in ssh's place on a slurm profile: ``python -m lab.cluster.slurm.agent
--job=JOB_ID NODE COMMAND...`` runs COMMAND (mpirun's daemon with its environment settings,
in words as ssh would hand them to the remote shell) through ``sh -c`` on NODE as a task of
job JOB_ID, beside the job's other steps. Ending the agent ends the task, as ending ssh
would; but mpirun exits while its daemons are still saying goodbye, so the agent gives srun
LINGER_SECONDS to end with its daemon before it passes a SIGTERM on (otherwise every
finished run's log would end with Slurm's "STEP ... CANCELLED").

The job goes as ``--job=J``, one word: OpenMPI 5 splits the agent's string on spaces and
drops a last word that does not start with ``-`` (seen with 5.0.11: ``agent a b 5`` ran
as ``agent a b NODE ...``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence

LINGER_SECONDS = 1.0


def srun_argv(job_id: str, node: str, cwd: str | None = None) -> list[str]:
    """``srun`` starting one task on ``node`` inside job ``job_id``, beside the job's
    other steps (``--overlap``), with the caller's environment."""
    argv = [
        "srun",
        f"--jobid={job_id}",
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--overlap",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--quiet",
    ]
    if cwd:
        argv.append(f"--chdir={cwd}")
    return argv


def agent_argv(job_id: str, node: str, command: Sequence[str]) -> list[str]:
    """The srun that carries ``command`` to ``node`` (pure, for tests and the manifest)."""
    srun = [a for a in srun_argv(job_id, node) if a != "--kill-on-bad-exit=1"]
    return [*srun, "--", "/bin/sh", "-c", " ".join(command)]


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or not args[0].startswith("--job="):
        sys.exit("usage: python -m lab.cluster.slurm.agent --job=JOB_ID NODE COMMAND...")
    job, node, *command = args
    job_id = job.removeprefix("--job=")
    proc = subprocess.Popen(agent_argv(job_id, node, command))
    asked: list[tuple[int, float]] = []  # (signal, when) of a request to end

    def on_signal(signum: int, _frame: object) -> None:
        asked.append((signum, time.monotonic()))

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    passed = False
    while proc.poll() is None:
        if asked and not passed and time.monotonic() - asked[0][1] > LINGER_SECONDS:
            proc.send_signal(asked[0][0])
            passed = True
        time.sleep(0.05)
    sys.exit(proc.returncode if proc.returncode >= 0 else 128 - proc.returncode)


if __name__ == "__main__":
    main()
