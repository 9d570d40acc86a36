"""Host discovery for Horovod Elastic: a hosts file the lab rewrites, and the script that
``horovodrun --host-discovery-script`` runs to read it.

horovodrun polls the script about once a second and resizes the job when its output
changes, so a resize is requested by rewriting the file. ``run_schedule`` does that at
scheduled times and prints an ``event`` record ({"name": "discovery", "slots", "hosts",
"time"}) for each write, the instant the new file became visible; a resize's latency is
the first training step at the new size minus that time (lab.bench.elastic).

    python -m lab.cluster.elastic_hosts --hosts-file H --script S --stop-file F \
        --schedule "0:1,20:2,40:1,60:stop"

beside ``horovodrun -np 1 --min-np 1 --max-np 2 --host-discovery-script S
--network-interfaces lo --gloo python -m lab.bench.elastic --stop-file F``. Horovod
accepts a slot change on one host (``localhost:1`` → ``localhost:2``) as a resize; a
schedule entry may also name hosts (``"30:localhost:2+127.0.0.1:2"``). Standard library
only: the driver runs wherever horovodrun runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab.errors import ParameterError
from lab.metrics.records import emit

DEFAULT_HOST = "localhost"
_HOST_SLOTS = re.compile(r"^([A-Za-z0-9_.\-\[\]:]+?):(\d+)$")


@dataclass(frozen=True)
class Change:
    """One scheduled write: at ``at`` seconds after the start, offer ``hosts`` (name → slots),
    or, with ``stop``, create the stop file that ends the workload (lab.bench.elastic)."""

    at: float
    hosts: tuple[tuple[str, int], ...] = ()
    stop: bool = False

    @property
    def slots(self) -> int:
        return sum(n for _, n in self.hosts)


def parse_hosts(text: str, default_host: str = DEFAULT_HOST) -> tuple[tuple[str, int], ...]:
    """``"2"`` → ((default_host, 2),); ``"h1:2+h2:1"`` → ((h1, 2), (h2, 1)); ``"0"`` → ()."""
    text = text.strip()
    if text.isdigit():
        n = int(text)
        return ((default_host, n),) if n else ()
    hosts: list[tuple[str, int]] = []
    for part in text.split("+"):
        m = _HOST_SLOTS.match(part.strip())
        if m is None:
            raise ParameterError("hosts", part, "SLOTS or HOST:SLOTS joined by '+'")
        if int(m.group(2)) > 0:
            hosts.append((m.group(1), int(m.group(2))))
    return tuple(hosts)


def parse_schedule(text: str, default_host: str = DEFAULT_HOST) -> list[Change]:
    """``"0:1,20:2,40:4"`` → changes at 0, 20 and 40 s; times must increase.

    Each entry is ``SECONDS:SLOTS`` (slots on ``default_host``), ``SECONDS:HOST:SLOTS[+...]``
    or ``SECONDS:stop`` (create the stop file).
    """
    changes: list[Change] = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        at_text, sep, hosts_text = entry.partition(":")
        try:
            at = float(at_text)
        except ValueError:
            at = -1.0
        if not sep or at < 0:
            allowed = "SECONDS:SLOTS, SECONDS:HOST:SLOTS or SECONDS:stop, e.g. 0:1,20:2"
            raise ParameterError("schedule", entry, allowed)
        if changes and at <= changes[-1].at:
            raise ParameterError("schedule", text, "entries in increasing time order")
        if hosts_text.strip() == "stop":
            changes.append(Change(at, stop=True))
        else:
            changes.append(Change(at, parse_hosts(hosts_text, default_host)))
    if not changes:
        raise ParameterError("schedule", text, "at least one SECONDS:SLOTS entry")
    return changes


def format_hosts(hosts: Mapping[str, int] | Sequence[tuple[str, int]]) -> str:
    """The discovery output: one ``host:slots`` line per host."""
    items = hosts.items() if isinstance(hosts, Mapping) else hosts
    return "".join(f"{h}:{n}\n" for h, n in items if n > 0)


def write_hosts(path: str | Path, hosts: Mapping[str, int] | Sequence[tuple[str, int]]) -> float:
    """Replace the hosts file atomically (the script never reads half a file); returns
    the wall time (``time.time()``) at which the new content became visible."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(format_hosts(hosts))
    os.replace(tmp, path)
    return time.time()


def write_discovery_script(script: str | Path, hosts_file: str | Path) -> Path:
    """An executable ``/bin/sh`` script printing the hosts file (what horovodrun runs)."""
    script = Path(script)
    target = shlex.quote(str(Path(hosts_file).resolve()))
    script.write_text(f"#!/bin/sh\n# host discovery for horovodrun (distlab)\nexec cat {target}\n")
    script.chmod(0o755)
    return script


def request_stop(stop_file: str | Path) -> float:
    """Create the file whose existence ends lab.bench.elastic; returns the wall time."""
    Path(stop_file).touch()
    return time.time()


def run_schedule(
    hosts_file: str | Path,
    changes: Sequence[Change],
    stop_file: str | Path | None = None,
    stop: threading.Event | None = None,
    on_write: Callable[[Change, float], None] | None = None,
) -> list[tuple[Change, float]]:
    """Write each change at its time after the call (the first at once if its time is 0).

    Args:
        hosts_file: the file the discovery script prints.
        changes: from ``parse_schedule``.
        stop_file: the file a ``stop`` entry creates (required if there is one).
        stop: set it to end the schedule early.
        on_write: called with (change, wall time written); default prints an event record.

    Returns:
        (change, wall time written) for each change made.
    """
    if any(c.stop for c in changes) and stop_file is None:
        raise ParameterError("stop-file", None, "a path, since the schedule has a stop entry")
    stop = stop or threading.Event()
    report = on_write or _emit_change
    start = time.monotonic()
    done: list[tuple[Change, float]] = []
    for change in changes:
        if stop.wait(max(0.0, start + change.at - time.monotonic())):
            break
        if change.stop and stop_file is not None:
            written = request_stop(stop_file)
        else:
            written = write_hosts(hosts_file, change.hosts)
        done.append((change, written))
        report(change, written)
    return done


def _emit_change(change: Change, written: float) -> None:
    if change.stop:
        emit("event", name="stop", at=change.at, time=round(written, 6))
        return
    emit(
        "event",
        name="discovery",
        slots=change.slots,
        hosts=format_hosts(change.hosts).strip().replace("\n", ","),
        at=change.at,
        time=round(written, 6),
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lab.cluster.elastic_hosts",
        description="Rewrite a Horovod Elastic hosts file on a schedule (and write the "
        "discovery script that prints it).",
    )
    p.add_argument("--hosts-file", required=True, help="the file the discovery script prints")
    p.add_argument("--schedule", required=True, help='e.g. "0:1,20:2,40:4,60:2" (seconds:slots)')
    p.add_argument("--host", default=DEFAULT_HOST, help="the host that bare slot counts name")
    p.add_argument("--script", default=None, help="also write the discovery script here")
    p.add_argument("--stop-file", default=None, help="the file a SECONDS:stop entry creates")
    args = p.parse_args(argv)
    try:
        changes = parse_schedule(args.schedule, args.host)
        if any(c.stop for c in changes) and not args.stop_file:
            raise ParameterError("stop-file", None, "a path, since the schedule has a stop entry")
    except ParameterError as exc:
        p.error(str(exc))
    if args.script:
        write_discovery_script(args.script, args.hosts_file)
    try:
        run_schedule(args.hosts_file, changes, args.stop_file)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
