"""Rank for the streaming benchmark: prints N numbered lines as fast as it can, then a count.

Each line is ``rank R line I`` written with one ``write`` call (one system call when
Python runs unbuffered, as the lab runs ranks), so nothing but the destination differs
between a run through the lab and one into /dev/null. The last line says how long the
printing took by the rank's own clock, which the benchmark reads back from the rank log:

    spew done rank=R lines=N seconds=S

Stdlib only, and reads the rank from RANK (local launcher) or OpenMPI's/MPICH's variables.

    python lab/experiments/selfbench/spew.py [--lines N] [--report FILE]

``--report`` also writes the count line to FILE (``{rank}`` in it: the rank), for runs whose
stdout is /dev/null.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def rank() -> str:
    for name in RANK_VARS:
        if name in os.environ:
            return os.environ[name]
    return "0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=100_000, help="numbered lines to print")
    parser.add_argument("--report", help="also write the count line to this file")
    args = parser.parse_args()
    r = rank()
    write = sys.stdout.write
    start = time.perf_counter()
    for i in range(args.lines):
        write(f"rank {r} line {i}\n")
    sys.stdout.flush()
    seconds = time.perf_counter() - start
    done = f"spew done rank={r} lines={args.lines} seconds={seconds:.6f}\n"
    write(done)
    sys.stdout.flush()
    if args.report:
        with open(args.report.replace("{rank}", r), "w") as f:
            f.write(done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
