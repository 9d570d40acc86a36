"""A rank for the controls' browser test: ``--steps`` steps of ``--batch-size`` samples, a
line and a step record each, ``--step-seconds`` apart."""

import json
import os
import sys
import time

args = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))
batch, steps = int(args.get("--batch-size", 8)), int(args.get("--steps", 20))
pause = float(args.get("--step-seconds", 0.1))
rank = int(os.environ.get("RANK", "0"))
for step in range(steps):
    print(f"rank {rank} step {step} of batch {batch}", flush=True)
    rec = {"kind": "step", "rank": rank, "step": step, "samples": batch, "seconds": pause}
    print("@lab " + json.dumps(rec), flush=True)
    time.sleep(pause)
print(f"rank {rank} done", flush=True)
