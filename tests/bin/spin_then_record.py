"""Prints a header record, spins SECONDS, prints a step record holding the time, spins again."""

import sys
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def spin() -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))


print('@lab {"kind": "header", "rank": 0}', flush=True)
spin()
print(f'@lab {{"kind": "step", "rank": 0, "step": 0, "time": {time.time()}}}', flush=True)
spin()
