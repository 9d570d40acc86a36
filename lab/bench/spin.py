"""A compute-bound rank: single-threaded pure-Python work, no communication.

Throughput (work units per second) depends only on the CPU the rank gets, so it shows
whether an emulated host's CPU share holds and whether hosts scale linearly.

    python -m lab.bench.spin --seconds 5
"""

from __future__ import annotations

import dataclasses
import os
import time

from lab.bench.config import WorkloadConfig, flag
from lab.errors import require_at_least, require_positive
from lab.metrics.records import emit


def unit(n: int) -> int:
    """One sample's worth of work: ``n`` integer multiply-adds in the interpreter."""
    acc = 0
    for i in range(n):
        acc = (acc + i * i) & 0xFFFFFFFF
    return acc


@dataclasses.dataclass(frozen=True)
class Config(WorkloadConfig):
    """How long a rank works, in which units, and how often it reports."""

    MODULE = "lab.bench.spin"
    DESCRIPTION = "A compute-bound rank: single-threaded pure-Python work, no communication."

    seconds: float = flag(5.0, "how long to work (wall clock)")
    unit: int = flag(20_000, "iterations per sample")
    report: float = flag(0.5, "seconds between step records")

    def checked(self) -> Config:
        require_positive(("seconds", self.seconds), ("report", self.report))
        require_at_least(("unit", self.unit, 1))
        return self


def main(argv: list[str] | None = None) -> None:
    args = Config.main_config(argv)
    rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    host = os.environ.get("DISTLAB_HOST", "")
    emit("header", model="spin", rank=rank, host=host, unit=args.unit, seconds=args.seconds)
    cpu0 = cpu_last = time.process_time()
    start = last = time.perf_counter()
    total = since = step = 0
    while True:
        unit(args.unit)
        total += 1
        since += 1
        now = time.perf_counter()
        if now - last >= args.report or now - start >= args.seconds:
            cpu_now = time.process_time()  # per step: the share once a quota applies
            emit("step", rank=rank, step=step, samples=since, seconds=round(now - last, 6),
                 cpu_seconds=round(cpu_now - cpu_last, 6))  # fmt: skip
            step, since, last, cpu_last = step + 1, 0, now, cpu_now
        if now - start >= args.seconds:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    emit(
        "summary",
        rank=rank,
        host=host,
        samples=total,
        seconds=round(elapsed, 6),
        throughput=total / elapsed,
        cpu_seconds=round(cpu, 6),
        cpu_share=round(cpu / elapsed, 4),
    )


if __name__ == "__main__":
    main()
