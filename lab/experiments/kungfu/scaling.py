"""Dynamic scaling runs (KungFu Fig 7): a synchronous job resized on a schedule, on
Horovod Elastic, and the latency of each resize read back from its records.

The schedule (``"0:1,30:2,70:1,100:stop"``: seconds → workers) is played by a thread in
the launching process, which rewrites the hosts file that horovodrun's discovery script
prints; every write is recorded with its wall time, so a resize's latency is the time
from the write to the first step finished at the new size. Those host changes are kept
in the run directory as ``events.jsonl`` (one record per line, like the ranks' own), so
the figure can be rebuilt from the run directory alone (``read_events``).

The schedule's clock starts at the first training step, not at the launch: starting
TensorFlow takes from seconds to minutes depending on the machine's load, and a resize
asked for before the job trains measures start-up, not resizing.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.cluster.elastic_hosts import (
    DEFAULT_HOST,
    parse_schedule,
    run_schedule,
    write_discovery_script,
    write_hosts,
)

EVENTS_NAME = "events.jsonl"
FIRST_STEP_WAIT_S = 300.0  # the longest wait for the first step before the schedule starts
# A joining worker must start TensorFlow before Gloo's rendezvous gives up (Horovod's
# default, 30 s, is shorter than a start on a busy machine: the job then aborts).
GLOO_TIMEOUT_S = "300"
# The point's keys that are the workload's settings (lab.bench.elastic's Config)
FLAGS = ("model", "batch_size", "image_size", "warmup_steps", "steps", "duration", "threads")


class FirstStep:
    """A run observer that notes the first training step any rank prints."""

    def __init__(self) -> None:
        self.seen = threading.Event()

    def on_start(self, run_dir: str, ranks: Any, control: Any) -> None:
        pass

    def on_line(self, line: Any) -> None:
        if not self.seen.is_set() and '"kind": "step"' in line.text:
            self.seen.set()

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Any) -> None:
        self.seen.set()  # a run that ends without a step releases the schedule


def _after_first_step(first: FirstStep, stop: threading.Event, play: Any, *args: Any) -> None:
    first.seen.wait(FIRST_STEP_WAIT_S)
    if not stop.is_set():
        play(*args)


def write_events(run_dir: str | Path, events: list[dict[str, Any]]) -> Path:
    """Keep the schedule's host changes beside the run's logs (``events.jsonl``)."""
    path = Path(run_dir) / EVENTS_NAME
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in events))
    return path


def read_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """The host changes a resizing run wrote (empty when it wrote none)."""
    path = Path(run_dir) / EVENTS_NAME
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def first_host(cluster: Any) -> str:
    """The host that bare slot counts in a schedule name: the cluster's first host
    (``localhost`` on this machine)."""
    from lab.cluster.inventory import as_cluster

    c = as_cluster(cluster)
    if c.is_local:
        return DEFAULT_HOST
    return c.hosts[0].name


def elastic_argv(
    point: Mapping[str, Any], stop_file: Path, python: str = sys.executable
) -> list[str]:
    """The worker command: ``python -m lab.bench.elastic`` with the point's settings,
    built by the workload's Config (ParameterError naming the setting)."""
    from lab.bench.elastic import Config

    values = {k: point[k] for k in FLAGS if point.get(k) is not None}
    return Config.from_values({**values, "stop_file": str(stop_file)}).command(python)


def run_resizing(
    schedule: str,
    point: Mapping[str, Any],
    experiment: str,
    cluster: Any = "local",
    host: str | None = None,
    nic: str | None = None,
    timeout: float = 600,
    view: Any = "auto",
) -> tuple[Any, list[dict[str, Any]]]:
    """Run one elastic job through ``schedule`` on ``cluster``; return its RunResult and
    the discovery events (``{"kind": "event", "name": "discovery", "slots", "time"}``)
    the schedule wrote, which are also written to the run directory (``events.jsonl``).

    Args:
        host: the host bare slot counts name (default: the cluster's first host).
        nic: Horovod's network interface (default: ``lo`` when the hosts are this
            machine, else Horovod's choice).
    """
    from lab.cluster import launch

    host = host or first_host(cluster)
    if nic is None and host == DEFAULT_HOST:
        nic = "lo"
    changes = parse_schedule(schedule, default_host=host)
    sizes = [c.slots for c in changes if not c.stop]
    events: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="distlab-elastic-") as tmp:
        hosts, stop_file = Path(tmp) / "hosts", Path(tmp) / "stop"
        argv = elastic_argv(point, stop_file)  # checked before the schedule's thread starts
        script = write_discovery_script(Path(tmp) / "discover.sh", hosts)
        write_hosts(hosts, {host: sizes[0]})
        stop = threading.Event()

        def record(change: Any, written: float) -> None:
            if not change.stop:
                events.append(
                    {
                        "kind": "event",
                        "name": "discovery",
                        "slots": change.slots,
                        "hosts": dict(change.hosts),
                        "at": change.at,
                        "time": written,
                    }
                )

        first = FirstStep()
        player = threading.Thread(
            target=_after_first_step,
            args=(first, stop, run_schedule, hosts, changes, stop_file, stop, record),
            daemon=True,
        )
        player.start()
        try:
            result = launch(
                argv,
                np=sizes[0],
                launcher="horovod-elastic",
                options={
                    "discovery_script": str(script),
                    "min_np": 1,
                    "max_np": max(sizes),
                    "nic": nic,
                },
                env={"TF_CPP_MIN_LOG_LEVEL": "3", "HOROVOD_GLOO_TIMEOUT_SECONDS": GLOO_TIMEOUT_S},
                cluster=cluster,
                experiment=experiment,
                params={**point, "schedule": schedule},
                timeout=timeout,
                view=_with(view, first),
                check=False,
            )
        finally:
            stop.set()
            player.join(timeout=5)
    write_events(result.run_dir, events)
    return result, events


def _with(view: Any, observer: Any) -> Any:
    from lab.cluster.observers import FanOut
    from lab.cluster.view import make_view

    return FanOut(make_view(view) if isinstance(view, str) or view is None else view, observer)
