"""Dynamic scaling runs (KungFu Fig 7): a synchronous job resized on a schedule, on
Horovod Elastic, and the latency of each resize read back from its records.

The schedule (``"0:1,30:2,70:1,100:stop"``: seconds → workers) is played by a thread in
the launching process, which rewrites the hosts file that horovodrun's discovery script
prints; every write is recorded with its wall time, so a resize's latency is the time
from the write to the first step finished at the new size.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.cluster.elastic_hosts import (
    parse_schedule,
    run_schedule,
    write_discovery_script,
    write_hosts,
)


def elastic_argv(
    point: Mapping[str, Any], stop_file: Path, python: str = sys.executable
) -> list[str]:
    """The worker command: ``python -m lab.bench.elastic`` with the point's settings."""
    argv = [python, "-m", "lab.bench.elastic", "--stop-file", str(stop_file)]
    for key in (
        "model",
        "batch_size",
        "image_size",
        "warmup_steps",
        "steps",
        "duration",
        "threads",
    ):
        if point.get(key) is not None:
            argv += [f"--{key.replace('_', '-')}", str(point[key])]
    return argv


def run_resizing(
    schedule: str,
    point: Mapping[str, Any],
    experiment: str,
    host: str = "localhost",
    nic: str | None = "lo",
    timeout: float = 600,
    view: Any = "auto",
) -> tuple[Any, list[dict[str, Any]]]:
    """Run one elastic job through ``schedule``; return its RunResult and the discovery
    events (``{"kind": "event", "name": "discovery", "slots", "time"}``) the schedule wrote.
    """
    from lab.cluster import launch

    changes = parse_schedule(schedule, default_host=host)
    sizes = [c.slots for c in changes if not c.stop]
    events: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="distlab-elastic-") as tmp:
        hosts, stop_file = Path(tmp) / "hosts", Path(tmp) / "stop"
        script = write_discovery_script(Path(tmp) / "discover.sh", hosts)
        write_hosts(hosts, {host: sizes[0]})
        stop = threading.Event()

        def record(change: Any, written: float) -> None:
            if not change.stop:
                events.append(
                    {"kind": "event", "name": "discovery", "slots": change.slots, "time": written}
                )

        player = threading.Thread(
            target=run_schedule, args=(hosts, changes, stop_file, stop, record), daemon=True
        )
        player.start()
        try:
            result = launch(
                elastic_argv(point, stop_file),
                np=sizes[0],
                launcher="horovod-elastic",
                options={
                    "discovery_script": str(script),
                    "min_np": 1,
                    "max_np": max(sizes),
                    "nic": nic,
                },
                env={"TF_CPP_MIN_LOG_LEVEL": "3"},
                experiment=experiment,
                params={**point, "schedule": schedule},
                timeout=timeout,
                view=view,
                check=False,
            )
        finally:
            stop.set()
            player.join(timeout=5)
    return result, events
