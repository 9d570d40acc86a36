"""A job's throughput over time from its ranks' step records, in fixed-width bins (KungFu
Fig 7 draws a resizing run's throughput this way)."""

from __future__ import annotations

import math

import pandas as pd

BIN_S = 1.0  # seconds per throughput bin


def binned_throughput(steps: pd.DataFrame, t0: float, width: float = BIN_S) -> pd.DataFrame:
    """The whole job's samples per second in ``width``-second bins since ``t0``: the samples
    of every rank's steps that *ended* in a bin, over the bin's width.

    A step's own rate (samples over its seconds) is not what a bin adds up: a rank at
    ~1.5 ms a step ends ~700 steps in a second, so summing their rates counted each
    worker ~700 times. Bins run from the first whole bin after the first step began
    (its end ``time`` minus its ``seconds``) to the last whole bin before the last step
    ended, so the run's start-up and its cut-off last bin do not read as dips; a bin in
    which no step ended (a pause, e.g. at a resize) reads 0.

    Args:
        steps: step records with ``time`` (epoch seconds at the step's end), ``seconds``
            and ``samples`` (that rank's), one row per rank and step.
        t0: the clock's zero (epoch seconds).
        width: the bin width in seconds.

    Returns:
        ``t`` (the bin's middle, seconds since ``t0``), ``throughput`` (samples/s, all
        ranks), ``samples`` and ``steps`` (ended in the bin, all ranks).
    """
    import numpy as np

    cols = ["t", "throughput", "samples", "steps"]
    end = pd.to_numeric(steps["time"], errors="coerce") - t0
    seconds = pd.to_numeric(steps["seconds"], errors="coerce").fillna(0.0)
    samples = pd.to_numeric(steps["samples"], errors="coerce")
    ok = end.notna() & samples.notna()
    end, seconds, samples = end[ok], seconds[ok], samples[ok]
    if end.empty:
        return pd.DataFrame(columns=cols)
    # 1 µs of slack: epoch seconds near 1.7e9 carry ~0.2 µs of rounding
    first = math.ceil(float((end - seconds).min()) / width - 1e-6)
    last = math.floor(float(end.max()) / width)  # bins [k, k + 1) · width for first <= k < last
    if last <= first:  # shorter than a whole bin: keep the partial ones
        first, last = math.floor(float(end.min()) / width), math.floor(float(end.max()) / width) + 1
    k = np.floor(end.to_numpy(dtype=float) / width).astype(int)
    keep = (k >= first) & (k < last)
    per_bin = (
        pd.DataFrame({"k": k[keep], "samples": samples.to_numpy(dtype=float)[keep]})
        .groupby("k")["samples"]
        .agg(["sum", "count"])
        .reindex(range(first, last), fill_value=0)
    )
    return pd.DataFrame(
        {
            "t": (per_bin.index.to_numpy(dtype=float) + 0.5) * width,
            "throughput": per_bin["sum"].to_numpy(dtype=float) / width,
            "samples": per_bin["sum"].to_numpy(dtype=float),
            "steps": per_bin["count"].to_numpy(dtype=int),
        },
        columns=cols,
    )
