"""A rank for the browser test: says hello a few times and reports its throughput."""

import os
import sys
import time

from lab.metrics.records import emit

rank = int(os.environ.get("RANK", "0"))
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
for step in range(steps):
    print(f"rank {rank} says hello {step}", flush=True)
    emit("step", rank=rank, step=step, samples=32, seconds=0.25)
    time.sleep(0.25)
print(f"rank {rank} done", flush=True)
