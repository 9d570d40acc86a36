"""A compute-bound rank: single-threaded pure-Python work, no communication.

Throughput (work units per second) depends only on the CPU the rank gets, so it shows
whether an emulated host's CPU share holds and whether hosts scale linearly.

    python -m lab.bench.spin --seconds 5
"""

from __future__ import annotations

import argparse
import os
import time

from lab.metrics.records import emit


def unit(n: int) -> int:
    """One sample's worth of work: ``n`` integer multiply-adds in the interpreter."""
    acc = 0
    for i in range(n):
        acc = (acc + i * i) & 0xFFFFFFFF
    return acc


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m lab.bench.spin", description=__doc__)
    p.add_argument("--seconds", type=float, default=5.0, help="how long to work (wall clock)")
    p.add_argument("--unit", type=int, default=20_000, help="iterations per sample")
    p.add_argument("--report", type=float, default=0.5, help="seconds between step records")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.unit < 1 or args.report <= 0:
        p.error("--seconds, --unit and --report must be > 0")
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
