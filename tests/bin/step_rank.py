"""Fake rank for sweep and controls tests: reports ``--steps`` steps of ``--batch-size``
samples taking ``--step-seconds`` each (a record, no sleep), so its throughput is known
exactly, then sleeps ``--hold`` seconds (a run to stop), printing a line a step. With
``--on-seconds`` a step "with the monitor on" takes that long instead: every step, or with
``--alternate K`` the steps of every other block of K, each step's record tagged with its
``phase`` (off first), as a run that alternates its monitor tags them.

    python tests/bin/step_rank.py [--batch-size N] [--steps S] [--step-seconds X] [--hold H]
                                  [--exit-code C] [--on-seconds Y [--alternate K]]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.01)
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--on-seconds", type=float, default=None)
    parser.add_argument("--alternate", type=int, default=0)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    for step in range(args.steps):
        rec = {"kind": "step", "rank": rank, "step": step, "samples": args.batch_size,
               "seconds": args.step_seconds}  # fmt: skip
        if args.on_seconds is not None:
            on = (step // args.alternate) % 2 == 1 if args.alternate else True
            rec["seconds"] = args.on_seconds if on else args.step_seconds
            if args.alternate:
                rec["phase"] = "on" if on else "off"
        print(f"rank {rank} step {step}", flush=True)
        print("@lab " + json.dumps(rec), flush=True)
    end = time.monotonic() + args.hold
    while time.monotonic() < end:
        print(f"rank {rank} holding", flush=True)
        time.sleep(0.1)
    if args.exit_code:
        print(f"rank {rank}: failing on purpose", file=sys.stderr, flush=True)
    return args.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
