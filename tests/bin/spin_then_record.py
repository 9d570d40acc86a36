"""Spins SECONDS, prints a record holding the time, spins SECONDS again."""

import sys
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def spin() -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))


spin()
print(f'@lab {{"kind": "header", "rank": 0, "time": {time.time()}}}', flush=True)
spin()
