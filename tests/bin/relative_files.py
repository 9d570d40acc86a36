"""A user's script that depends on its working directory, as most training scripts do.

It reads ``data/points.csv`` by a relative path, fits a line to it with a few steps of
gradient descent, and rank 0 writes ``checkpoint.json`` where it runs. It takes its rank
from whichever launcher started it (torchrun/the lab's ``RANK``, OpenMPI's
``OMPI_COMM_WORLD_RANK``, MPICH's ``PMI_RANK``). Every rank prints ``rank R cwd DIR``.

    python relative_files.py [--steps 50]
"""

import argparse
import csv
import json
import os


def rank() -> int:
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return 0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    with open(os.path.join("data", "points.csv"), newline="") as f:
        points = [(float(x), float(y)) for x, y in csv.reader(f)]
    a = b = 0.0
    for _ in range(args.steps):
        ga = sum(2 * (a * x + b - y) * x for x, y in points) / len(points)
        gb = sum(2 * (a * x + b - y) for x, y in points) / len(points)
        a, b = a - 0.05 * ga, b - 0.05 * gb
    me = rank()
    print(f"rank {me} cwd {os.getcwd()}", flush=True)
    if me == 0:
        with open("checkpoint.json", "w") as f:
            json.dump({"a": a, "b": b, "steps": args.steps}, f)
        print(f"saved checkpoint.json (a={a:.3f}, b={b:.3f})", flush=True)


if __name__ == "__main__":
    main()
