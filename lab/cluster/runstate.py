"""How a run stands and how it ended: the state enum, the pure ``poll`` over exit codes (as in
torchrun: any failure fails the run), and the RunResult a launch returns.

Run exit codes: 0 succeeded; a failed run exits with its root-cause rank's exit code (a rank
ended by signal N counts as 128 + N, the shell's convention); 124 timed out (as coreutils
``timeout``); 130 cancelled or interrupted (128 + SIGINT, as a shell reports it).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from lab.errors import RankFailure

EXIT_TIMEOUT = 124
EXIT_CANCELLED = 130


class RunState(Enum):
    """Where a run is; all but the first two are final. ``orphaned`` is never set by a
    launch: a manifest reader says it of a run whose launching process died while it ran
    (lab.metrics.layout.read_manifest)."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    ORPHANED = "orphaned"

    @property
    def final(self) -> bool:
        return self not in (RunState.PENDING, RunState.RUNNING)


def poll(exit_codes: Sequence[int | None]) -> RunState:
    """The state implied by the processes' exit codes (None: still running).

    All or nothing: one non-zero code fails the run; it succeeds only when all are 0.
    """
    if not exit_codes:
        return RunState.PENDING
    if any(code not in (None, 0) for code in exit_codes):
        return RunState.FAILED
    if all(code == 0 for code in exit_codes):
        return RunState.SUCCEEDED
    return RunState.RUNNING


def exit_status(returncode: int) -> tuple[int, str | None]:
    """A guard's return code as (exit code, signal name or None).

    Negative codes (the supervisor killed the guard) and 129..192 (the guard reporting a
    child ended by signal N as 128 + N) name the signal.
    """
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        name = signal.Signals(number).name if number > 0 else None
    except ValueError:
        name = None
    return (128 + number if returncode < 0 else returncode), name


@dataclass(frozen=True)
class RunResult:
    """How a run ended. ``exit_code`` follows the module docstring's convention."""

    run_dir: Path
    state: RunState
    exit_code: int
    rank_exit_codes: Mapping[int, int | None]
    started: float
    ended: float
    commands: tuple[tuple[str, ...], ...]
    failures: tuple[RankFailure, ...] = ()
    reason: str = ""
    run_id: str = ""

    @property
    def ok(self) -> bool:
        return self.state is RunState.SUCCEEDED

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def exit_code_of(state: RunState, failures: Sequence[RankFailure]) -> int:
    """A run's exit code (see the module docstring): 0, 124, 130, or the root cause's."""
    if state is RunState.SUCCEEDED:
        return 0
    if state is RunState.TIMED_OUT:
        return EXIT_TIMEOUT
    if state is RunState.CANCELLED:
        return EXIT_CANCELLED
    return (failures[0].exit_code or 1) if failures else 1
