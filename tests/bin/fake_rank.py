"""A stand-in rank for supervision tests: reads RANK, prints, sleeps, fails on request.

Options that take ``[RANKS]`` apply to every rank when given bare, or only to the listed
ranks (``--ignore-term 1,3``); ``--exitcode 3@2`` makes rank 2 exit with 3 (bare ``3``: all).

Output: ``rank R line I`` for each line; ``rank R child PID`` / ``rank R escapee PID`` for
the processes it spawns; ``rank R ready`` once everything is started; ``rank R done``
before it exits on its own.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def applies(spec: str | None, rank: int) -> bool:
    if spec is None:
        return False
    return spec == "*" or rank in {int(x) for x in spec.split(",") if x}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--exitcode", default="0", help="N or N@RANKS")
    p.add_argument("--fail-after", type=float, default=0.5, help="seconds before a failing exit")
    p.add_argument("--lines", type=int, default=0)
    p.add_argument("--progress", action="store_true", help="print a \\r progress line")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--ignore-term", nargs="?", const="*")
    p.add_argument("--spawn-child", nargs="?", const="*")
    p.add_argument("--setsid-child", nargs="?", const="*")
    a = p.parse_args()
    rank = int(os.environ.get("RANK", "0"))

    if applies(a.ignore_term, rank):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for i in range(a.lines):
        print(f"rank {rank} line {i}", flush=True)
    if a.progress:
        for i in range(1, 6):
            sys.stdout.write(f"rank {rank} progress {i}/5\r")
            sys.stdout.flush()
        sys.stdout.write("\n")
        sys.stdout.flush()
        print(f"rank {rank} stderr note", file=sys.stderr, flush=True)
    if applies(a.spawn_child, rank):
        child = subprocess.Popen(SLEEPER)
        print(f"rank {rank} child {child.pid}", flush=True)
    if applies(a.setsid_child, rank):
        escapee = subprocess.Popen(SLEEPER, start_new_session=True)
        print(f"rank {rank} escapee {escapee.pid}", flush=True)
    print(f"rank {rank} ready", flush=True)

    code, _, ranks = a.exitcode.partition("@")
    if int(code) != 0 and applies(ranks or "*", rank):
        time.sleep(a.fail_after)
        print(f"rank {rank} failing with {code}", file=sys.stderr, flush=True)
        return int(code)
    time.sleep(a.sleep)
    print(f"rank {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
