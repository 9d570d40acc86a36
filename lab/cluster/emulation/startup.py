"""Emulated hosts start their ranks at full speed and get their CPU share once the job is up.

An emulated host's CPU share stands for its accelerator's speed. Starting a rank (importing
TensorFlow, building the model) runs on a GPU node's host CPU, which the share does not
describe: at 0.1-0.4 of a core TensorFlow's import alone took 15-50 s here, most of a
smoke-scale run. So while a run starts every host's quota is lifted (the hosts still
compete by their cgroup weights), and the shares apply at the job's first step record —
the ranks are up and the step's graph is built (tracing it at 0.4 core took ~20 s here),
and warm-up steps are never measured — or after ``limit`` seconds, whichever comes first.
Every measured step runs under the shares.
The profile's ``emulated.startup: share`` keeps the shares from the first instruction.

While the quotas are lifted the hosts' scheduling weights are too: a capped host counts
as ``GUARANTEE`` ordinary processes per slot (lab.cluster.emulation.cgroups.weight_for),
which holds its share against other work, but without its quota it took nearly all of
the machine — the launcher reading the ranks' lines, beside two such hosts, got a few per
cent of a core, and in a rehearsal on 2 cores the first step record of a PS job was read
3.5 s after it was printed, after its last one, so none of its steps counted. So during
start-up every host counts as its slots, like a host without a quota, and gets its
weight back with its quota.

The gate also sees each read on the reader thread itself (``on_read``), not from an
observer lane, so nothing queued in the launcher stands between a record and the shares.
``summary`` keeps the record's print time and the moment it was read: a late gate says
which hop was slow (to the launcher's read, or from the read to the shares).

A job does not stop for the gate, though: a read that comes late (a loaded machine) let a
short job run every step before its shares. So once the shares are in force the gate
creates the cluster's mark file (``shares_mark``, named to the ranks as
``DISTLAB_SHARES_MARK``), and the lab's workloads wait for it before their first timed
step (lab.bench.shares_wait).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.cluster.emulation.cgroups import CgroupDriver, weight_for
from lab.errors import ParameterError
from lab.metrics.records import PREFIX, parse_record

log = logging.getLogger(__name__)
STARTUPS = ("full", "share")
STEP = "step"  # in a read that may hold a step record; parse_record decides
LIMIT_S = 120.0  # a job that prints no record gets its shares this long after its start


def check_startup(value: Any) -> str:
    """The profile's ``startup`` entry: ``full`` (default) or ``share``."""
    if value is None:
        return "full"
    if value not in STARTUPS:
        raise ParameterError("emulated.startup", value, ", ".join(STARTUPS))
    return str(value)


class StartupShares:
    """A run observer that lifts the hosts' quotas (and their weights to an uncapped
    host's) at the start and restores both at the job's first step record (or ``limit``
    s, or the run's end); ``summary`` says when."""

    def __init__(self, emulation: Mapping[str, Any], limit: float = LIMIT_S) -> None:
        self._driver = CgroupDriver(int(emulation.get("cgroup_version", 1)), Path("/"))
        hosts = emulation.get("hosts") or {}
        self._shares = {
            Path(h["cgroup"]): h.get("cpu") for h in hosts.values() if h.get("cpu") is not None
        }
        # (start-up weight, weight) of each capped host and of the cluster's parent group
        self._weights: dict[Path, tuple[int, int]] = {}
        for h in hosts.values():
            if h.get("cpu") is not None and "weight" in h:
                self._weights[Path(h["cgroup"])] = (weight_for(None, h["slots"]), h["weight"])
        if self._weights and emulation.get("cgroup") and "weight" in emulation:
            lifted = sum(weight_for(None, h.get("slots", 1)) for h in hosts.values())
            self._weights[Path(emulation["cgroup"])] = (lifted, int(emulation["weight"]))
        mark = emulation.get("shares_mark")
        self._mark = Path(mark) if mark else None
        self._limit = limit
        self._lock = threading.Lock()
        self._started = 0.0
        self._applied: tuple[float, str] | None = None
        self._epoch: float | None = None  # wall clock once every share is in force
        self._timer: threading.Timer | None = None
        self._trigger: tuple[float | None, float] | None = None  # (printed, read), epochs

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        self._started = time.monotonic()
        if self._mark is not None:
            self._mark.unlink(missing_ok=True)
        for group in self._shares:
            self._driver.set_quota(group, None)
        for group, (lifted, _) in self._weights.items():
            self._driver.set_weight(group, lifted)
        self._timer = threading.Timer(self._limit, self.apply, args=("limit",))
        self._timer.daemon = True
        self._timer.start()

    def on_read(self, blocks: Sequence[Any]) -> None:
        """One read's blocks, on the reader thread: a step record among them applies the
        shares now."""
        if self._applied is not None:
            return
        for block in blocks:
            if PREFIX in block.text and STEP in block.text:
                for text in block.lines:
                    if self._take_step(text):
                        return

    def on_line(self, line: Any) -> None:
        """The same check a line at a time, where a caller feeds lines (a run's output
        calls ``on_read`` instead)."""
        if self._applied is None and PREFIX in line.text:
            self._take_step(line.text)

    def _take_step(self, text: str) -> bool:
        record = parse_record(text)
        if record is None or record["kind"] != "step":
            return False
        printed = record.get("time")
        self._trigger = (printed if isinstance(printed, (int, float)) else None, time.time())
        self.apply("first step")
        return True

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, Any]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.apply("end")

    def apply(self, why: str) -> None:
        """Give every host its share (once), then create the mark the ranks wait for."""
        with self._lock:
            if self._applied is not None:
                return
            self._applied = (time.monotonic() - self._started, why)
            for group, cpu in self._shares.items():
                try:
                    self._driver.set_quota(group, cpu)
                except OSError as e:  # the run may be tearing the cluster down
                    log.warning("could not set %s's share: %s", group.name, e)
            for group, (_, weight) in self._weights.items():
                try:
                    self._driver.set_weight(group, weight)
                except OSError as e:
                    log.warning("could not set %s's weight: %s", group.name, e)
            self._epoch = time.time()
            if self._mark is not None:
                try:
                    self._mark.write_text(f"{self._epoch}\n")
                except OSError as e:  # the ranks go on after lab.bench.shares_wait.WAIT_S
                    log.warning("could not mark the shares applied: %s", e)

    def summary(self) -> dict[str, Any]:
        """For the manifest: when the shares applied (seconds into the run, and the epoch that
        lab.metrics.shares reads steps against), and why; for a first step, how long its
        record took from the rank's print to the launcher's read (``read_lag_s``) and
        from that read to the shares (``apply_lag_s``)."""
        after, why = self._applied or (None, "never")
        out: dict[str, Any] = {
            "startup": "full", "after_s": None if after is None else round(after, 3),
            "epoch": self._epoch, "why": why}  # fmt: skip
        if self._trigger is not None and self._epoch is not None:
            printed, read = self._trigger
            if printed is not None:
                out["read_lag_s"] = round(read - printed, 3)
            out["apply_lag_s"] = round(self._epoch - read, 3)
        return out
