"""A kernel interrupt (SIGINT) during a run cancels it instead of raising at once.

An exception raised at an arbitrary point of the watch loop could leave a lock held or a
process half-tracked, and teardown would then hang. So while a run goes, the first SIGINT
in the main thread only asks the run to cancel; a second one raises KeyboardInterrupt at
once (to stop waiting for the grace period). Another thread, or a SIGINT handler someone
else installed, is left alone.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class Interrupted:
    """Whether a SIGINT arrived while the block ran (then re-raise it after the cleanup)."""

    seen: bool = False


@contextlib.contextmanager
def sigint_cancels(cancel: Callable[[], None]) -> Iterator[Interrupted]:
    """While the block runs, the first SIGINT calls ``cancel`` (and is remembered), a
    second raises KeyboardInterrupt; Python's own handler is back afterwards."""
    flag = Interrupted()
    mine = threading.current_thread() is threading.main_thread()
    if not mine or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield flag  # another thread, or someone else's handler: leave SIGINT alone
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if flag.seen:
            raise KeyboardInterrupt  # a second interrupt: stop waiting for the grace
        flag.seen = True
        cancel()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
