"""Fake rank for blame tests: one rank fails, the others wait to be ended by their launcher.

Reads the rank from whichever variable the launcher sets (OpenMPI, Horovod, torchrun's
RANK, KungFu's peer spec).

    python tests/bin/fail_on_rank.py --rank R (--exitcode C | --raise)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK", "RANK")


def rank() -> int:
    for name in RANK_VARS:
        if name in os.environ:
            return int(os.environ[name])
    peers = os.environ["KUNGFU_INIT_PEERS"].split(",")  # KungFu: our place among the peers
    return peers.index(os.environ["KUNGFU_SELF_SPEC"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, required=True, help="the rank that fails")
    parser.add_argument("--exitcode", type=int, default=3)
    parser.add_argument("--raise", dest="raise_", action="store_true", help="raise instead")
    args = parser.parse_args()
    me = rank()
    print(f"rank {me} up", flush=True)
    if me != args.rank:
        time.sleep(60)  # ended by the launcher once the failing rank is gone
        return 0
    time.sleep(0.5)  # the others are up: their launcher has something to tear down
    if args.raise_:
        raise RuntimeError(f"rank {me} cannot go on")
    print(f"rank {me} giving up with {args.exitcode}", file=sys.stderr, flush=True)
    return args.exitcode


if __name__ == "__main__":
    sys.exit(main())
