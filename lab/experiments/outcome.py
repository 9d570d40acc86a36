"""How a run ended, said as a sentence, and the check a notebook makes before it reads a run.

A run stopped from its view or one that failed still returns its RunResult (the view shows
why); a cell that then reads its records must not fail on a missing column. It calls
``require_succeeded`` first, which names what happened and where the logs are.
"""

from __future__ import annotations

from typing import Any

from lab.errors import NothingMeasured, RunStopped

STOPPED = "cancelled"


def state_of(result: Any) -> str:
    """A RunResult's (or a result dict's) state as its plain value, e.g. ``"succeeded"``."""
    state = result.get("state") if isinstance(result, dict) else getattr(result, "state", None)
    return str(getattr(state, "value", state))


def describe_end(result: Any) -> str:
    """How a run ended, e.g. "stopped from the view after 4.2 s" or "failed (rank 1 on
    localhost failed (exit code 1)) after 3.0 s"."""
    state = state_of(result)
    reason = str(getattr(result, "reason", "") or "")
    seconds = getattr(result, "seconds", None)
    after = f" after {seconds:.1f} s" if isinstance(seconds, int | float) else ""
    if state == STOPPED:
        return f"{reason or 'cancelled'}{after}"
    words = state.replace("_", " ")
    return f"{words} ({reason}){after}" if reason and state != "succeeded" else f"{words}{after}"


def require_succeeded(result: Any, what: str = "the run") -> Any:
    """``result`` if its run succeeded; else an error that says what happened.

    Raises:
        RunStopped: the run was stopped (its view's Stop button).
        NothingMeasured: it failed or timed out.
    """
    state = state_of(result)
    if state == "succeeded":
        return result
    where = getattr(result, "run_dir", None)
    logs = f"; its logs are in {where}" if where else ""
    if state == STOPPED:
        raise RunStopped(
            f"{what} was {describe_end(result)}, so it has nothing to read back{logs}. "
            "Run it again to measure."
        )
    raise NothingMeasured(f"{what} {describe_end(result)}: nothing to read back{logs}.")
