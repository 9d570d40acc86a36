"""What mpirun and horovodrun run in ssh's place on a slurm profile: ``python -m
lab.cluster.slurm.agent --job=JOB_ID [ssh options] NODE [ssh options] COMMAND...`` runs
COMMAND (mpirun's daemon, a Horovod rank or its probe: words as ssh would hand them to the
remote shell) through ``sh -c`` on NODE as a task of job JOB_ID, beside the job's other
steps. ssh's own options (horovodrun's ``-o StrictHostKeyChecking=no``, ``-p``, ``-i``)
mean nothing to srun and are dropped. Ending the agent ends the task, as ending ssh
would; but mpirun exits while its daemons are still saying goodbye, so the agent gives srun
LINGER_SECONDS to end with its daemon before it passes a SIGTERM on (otherwise a finished
run's log would mostly end with Slurm's "STEP ... CANCELLED"; on a loaded machine the
daemon may still take longer, and the line is then only noise).

The job goes as ``--job=J``, one word: OpenMPI 5 splits the agent's string on spaces and
drops a last word that does not start with ``-`` (seen with 5.0.11: ``agent a b 5`` ran
as ``agent a b NODE ...``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence

LINGER_SECONDS = 2.0  # under the supervisor's default grace (5 s) before SIGKILL


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


# ssh options that take a value (OpenSSH 9's ssh(1)); any other "-x" is a flag
_SSH_VALUED = set("BbcDEeFIiJLlmOoPpQRSWw")


def split_ssh_args(args: Sequence[str]) -> tuple[str, list[str]]:
    """(host, command words) from an ssh command line's arguments: options before and
    right after the host are skipped, the first word after them starts the command."""
    host: str | None = None
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("-") and len(word) > 1:
            i += 2 if len(word) == 2 and word[1] in _SSH_VALUED else 1
            continue
        if host is not None:
            break
        host = word
        i += 1
    if host is None:
        raise ValueError(f"no host in ssh arguments {list(args)!r}")
    return host, list(args[i:])


def agent_argv(job_id: str, node: str, command: Sequence[str]) -> list[str]:
    """The srun that carries ``command`` to ``node`` (pure, for tests and the manifest)."""
    srun = [a for a in srun_argv(job_id, node) if a != "--kill-on-bad-exit=1"]
    return [*srun, "--", "/bin/sh", "-c", " ".join(command)]


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or not args[0].startswith("--job="):
        sys.exit("usage: python -m lab.cluster.slurm.agent --job=JOB_ID NODE COMMAND...")
    job_id = args[0].removeprefix("--job=")
    node, command = split_ssh_args(args[1:])
    if not command:
        sys.exit("lab.cluster.slurm.agent: no command (an interactive login is not offered)")
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
