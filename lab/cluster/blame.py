"""Which rank a launcher's failure came from, in the engine's own words, and why.

mpirun, horovodrun, kungfu-run and torchrun each start several ranks from one process and
end with one exit code for all of them (horovodrun, kungfu-run and torchrun always with 1),
so the process alone names no rank. Each says in its own output which rank failed first
and how; the parsers here read those lines (the ones no rank can be named for) and return
the rank ends the engine reported, the root cause first. The formats, as printed by the
versions the lab installs:

- OpenMPI 5 (prterun; OpenMPI 4's mpirun words them the same, its process names read
  ``[[12345,1],1]``), each block between lines of dashes and wrapped at 72 columns::

      prterun detected that one or more processes exited with non-zero status,
      thus causing the job to be terminated. The first process to do so was:
         Process name: [prterun-vm-20273@1,1]
         Exit code:    3
      prterun noticed that process rank 1 with PID 20494 on node vm exited on
      signal 9 (Killed).
      prterun has exited due to process rank 1 with PID 0 on node vm calling
      "abort". ...

- horovodrun (Gloo): ``Process 1 exit with status code 3.`` for each rank that ended
  non-zero, in the order they ended, and its closing RuntimeError, ``Process name: 1`` /
  ``Exit code: 3`` (the first to fail, by time); codes above 128 are 128 + a signal.
- kungfu-run: ``[E] #<127.0.0.1.25501> exited with error: exit status 3`` (or
  ``signal: killed``) per peer, the first to end first, peers named by address and port.
- torchrun: its ChildFailedError table, ``Root Cause (first observed failure):`` then
  ``rank      : 1 (local_rank: 1)`` and ``exitcode  : 3 (pid: 26563)`` (negative: a signal).

``error_message`` finds the one line that says why a rank failed in what it printed on
stderr: the exception line of its last Python traceback, OpenMPI's MPI_ABORT notice, else
its last line that is not start-up noise (lab.cluster.noise).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from lab.cluster.noise import classify
from lab.cluster.runstate import exit_status
from lab.metrics.tags import strip_ansi

MESSAGE_CHARS = 300  # a message is one line; longer ones are cut


@dataclass(frozen=True)
class RankEnd:
    """How one rank ended, as its launcher reported it.

    Args:
        rank: the rank (for torchrun's parser: the local rank on that host).
        exit_code: its exit code (128 + N for signal N); None when the engine named none.
        signal: the signal's name (``SIGKILL``) when one ended it.
        pid: the rank's pid, when the engine named it.
        said: the engine's words, on one line.
    """

    rank: int
    exit_code: int | None
    signal: str | None = None
    pid: int | None = None
    said: str = ""


_RULE = re.compile(r"^\s*[-=*_]{5,}\s*$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(text: str) -> str:
    """A line without colour codes, control characters and surrounding blanks."""
    return _CONTROL.sub("", strip_ansi(text)).strip()


def _joined(lines: Iterable[str]) -> str:
    """The lines as one text, rules of dashes dropped: OpenMPI wraps its sentences."""
    return " ".join(c for c in map(clean, lines) if c and not _RULE.match(c))


def _signal_end(rank: int, number: int, pid: int | None, said: str) -> RankEnd:
    try:
        name: str | None = signal.Signals(number).name
    except ValueError:
        name = None
    return RankEnd(rank, 128 + number, name, pid, said)


def _code_end(rank: int, code: int, pid: int | None, said: str) -> RankEnd:
    """A shell-style status (128 + N, or -N, for signal N) as a RankEnd."""
    value, name = exit_status(code)
    return RankEnd(rank, value, name, pid, said)


# -- OpenMPI -------------------------------------------------------------------------------

_OMPI_EXITED = re.compile(
    r"(\w+) detected that one or more processes exited with non-zero status.*?"
    r"Process name:\s+(\[\S+\])\s+Exit code:\s+(-?\d+)"
)
_OMPI_SIGNAL = re.compile(
    r"(\w+) noticed that process rank (\d+) with PID (\d+) on node (\S+) exited on "
    r"signal (\d+)(?: \([^)]*\))?\.?"
)
_OMPI_ABORT = re.compile(
    r"(\w+) has exited due to process rank (\d+) with PID (\d+) on node (\S+) "
    r"(?:calling \"abort\"|exiting improperly)\.?"
)
_OMPI_VPID = re.compile(r",(\d+)\]$")


def openmpi_ends(lines: Sequence[str]) -> list[RankEnd]:
    """The rank ends OpenMPI's mpirun (prterun) reported, in the order it printed them."""
    text = _joined(lines)
    found: list[tuple[int, RankEnd]] = []
    for m in _OMPI_EXITED.finditer(text):
        vpid = _OMPI_VPID.search(m.group(2))
        if vpid is not None:
            said = f"{m.group(1)}: process {m.group(2)} exited with code {m.group(3)}"
            found.append((m.start(), _code_end(int(vpid.group(1)), int(m.group(3)), None, said)))
    for m in _OMPI_SIGNAL.finditer(text):
        pid = int(m.group(3)) or None
        found.append((m.start(), _signal_end(int(m.group(2)), int(m.group(5)), pid, m.group(0))))
    for m in _OMPI_ABORT.finditer(text):
        pid = int(m.group(3)) or None
        found.append((m.start(), RankEnd(int(m.group(2)), None, None, pid, m.group(0))))
    return [end for _, end in sorted(found, key=lambda x: x[0])]


# -- horovodrun ----------------------------------------------------------------------------

_HVD_EXIT = re.compile(r"^Process (\d+) exit with status code (-?\d+)\.$")
_HVD_FIRST = re.compile(r"Process name:\s+(\d+)\s+Exit code:\s+(-?\d+)")


def horovod_ends(lines: Sequence[str]) -> list[RankEnd]:
    """The rank ends horovodrun reported: the first to fail (its closing error) first, then
    every other rank that ended non-zero, in the order they ended."""
    cleaned = [clean(t) for t in lines]
    ends: list[RankEnd] = []
    first = _HVD_FIRST.search(_joined(cleaned))
    if first is not None:
        rank, code = int(first.group(1)), int(first.group(2))
        ends.append(_code_end(rank, code, None, f"horovodrun: process {rank} exit code {code}"))
    for text in cleaned:
        m = _HVD_EXIT.match(text)
        if m is not None and all(e.rank != int(m.group(1)) for e in ends):
            ends.append(_code_end(int(m.group(1)), int(m.group(2)), None, text))
    return ends


# -- kungfu-run ----------------------------------------------------------------------------

_KUNGFU_ERROR = re.compile(
    r"\[E\]\s*#<(?P<ip>[^>\s]+)\.(?P<port>\d+)> exited with error: (?P<why>.+)$"
)
# Go's names of the signals (syscall's signal table) that end processes.
_GO_SIGNALS = {
    "hangup": signal.SIGHUP,
    "interrupt": signal.SIGINT,
    "quit": signal.SIGQUIT,
    "illegal instruction": signal.SIGILL,
    "aborted": signal.SIGABRT,
    "bus error": signal.SIGBUS,
    "floating point exception": signal.SIGFPE,
    "killed": signal.SIGKILL,
    "segmentation fault": signal.SIGSEGV,
    "broken pipe": signal.SIGPIPE,
    "terminated": signal.SIGTERM,
}


def kungfu_ends(lines: Sequence[str], rank_of: Callable[[str, int], int | None]) -> list[RankEnd]:
    """The peer ends kungfu-run reported, the first to end first; ``rank_of(ip, port)``
    names a peer's rank (None: not one of this launcher's)."""
    ends: list[RankEnd] = []
    for text in map(clean, lines):
        m = _KUNGFU_ERROR.search(text)
        if m is None:
            continue
        rank = rank_of(m["ip"], int(m["port"]))
        if rank is None or any(e.rank == rank for e in ends):
            continue
        why = m["why"].strip()
        said = f"kungfu-run: peer {m['ip']}.{m['port']} exited with error: {why}"
        status = re.fullmatch(r"exit status (\d+)", why)
        sig = re.fullmatch(r"signal: (.+)", why)
        if status is not None:
            ends.append(RankEnd(rank, int(status.group(1)), None, None, said))
        elif sig is not None and sig.group(1) in _GO_SIGNALS:
            ends.append(_signal_end(rank, int(_GO_SIGNALS[sig.group(1)]), None, said))
        else:
            ends.append(RankEnd(rank, None, None, None, said))
    return ends


# -- torchrun ------------------------------------------------------------------------------

_TORCH_RANK = re.compile(r"^rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
_TORCH_CODE = re.compile(r"^exitcode\s*:\s*(-?\d+) \(pid: (\d+)\)")


def torchrun_ends(lines: Sequence[str]) -> list[RankEnd]:
    """The rank ends torchrun's failure table lists, its root cause first; ``rank`` is the
    local rank (torchrun's global numbering may differ from the lab's)."""
    root: list[RankEnd] = []
    others: list[RankEnd] = []
    into, local = others, None
    for text in map(clean, lines):
        if text.startswith("Root Cause"):
            into = root
        elif text.startswith("Failures:"):
            into = others
        elif (m := _TORCH_RANK.match(text)) is not None:
            local = int(m.group(2))
        elif (m := _TORCH_CODE.match(text)) is not None and local is not None:
            said = f"torchrun: local rank {local} exitcode {m.group(1)} (pid {m.group(2)})"
            into.append(_code_end(local, int(m.group(1)), int(m.group(2)), said))
            local = None
    ends = root + [e for e in others if all(e.rank != r.rank for r in root)]
    return ends


# -- what the rank itself said -------------------------------------------------------------

_TRACEBACK = "Traceback (most recent call last)"
_MPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank \d+ in communicator \S+")
_ERRORCODE = re.compile(r"^Errorcode: (-?\d+)$")


def error_message(stderr: Sequence[str]) -> str | None:
    """The one line of a rank's stderr that says why it failed, or None if it said nothing
    that is not start-up noise: the exception line of its last Python traceback, OpenMPI's
    MPI_ABORT notice (with its error code), else its last line that is not noise."""
    lines = [clean(t) for t in stderr]
    starts = [i for i, t in enumerate(lines) if t.startswith(_TRACEBACK)]
    raw = [_CONTROL.sub("", strip_ansi(t)).rstrip() for t in stderr]
    if starts:
        for text in raw[starts[-1] + 1 :]:
            if text and not text[0].isspace():  # frames are indented; the exception is not
                return text[:MESSAGE_CHARS]
    for i, text in enumerate(lines):
        m = _MPI_ABORT.search(text)
        if m is not None:
            codes = (_ERRORCODE.match(t) for t in lines[i + 1 : i + 4])
            code = next((c.group(1) for c in codes if c is not None), None)
            return m.group(0) + (f" with errorcode {code}" if code is not None else "")
    for text in reversed(lines):
        if text and not _RULE.match(text) and classify("stderr", text) == "error":
            return text[:MESSAGE_CHARS]
    return None
