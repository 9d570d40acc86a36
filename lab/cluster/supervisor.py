"""The one place that starts, watches and ends a run's processes (DESIGN.md, contract 3).

Every ProcessSpec runs under lab/cluster/guard.py: locally ``python guard.py -- argv``;
remotely the ssh client runs under a local guard and the rank under a remote one. The
guard's stdin is a pipe the supervisor never writes: closing it (or dying, even by
``kill -9``) is the kill switch. One reader thread per stream splits the bytes into lines
on ``\\n`` and ``\\r`` (so progress bars show), attributes each line to its rank through the
launcher, appends it to ``rank-<r>.log`` (flushed per line) and hands it to the observers.

The state of a run follows from its processes' exit codes alone (:func:`poll`, pure, as in
torchrun): any failure fails the run, and the earliest failure is its root cause. Ending a
run is staged: close every guard's stdin and SIGTERM it, one shared deadline, then SIGKILL
the guards and every descendant still alive.

Run exit codes: 0 succeeded; a failed run exits with its root-cause rank's exit code (a
rank ended by signal N counts as 128 + N, the shell's convention); 124 timed out (as
coreutils ``timeout``); 130 cancelled or interrupted (128 + SIGINT, as a shell reports it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from lab.cluster import rundir
from lab.cluster.launchers.base import Launcher, ProcessSpec, RunObserver
from lab.cluster.lines import LineSplitter
from lab.cluster.output import RunOutput
from lab.cluster.processes import TAIL_LINES, Proc, ProcessTracker, failures_of, rank_of
from lab.cluster.runstate import (
    EXIT_CANCELLED,
    EXIT_TIMEOUT,
    RunResult,
    RunState,
    exit_code_of,
    exit_status,
    poll,
)
from lab.cluster.ssh import GUARD_PATH, ssh_argv

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_TIMEOUT",
    "LineSplitter",
    "RunResult",
    "RunState",
    "Supervisor",
    "exit_status",
    "poll",
]

log = logging.getLogger(__name__)

RUN_ID_ENV = "LAB_RUN_ID"
REPORT_LINES = 20  # shown per failed rank
INTERRUPTED = "interrupted (KeyboardInterrupt)"


class Supervisor:
    """Run ``specs`` to the end, streaming their output; see the module docstring.

    Args:
        specs: the processes, as the launcher built them.
        launcher: attributes output lines to ranks (``demux``).
        run_dir: where logs and the manifest go (see lab.cluster.rundir).
        timeout: seconds until the run is ended as timed out; None for no limit.
        observers: told of the start, every line, and the end (the live view).
        grace: seconds between SIGTERM and SIGKILL.
        run_id: put in every process's environment as ``LAB_RUN_ID``; defaults to the
            run directory's name.
        ssh_options: extra ssh arguments for remote processes.
        manifest: fields the manifest starts with (parameters, launcher, hosts, ...).
        faults: called as ``faults.tick(self, now)`` on every turn of the watch loop, so a
            fault plan (lab.cluster.faults) can revoke hosts and start replacements from
            the thread that polls and tears down.
    """

    def __init__(
        self,
        specs: Sequence[ProcessSpec],
        launcher: Launcher,
        run_dir: str | os.PathLike[str],
        timeout: float | None = None,
        observers: Iterable[RunObserver] = (),
        grace: float = 5.0,
        *,
        run_id: str | None = None,
        ssh_options: Sequence[str] = (),
        manifest: Mapping[str, Any] | None = None,
        faults: Any = None,
    ) -> None:
        self.launcher = launcher
        self.run_dir = Path(run_dir)
        self.timeout = timeout
        self.observers = list(observers)
        self.grace = grace
        self.run_id = run_id or self.run_dir.name
        self.ssh_options = list(ssh_options)
        self._manifest = dict(manifest or {})
        self._faults = faults
        self._procs = [self._prepare(s) for s in specs]
        self.ranks = sorted({r for s in specs for r in s.ranks})
        self._out = RunOutput(self.run_dir, launcher, self.observers, self.ranks)
        self._wake = threading.Event()
        self._cancelled = threading.Event()
        self._cancel_reason = ""
        self._interrupted = False
        self._tracker = ProcessTracker()
        self.state = RunState.PENDING
        self.reason = ""
        self.started = self.ended = 0.0

    # -- public -------------------------------------------------------------------------

    def cancel(self, reason: str = "cancelled") -> None:
        """End the run as cancelled; thread-safe, returns at once (the Stop button)."""
        if not self._cancelled.is_set():
            self._cancel_reason = reason
            self._cancelled.set()
        self._wake.set()

    def run(self) -> RunResult:
        """Start everything, block until the run ends, tear down, write the manifest.

        A KeyboardInterrupt (a kernel interrupt) ends the run as cancelled, writes the
        manifest, then propagates. In the main thread SIGINT only asks the watch loop to
        cancel (a second one interrupts at once): an exception raised at an arbitrary
        point could leave a lock held or a process half-tracked, and teardown would hang.
        """
        with self._interrupt_cancels():
            try:
                self._start()
                self._watch()
            except KeyboardInterrupt:
                self._end(RunState.CANCELLED, INTERRUPTED)
                self._finish()
                raise
            except BaseException as e:
                self._end(RunState.FAILED, f"supervisor error: {e!r}")
                self._finish()
                raise
            result = self._finish()
        if self._interrupted:
            raise KeyboardInterrupt
        return result

    @contextlib.contextmanager
    def _interrupt_cancels(self) -> Iterator[None]:
        """While the run goes, SIGINT cancels it (see run); Python's own handler after."""
        mine = threading.current_thread() is threading.main_thread()
        if not mine or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            yield  # another thread, or someone else's handler: leave SIGINT alone
            return

        def on_sigint(signum: int, frame: Any) -> None:
            if self._interrupted:
                raise KeyboardInterrupt  # a second interrupt: stop waiting for the grace
            self._interrupted = True
            self.cancel(INTERRUPTED)

        signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def processes(self) -> list[Proc]:
        """The run's processes so far (replacements included), in start order."""
        return list(self._procs)

    def revoke(self, proc: Proc) -> None:
        """Mark ``proc`` as revoked before it is ended from outside: its exit then neither
        fails nor ends the run (lab.cluster.faults)."""
        proc.revoked = True

    def spawn(self, spec: ProcessSpec) -> Proc:
        """Start one more process in the running run (a replacement) and stream its output
        like the others'; called from the watch loop (``faults.tick``)."""
        proc = self._prepare(spec)
        for rank in spec.ranks:
            self._out.tails.setdefault(rank, deque(maxlen=TAIL_LINES))
            self._out.log(rank)
        self._procs.append(proc)
        self._launch(proc)
        return proc

    def command_lines(self) -> list[dict[str, Any]]:
        """Each process as the manifest records it: the spec's argv and what was started."""
        return rundir.process_lines(self._procs)

    # -- starting -----------------------------------------------------------------------

    def _prepare(self, spec: ProcessSpec) -> Proc:
        env = {"PYTHONUNBUFFERED": "1", **spec.env, RUN_ID_ENV: self.run_id}
        # -I -S: the guard is stdlib-only, so it skips site (the venv's .pth files) and
        # the user's PYTHON* variables; its child still gets the whole environment.
        guard = [sys.executable, "-I", "-S", str(GUARD_PATH)]
        if spec.host.is_local or spec.host.namespace is not None:
            cwd = spec.cwd or str(rundir.REPO_ROOT)
            argv = [*guard, "--grace", f"{self.grace:g}", "--", *spec.argv]
            return Proc(spec, argv, {**os.environ, **env}, cwd)
        inner = ssh_argv(spec.host, spec.argv, env, spec.cwd, self.ssh_options, self.grace)
        wait_remote = self.grace + 3.0  # the remote guard's grace, plus the way back
        argv = [*guard, "--grace", "2", "--forward-eof", f"{wait_remote:g}", "--", *inner]
        return Proc(spec, argv, {**os.environ, RUN_ID_ENV: self.run_id}, None)

    def _start(self) -> None:
        self.started = time.time()
        self.state = RunState.RUNNING
        for rank in self.ranks:
            self._out.log(rank)
        rundir.write_manifest(
            self.run_dir,
            **self._manifest,
            run_id=self.run_id,
            state=self.state.value,
            started=rundir.timestamp(self.started),
            timeout=self.timeout,
            grace=self.grace,
            processes=self.command_lines(),
        )
        for obs in self.observers:
            self._out.notify(obs, "on_start", str(self.run_dir), list(self.ranks), self)
        for proc in self._procs:
            self._launch(proc)

    def _launch(self, proc: Proc) -> None:
        proc.popen = subprocess.Popen(
            proc.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=proc.env,
            cwd=proc.cwd,
        )
        proc.started = time.time()
        waiter = threading.Thread(
            target=self._wait, args=(proc,), name=f"lab-wait-{proc.spec.ranks}", daemon=True
        )
        waiter.start()
        for name, pipe in (("stdout", proc.popen.stdout), ("stderr", proc.popen.stderr)):
            t = threading.Thread(
                target=self._read,
                args=(proc, name, pipe),
                name=f"lab-{name}-{proc.spec.ranks}",
                daemon=True,
            )
            t.start()
            proc.readers.append(t)
        log.debug("started %s (pid %d)", proc.spec.argv, proc.popen.pid)

    def _wait(self, proc: Proc) -> None:
        """Wake the watch loop the moment a process exits (it need not poll for it)."""
        assert proc.popen is not None
        try:
            proc.popen.wait()
        finally:
            self._wake.set()

    # -- output ---------------------------------------------------------------------------

    def _read(self, proc: Proc, stream: str, pipe: IO[bytes] | None) -> None:
        try:
            self._out.read(proc, stream, pipe)
        finally:
            self._wake.set()

    # -- watching -----------------------------------------------------------------------

    def _watch(self) -> None:
        deadline = self.started + self.timeout if self.timeout else None
        next_snapshot = 0.0
        while True:
            self._poll()
            now = time.time()
            if self._faults is not None:
                self._faults.tick(self, now)
            state = poll([p.code for p in self._procs if not p.revoked])
            if state is RunState.SUCCEEDED:
                self.state = state
                return
            if state is RunState.FAILED:
                root = min(
                    (p for p in self._procs if p.code not in (None, 0) and not p.revoked),
                    key=lambda p: (p.ended or now, p.spec.ranks),
                )
                how = f"signal {root.signal}" if root.signal else f"exit code {root.code}"
                self._end(state, f"rank {rank_of(root)} on {root.spec.host.name} failed ({how})")
                return
            if self._cancelled.is_set():
                self._end(RunState.CANCELLED, self._cancel_reason)
                return
            if deadline is not None and now >= deadline:
                self._end(RunState.TIMED_OUT, f"timed out after {self.timeout:g}s")
                return
            if now >= next_snapshot:
                self._snapshot()
                next_snapshot = now + (0.2 if now - self.started < 3 else 1.0)
            self._wake.wait(0.1)
            self._wake.clear()

    def _poll(self) -> None:
        for p in self._procs:
            if p.code is None and p.popen is not None and p.popen.poll() is not None:
                p.ended = time.time()
                p.code, p.signal = exit_status(p.popen.returncode)

    def _snapshot(self) -> None:
        """Remember every live descendant of every guard, so that none can escape SIGKILL."""
        self._tracker.snapshot(self._procs)

    # -- ending -------------------------------------------------------------------------

    def _end(self, state: RunState, reason: str) -> None:
        """Set the final state (first one wins) and tear down whatever still runs."""
        if not self.state.final:
            self.state, self.reason = state, reason
            log.info("run %s: %s", self.run_id, reason)
        try:
            self._teardown()
        except KeyboardInterrupt:
            self._kill_all()  # a second interrupt: skip the grace period
            raise

    def _teardown(self) -> None:
        self._poll()
        alive = [p for p in self._procs if p.popen is not None and p.code is None]
        if not alive:
            return
        self._snapshot()
        for p in alive:
            assert p.popen is not None
            try:
                if p.popen.stdin is not None:
                    p.popen.stdin.close()
                p.popen.send_signal(signal.SIGTERM)
            except OSError:
                pass
        # One deadline for all: the guards' grace, plus the ssh round trip for remote ones.
        extra = self.grace + 4.0 if any(p.remote for p in alive) else 0.0
        deadline = time.monotonic() + self.grace + 2.0 + extra
        while time.monotonic() < deadline:
            self._poll()
            if all(p.code is not None for p in alive):
                return
            time.sleep(0.05)
        self._kill_all()

    def _kill_all(self) -> None:
        self._snapshot()
        for p in self._procs:
            if p.popen is not None and p.code is None:
                log.warning("pid %d outlived the grace period; SIGKILL", p.popen.pid)
                p.popen.kill()
        self._kill_tracked()
        for p in self._procs:
            if p.popen is not None and p.code is None:
                try:
                    p.popen.wait(5)
                except subprocess.TimeoutExpired:
                    log.error("pid %d did not end after SIGKILL", p.popen.pid)
        self._poll()

    def _kill_tracked(self) -> None:
        killed = self._tracker.kill_leftovers()
        if killed:
            log.warning("killed %d leftover process(es) of run %s", killed, self.run_id)

    def _finish(self) -> RunResult:
        self._poll()
        if not self.state.final:
            self.state = poll([p.code for p in self._procs])
        deadline = time.monotonic() + 5.0
        for p in self._procs:
            for t in p.readers:
                t.join(max(0.0, deadline - time.monotonic()))
                if t.is_alive():
                    log.warning("output of %s still open after the run ended", p.spec.argv)
        self._kill_tracked()
        self._out.close()
        self.ended = time.time()
        result = self._result()
        rundir.write_manifest(self.run_dir, **rundir.end_fields(result, self._procs))
        for obs in self.observers:
            codes = result.rank_exit_codes
            self._out.notify(obs, "on_end", result.state.value, result.exit_code, codes)
        return result

    def _result(self) -> RunResult:
        failures = failures_of(self._procs, self._tail_of, REPORT_LINES, default_end=self.ended)
        return RunResult(
            run_dir=self.run_dir,
            state=self.state,
            exit_code=exit_code_of(self.state, failures),
            rank_exit_codes={r: p.code for p in self._procs for r in p.spec.ranks},
            started=self.started,
            ended=self.ended,
            commands=tuple(tuple(p.spec.argv) for p in self._procs),
            failures=failures,
            reason=self.reason,
            run_id=self.run_id,
        )

    def _tail_of(self, p: Proc) -> Iterable[str]:
        if len(p.spec.ranks) == 1:
            return self._out.tails.get(p.spec.ranks[0], p.tail)
        return p.tail
