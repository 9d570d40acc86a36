"""The one place that starts, watches and ends a run's processes (DESIGN.md, contract 3).

Every ProcessSpec runs under lab/cluster/guard.py: locally ``python guard.py -- argv``;
remotely the ssh client runs under a local guard and the rank under a remote one. The
guard's stdin is a pipe the supervisor never writes: closing it (or dying, even by
``kill -9``) is the kill switch. One reader thread per stream splits the bytes into
lines on ``\\n`` and ``\\r`` (so progress bars show) a read at a time, attributes them
to ranks through the launcher, appends them to ``rank-<r>.log`` (flushed after every
read) and queues them for the observers, which one thread of their own tells
(lab.cluster.output, lab.cluster.feed).

The state of a run follows from its processes' exit codes alone (:func:`poll`, pure, as in
torchrun): any failure fails the run, and the earliest failure is its root cause; within a
launcher process that carries several ranks, the rank its engine names
(lab.cluster.root_cause, read once every line is in, so that the reason and the manifest's
``error`` name that rank and the line that says why). Ending a run is staged
(lab.cluster.teardown): close every guard's stdin and SIGTERM it, one shared deadline, then
SIGKILL the guards and every descendant still alive. How a spec is put under
its guard is lab.cluster.processes.guarded; what a SIGINT does, lab.cluster.interrupts.

Run exit codes: 0 succeeded; a failed run exits with its root-cause rank's exit code (a
rank ended by signal N counts as 128 + N, the shell's convention); 124 timed out (as
coreutils ``timeout``); 130 cancelled or interrupted (128 + SIGINT, as a shell reports it).
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from lab.cluster import rundir
from lab.cluster.interrupts import sigint_cancels
from lab.cluster.launchers.base import Launcher, ProcessSpec, RunObserver
from lab.cluster.lines import LineSplitter
from lab.cluster.output import RunOutput
from lab.cluster.processes import TAIL_LINES, Proc, ProcessTracker, guarded
from lab.cluster.root_cause import outcome
from lab.cluster.runstate import (
    EXIT_CANCELLED,
    EXIT_TIMEOUT,
    RunResult,
    RunState,
    exit_code_of,
    exit_status,
    poll,
)
from lab.cluster.secret_env import redact
from lab.cluster.teardown import kill_all, kill_leftovers, reap, terminate
from lab.metrics import liveness

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_TIMEOUT",
    "LineSplitter",
    "RunResult",
    "RunState",
    "Supervisor",
    "Ticker",
    "exit_status",
    "poll",
]

log = logging.getLogger(__name__)

REPORT_LINES = 20  # shown per failed rank
INTERRUPTED = "interrupted (KeyboardInterrupt)"
RANK_FAILED = "rank failed"  # until the run's end names the rank and why


class Ticker(Protocol):
    """Called on every turn of the watch loop, from the thread that starts and ends the
    run's processes, so it may revoke (``Supervisor.revoke``) and start (``spawn``)
    processes safely: a fault plan's injector (lab.cluster.fault_injector)."""

    def tick(self, sup: Supervisor, now: float) -> None: ...


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
        tickers: called as ``tick(self, now)`` on every turn of the watch loop (Ticker).
        secrets: secret variables of the specs' env, by name (lab.cluster.secret_env): sent
            to remote guards over the ssh channel, and ``<secret>`` in the manifest.
        rank_hosts: each rank's host name, for a failed rank that a launcher on another
            host names (lab.cluster.root_cause).
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
        tickers: Iterable[Ticker] = (),
        secrets: Mapping[str, str] | None = None,
        rank_hosts: Mapping[int, str] | None = None,
    ) -> None:
        self.launcher = launcher
        self.run_dir = Path(run_dir)
        self.timeout = timeout
        self.observers = list(observers)
        self.grace = grace
        self.run_id = run_id or self.run_dir.name
        self.ssh_options = list(ssh_options)
        self._manifest = dict(manifest or {})
        self._tickers = list(tickers)
        self.secrets = dict(secrets or {})
        self.rank_hosts = dict(rank_hosts or {})
        self._procs = [self._prepare(s) for s in specs]
        self.ranks = sorted({r for s in specs for r in s.ranks})
        self._out = RunOutput(self.run_dir, launcher, self.observers, self.ranks)
        self._wake = threading.Event()
        self._cancelled = threading.Event()
        self._cancel_reason = ""
        self._tracker = ProcessTracker()
        self.state = RunState.PENDING
        self.reason = ""
        self.started = self.ended = 0.0
        self._signals: dict[int, str | None] = {}

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
        cancel (lab.cluster.interrupts; a second one interrupts at once).
        """
        with sigint_cancels(lambda: self.cancel(INTERRUPTED)) as interrupted:
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
        if interrupted.seen:
            raise KeyboardInterrupt
        return result

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
        return redact(rundir.process_lines(self._procs), self.secrets)

    # -- starting -----------------------------------------------------------------------

    def _prepare(self, spec: ProcessSpec) -> Proc:
        return guarded(spec, self.run_id, self.grace, self.ssh_options, frozenset(self.secrets))

    def _start(self) -> None:
        self.started = time.time()
        self.state = RunState.RUNNING
        for rank in self.ranks:
            self._out.log(rank)
        rundir.write_manifest(
            self.run_dir,
            **redact(self._manifest, self.secrets),
            run_id=self.run_id,
            state=self.state.value,
            owner=liveness.identity(),  # a reader tells a killed run by it (orphaned)
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
            for ticker in self._tickers:
                ticker.tick(self, now)
            state = poll([p.code for p in self._procs if not p.revoked])
            if state is RunState.SUCCEEDED:
                self.state = state
                return
            if state is RunState.FAILED:
                self._end(state, RANK_FAILED)  # named once every line is read (_result)
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
        reap(self._procs)

    def _snapshot(self) -> None:
        """Remember every live descendant of every guard, so that none can escape SIGKILL."""
        self._tracker.snapshot(self._procs)

    # -- ending -------------------------------------------------------------------------

    def _end(self, state: RunState, reason: str) -> None:
        """Set the final state (first one wins) and tear down whatever still runs."""
        if not self.state.final:
            self.state, self.reason = state, reason
            if reason != RANK_FAILED:
                log.info("run %s: %s", self.run_id, reason)
        try:
            terminate(self._procs, self._tracker, self.grace)
        except KeyboardInterrupt:
            kill_all(self._procs, self._tracker)  # a second interrupt: skip the grace period
            raise

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
        kill_leftovers(self._tracker, self.run_id)
        self._out.close()
        self.ended = time.time()
        result = self._result()
        fields = rundir.end_fields(result, self._procs, self._signals)
        rundir.write_manifest(self.run_dir, **fields)
        for obs in self.observers:
            codes = result.rank_exit_codes
            self._out.notify(obs, "on_end", result.state.value, result.exit_code, codes)
        return result

    def _result(self) -> RunResult:
        """The run's end; a failed run's reason names its root cause, once every line of
        every process has been read (a launcher names the failed rank last)."""
        ends = outcome(
            self._procs, self.launcher, self._out, self.rank_hosts, REPORT_LINES, self.ended
        )
        failures = ends.failures
        self._signals = ends.signals
        if self.state is RunState.FAILED and self.reason in ("", RANK_FAILED):
            if failures:
                self.reason = failures[0].summary()
            log.info("run %s: %s", self.run_id, self.reason)
        return RunResult(
            run_dir=self.run_dir,
            state=self.state,
            exit_code=exit_code_of(self.state, failures),
            rank_exit_codes=ends.codes,
            started=self.started,
            ended=self.ended,
            commands=tuple(tuple(p.spec.argv) for p in self._procs),
            failures=failures,
            reason=self.reason,
            run_id=self.run_id,
        )
