"""One core's speed, probed before each notebook of a batch run."""

from __future__ import annotations

import time

from lab.metrics.machine import cpu_speed


def test_cpu_speed_is_loops_per_second_in_millions() -> None:
    loops = 100_000
    start = time.perf_counter()
    speed = cpu_speed(repeats=3, loops=loops)
    elapsed = time.perf_counter() - start
    assert 1 <= speed <= 1000  # a Python loop's iterations: millions a second, not ones
    # the median repeat and the slowest one both fit in the call's time
    assert 2 * loops / (speed * 1e6) <= elapsed
