"""Fake rank for launcher tests: prints the rank its launcher gave it, on both streams.

Reads the rank from whichever variable the launcher sets (OpenMPI, MPICH/Hydra, Horovod,
KungFu's peer spec, torchrun/local RANK), so one script serves every launcher.

    python tests/bin/echo_rank.py [--lines N] [--show-env A,B] [--exitcode C]
"""

from __future__ import annotations

import argparse
import os
import sys

RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK", "RANK")


def rank() -> str:
    for name in RANK_VARS:
        if name in os.environ:
            return os.environ[name]
    return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=2)
    parser.add_argument("--show-env", default="")
    parser.add_argument("--exitcode", type=int, default=0)
    args = parser.parse_args()
    r = rank()
    for i in range(args.lines):
        print(f"rank={r} stdout line={i}", flush=True)
    print(f"  rank={r} indented", flush=True)
    for name in filter(None, args.show_env.split(",")):
        print(f"rank={r} env {name}={os.environ.get(name, '<unset>')}", flush=True)
    print(f"rank={r} stderr", file=sys.stderr, flush=True)
    return args.exitcode


if __name__ == "__main__":
    sys.exit(main())
