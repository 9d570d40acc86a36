"""How each rank of a run ended, and the failures of a failed run, root cause first.

A process that carries one rank answers for it. A launcher process that carries several
(mpirun, horovodrun, kungfu-run, torchrun) does not: its exit code is its own, and the rank
that failed is the one its engine names in its output (the launcher's ``blame``, reading
lab.cluster.blame's formats), else the rank whose stderr showed a Python traceback first,
else none (the failure is then the launcher's, ``launcher_of``). Each failure carries the
one line that says why (``error_message`` of that rank's stderr, else the engine's words).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lab.cluster.blame import RankEnd, error_message
from lab.cluster.output import RunOutput
from lab.cluster.processes import Proc, rank_of
from lab.errors import RankFailure

TRACEBACK_FIRST = "the first traceback"  # named_by when only the ranks' output names one


@dataclass(frozen=True)
class Outcome:
    """How a run's ranks ended: exit codes and signals per rank (None: not known apart
    from their launcher's), and the failed processes' failures, the earliest first."""

    codes: dict[int, int | None]
    signals: dict[int, str | None]
    failures: tuple[RankFailure, ...]


def named_ends(launcher: object, proc: Proc, out: RunOutput) -> tuple[list[RankEnd], str]:
    """The ends of ``proc``'s ranks that can be told apart, root cause first, and who named
    them; nothing for a process that did not fail or whose ranks cannot be told."""
    if proc.code in (None, 0):
        return [], ""
    blame = getattr(launcher, "blame", None)
    if blame is not None:
        ends = [e for e in blame(proc.spec, list(proc.said)) if e.rank in proc.spec.ranks]
        if ends:
            return ends, str(getattr(launcher, "reporter", getattr(launcher, "name", "")))
    if len(proc.spec.ranks) > 1:
        seen = [(out.traceback_at[r], r) for r in proc.spec.ranks if r in out.traceback_at]
        if seen:
            return [RankEnd(min(seen)[1], None)], TRACEBACK_FIRST
    return [], ""


def outcome(
    procs: Iterable[Proc],
    launcher: object,
    out: RunOutput,
    hosts: Mapping[int, str],
    lines: int,
    default_end: float,
) -> Outcome:
    """Every rank's end and every failed (not revoked) process's failure.

    Args:
        hosts: each rank's host name, for ranks a launcher on another host named.
        lines: how many of a failed rank's last lines its failure keeps.
        default_end: when a process ended, if that was not seen.
    """
    codes: dict[int, int | None] = {}
    signals: dict[int, str | None] = {}
    failures = []
    for p in procs:
        ends, by = named_ends(launcher, p, out)
        told = {e.rank: e for e in ends if e.exit_code is not None}
        for r in p.spec.ranks:
            end = told.get(r)
            if end is not None:
                codes[r], signals[r] = end.exit_code, end.signal
            elif ends and r != ends[0].rank:  # ended with the launcher; how, none said
                codes[r], signals[r] = None, None
            else:
                codes[r], signals[r] = p.code, p.signal
        if p.code not in (None, 0) and not p.revoked:
            failures.append(_failure(p, ends, by, out, hosts, lines, default_end))
    failures.sort(key=lambda f: (f.ended_at, f.rank))
    return Outcome(codes, signals, tuple(failures))


def _failure(
    p: Proc,
    ends: Sequence[RankEnd],
    by: str,
    out: RunOutput,
    hosts: Mapping[int, str],
    lines: int,
    default_end: float,
) -> RankFailure:
    tail_of: Callable[[int], Sequence[str]] = lambda r: tuple(out.tails.get(r, ()))  # noqa: E731
    if not ends:
        one = len(p.spec.ranks) == 1
        rank = rank_of(p)
        said = out.stderr.get(rank, ()) if one else p.said
        return RankFailure(
            rank=rank,
            host=p.spec.host.name,
            pid=p.rank_pid,
            exit_code=p.code,
            signal=p.signal,
            tail=(tail_of(rank) if one else tuple(p.tail))[-lines:],
            ended_at=p.ended or default_end,
            message=error_message(list(said)) or "",
            launcher_of=() if one or not p.spec.ranks else tuple(p.spec.ranks),
        )
    root = ends[0]
    coded = root.exit_code is not None
    message = error_message(list(out.stderr.get(root.rank, ()))) or root.said
    return RankFailure(
        rank=root.rank,
        host=hosts.get(root.rank, p.spec.host.name),
        pid=root.pid or p.rank_pid,
        exit_code=root.exit_code if coded else p.code,
        signal=root.signal if coded else p.signal,
        tail=tuple(tail_of(root.rank))[-lines:],
        ended_at=p.ended or default_end,
        message=message,
        named_by=by,
    )
