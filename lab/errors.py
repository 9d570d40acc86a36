"""The lab's exceptions: one base, and errors that carry what a person needs to act."""

from __future__ import annotations

from dataclasses import dataclass, field


class LabError(Exception):
    """Base of every error the lab raises on purpose."""


class ParameterError(LabError, ValueError):
    """A parameter is outside what is allowed; raised before anything starts.

    Args:
        name: the parameter, as the user spells it.
        value: what was given.
        allowed: the allowed values or range, as text.
    """

    def __init__(self, name: str, value: object, allowed: str) -> None:
        self.name, self.value, self.allowed = name, value, allowed
        super().__init__(f"{name}={value!r} is not allowed; allowed: {allowed}")


class HostSpecError(LabError, ValueError):
    """A host string, hostfile or cluster profile is malformed or cannot hold the job."""


class LaunchError(LabError):
    """A job cannot be started: a launcher is missing, a host is unreachable, ..."""


class StoppedWaiting(LabError):
    """A run was stopped while it waited for its hosts (a Slurm job in the queue): nothing
    had started, and what was asked for is withdrawn. Raised by the hook that waited; the
    launch ends the run as cancelled (lab.cluster.waiting).

    Args:
        waiting: what the run was doing, in the view's words ("queued (reason: Resources)").
        waited: seconds it had waited.
    """

    def __init__(self, waiting: str, waited: float) -> None:
        self.waiting, self.waited = waiting, waited
        super().__init__(f"stopped while {waiting}, after {waited:.1f} s")


@dataclass(frozen=True)
class RankFailure:
    """What one failed rank left behind.

    A launcher that starts several ranks from one process (mpirun, horovodrun, ...) names
    the one that failed in its own output: then ``named_by`` is that program and ``pid``
    the rank's pid if it said it, else its own. ``launcher_of`` lists the ranks of such a process
    when no rank could be named (``rank`` is then its first). ``message`` is the one line
    that says why (lab.cluster.blame.error_message).
    """

    rank: int
    host: str
    pid: int | None
    exit_code: int | None
    signal: str | None = None
    tail: tuple[str, ...] = ()
    ended_at: float = 0.0
    message: str = ""
    named_by: str = ""
    launcher_of: tuple[int, ...] = ()

    @property
    def how(self) -> str:
        return f"signal {self.signal}" if self.signal else f"exit code {self.exit_code}"

    @property
    def who(self) -> str:
        if self.launcher_of:
            ranks = ",".join(map(str, self.launcher_of))
            return f"the launcher of ranks {ranks} on {self.host}"
        return f"rank {self.rank} on {self.host}"

    def summary(self) -> str:
        """One line: who failed, how, and why (a failed run's ``error`` in its manifest)."""
        text = f"{self.who} failed ({self.how})"
        return f"{text}: {self.message}" if self.message else text

    def describe(self) -> str:
        if self.named_by:
            text = f"{self.who} ended with {self.how} (named by {self.named_by})"
        else:
            text = f"{self.who} (pid {self.pid}) ended with {self.how}"
            if self.launcher_of:
                text += "; it named no rank"
        return f"{text}: {self.message}" if self.message else text


@dataclass
class RanksFailed(LabError):
    """A run ended because ranks failed; the earliest failure (the root cause) comes first."""

    failures: list[RankFailure] = field(default_factory=list)
    run_dir: str | None = None
    reason: str = "rank failed"
    code: int | None = None  # the run's exit code when it is not the root rank's (124, 130)

    def __post_init__(self) -> None:
        self.failures.sort(key=lambda f: (f.ended_at, f.rank))
        super().__init__(str(self))

    @property
    def root_cause(self) -> RankFailure | None:
        return self.failures[0] if self.failures else None

    @property
    def exit_code(self) -> int:
        if self.code is not None:
            return self.code
        root = self.root_cause
        if root is None or root.exit_code is None:
            return 1
        return root.exit_code

    def __str__(self) -> str:
        if not self.failures:
            return f"run failed: {self.reason}"
        root = self.failures[0]
        said = root.describe()
        plain = self.reason in ("", "rank failed", root.summary())
        lines = [said if plain else f"{self.reason}: {said}"]
        lines += [f"  | {t}" for t in root.tail]
        if len(self.failures) > 1:
            others = ", ".join(str(f.rank) for f in self.failures[1:])
            lines.append(f"(then ranks {others} ended as the run was torn down)")
        if self.run_dir:
            lines.append(f"logs: {self.run_dir}")
        return "\n".join(lines)


def require_at_least(*checks: tuple[str, int, int]) -> None:
    """Raise ParameterError for the first ``(name, value, low)`` whose value is below low
    (the flag checks every workload makes before it imports an engine)."""
    for name, value, low in checks:
        if value < low:
            raise ParameterError(name, value, f"an integer >= {low}")


def require_positive(*checks: tuple[str, float]) -> None:
    """Raise ParameterError for the first ``(name, value)`` that is not > 0 (a NaN is not)."""
    for name, value in checks:
        if not value > 0:
            raise ParameterError(name, value, "a number > 0")


class NothingMeasured(LabError):
    """A notebook step measured nothing: a sweep with no succeeded point, a figure or verdict
    that could not be computed. Raised so that papermill, ``make run`` and CI fail (DESIGN.md,
    contract 7) instead of passing on an empty figure."""


class RunStopped(NothingMeasured):
    """A run was stopped by a person (its view's Stop button) before it finished: the
    sweep or rounds it belonged to end there, and what follows has nothing to read."""
