"""The processes of a run as the supervisor knows them, and the tracking of their
descendants so that none escapes the final SIGKILL (a rank's grandchildren included)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from lab.cluster.launchers.base import ProcessSpec
from lab.cluster.ssh import GUARD_PATH, ssh_argv
from lab.metrics.layout import REPO_ROOT

log = logging.getLogger(__name__)

TAIL_LINES = 50  # kept per rank while running
SAID_LINES = 300  # a launcher's own lines kept per process: its failure report is there
RUN_ID_ENV = "LAB_RUN_ID"


class Proc:
    """One started process and what the supervisor knows about it."""

    def __init__(self, spec: ProcessSpec, argv: list[str], env: dict[str, str], cwd: str | None):
        self.spec, self.argv, self.env, self.cwd = spec, argv, env, cwd
        self.remote = not (spec.host.is_local or spec.host.namespace is not None)
        self.popen: subprocess.Popen[bytes] | None = None
        self.started: float | None = None
        self.ended: float | None = None
        self.code: int | None = None
        self.signal: str | None = None
        self.rank_pid: int | None = None
        self.revoked = False  # ended on purpose by a fault plan: its exit fails nothing
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.said: deque[str] = deque(maxlen=SAID_LINES)  # lines no rank can be named for
        self.readers: list[threading.Thread] = []


def guarded(
    spec: ProcessSpec,
    run_id: str,
    grace: float,
    ssh_options: Sequence[str] = (),
    secret: Collection[str] = frozenset(),
) -> Proc:
    """``spec`` as the supervisor starts it: under lab/cluster/guard.py, whose stdin is the
    kill switch. A local (or namespaced) process runs under a local guard; a remote one is
    an ssh client under a local guard, and the rank under a remote guard, which gets
    ``grace`` and the environment explicitly: on its command line, except the ``secret``
    variables, which the local guard writes into the ssh channel (``--send-env``) and the
    remote guard reads from its stdin (``--stdin-env``). Every process carries
    ``LAB_RUN_ID``, and Python's fault handler: a rank killed by a signal (a SIGSEGV in
    TF's parameter-server chief, seen once in a thousand runs) leaves every thread's
    Python stack in its log, and still dies of that signal."""
    env = {"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1", **spec.env, RUN_ID_ENV: run_id}
    # -I -S: the guard is stdlib-only, so it skips site (the venv's .pth files) and
    # the user's PYTHON* variables; its child still gets the whole environment.
    guard = [sys.executable, "-I", "-S", str(GUARD_PATH)]
    if spec.host.is_local or spec.host.namespace is not None:
        argv = [*guard, "--grace", f"{grace:g}", "--", *spec.argv]
        local_env = with_lab_importable({**os.environ, **env})
        return Proc(spec, argv, local_env, spec.cwd or os.getcwd())
    hidden = {k: v for k, v in env.items() if k in secret}
    shown = {k: v for k, v in env.items() if k not in hidden}
    inner = ssh_argv(spec.host, spec.argv, shown, spec.cwd, ssh_options, grace, sorted(hidden))
    wait_remote = grace + 3.0  # the remote guard's grace, plus the way back
    send = [x for name in sorted(hidden) for x in ("--send-env", name)]
    argv = [*guard, "--grace", "2", "--forward-eof", f"{wait_remote:g}", *send, "--", *inner]
    return Proc(spec, argv, {**os.environ, RUN_ID_ENV: run_id, **hidden}, None)


def with_lab_importable(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout last on ``PYTHONPATH``: ranks start in the caller's
    directory, and the lab's own workloads (``python -m lab.bench...``) must import ``lab``
    from there too, in interpreters without the editable install (the MXNet venv). Last,
    so a script's own modules and the user's path win."""
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in parts:
        parts.append(str(REPO_ROOT))
    return {**env, "PYTHONPATH": os.pathsep.join(parts)}


def rank_of(p: Proc) -> int:
    """The rank a process answers for in reports (-1 for rank-less processes, e.g. a PS)."""
    return p.spec.ranks[0] if p.spec.ranks else -1


class ProcessTracker:
    """Every descendant ever seen under a run's guards, keyed by (pid, start time) so a
    reused pid is never mistaken for one of ours."""

    def __init__(self) -> None:
        self._tracked: dict[tuple[int, float], Any] = {}
        self._warned = False

    def snapshot(self, procs: Iterable[Proc]) -> None:
        """Record the live descendants of every running guard; learn each rank's pid.

        Walks down from each guard through /proc/PID/task/*/children (a few reads per
        run, where listing every process on a shared machine costs tens of ms).
        """
        try:
            import psutil
        except ImportError:
            if not self._warned:
                self._warned = True
                log.warning("psutil is missing; relying on the guards alone")
            return
        from lab.cluster.guard import descendants

        for p in procs:
            if p.popen is None or p.code is not None:
                continue
            found = descendants(p.popen.pid)  # the guard's own children come first
            if p.rank_pid is None and found and not p.remote:
                p.rank_pid = found[0]
            for pid in found:
                try:
                    pr = psutil.Process(pid)
                    self._tracked.setdefault((pid, pr.create_time()), pr)
                except psutil.Error:
                    continue

    def kill_leftovers(self) -> int:
        """SIGKILL every tracked process still alive; return how many there were."""
        try:
            import psutil
        except ImportError:
            return 0
        alive = []
        for pr in self._tracked.values():
            try:
                if pr.is_running() and pr.status() != psutil.STATUS_ZOMBIE:
                    pr.kill()
                    alive.append(pr)
            except psutil.Error:
                pass
        if alive:
            psutil.wait_procs(alive, timeout=3)
        return len(alive)
