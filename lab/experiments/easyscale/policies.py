"""Scheduling policies for the trace simulator, behind one interface, from the paper's §5.2.

A policy sees the jobs that have arrived and are not finished (``JobView``: what a job
asks for and what it holds now) and the free devices per type, and returns what every job
holds until the next scheduling interval. Allocations are device counts per type; how a
job's ESTs are spread over its devices, and so its step time, is ``Speed``'s business.

- ``YarnCS``: FIFO; a job gets one device of its preferred type per EST, all at once, or
  waits — and so does everything behind it; a started job keeps its devices, no more.
- ``EasyScale(heterogeneous=False)``: jobs are elastic, so every instant re-plans all of
  them: in FIFO order each job gets one device, holding all its ESTs, of the type on
  which what is left would run it fastest;
  then, while devices are left, the job whose next devices add the most throughput per
  added device (relative to what such a device alone gives the job) grows, as long as that
  gain is at least ``min_gain``; one device type per job. A job may so shrink to let a
  newcomer start, or move to faster devices; the simulator charges it a restart.
- ``EasyScale(heterogeneous=True)``: the same, but a job that allows it may mix types.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lab.errors import ParameterError
from lab.experiments.easyscale.steptimes import StepTimes

Counts = dict[str, int]


@dataclass(frozen=True)
class JobView:
    """A job as a policy sees it at one scheduling instant."""

    name: str
    submit: float
    workload: str
    ests: int
    batch_size: int
    heterogeneous: bool
    preferred: str
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return sum(self.counts.values()) > 0


class Speed:
    """Step time of a job on an allocation, read from measured step times.

    ESTs are spread over the devices by speed: every device holds one, then each further
    EST goes to the device whose step time grows least by taking it; the job's step is as
    slow as its slowest device (synchronous training).
    """

    def __init__(self, table: StepTimes) -> None:
        self.table = table
        self._cache: dict[tuple, tuple[float, tuple[tuple[str, int], ...]]] = {}

    def split(self, job: JobView, counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
        """ESTs per device, as (device type, ESTs) pairs."""
        return self._solve(job, counts)[1]

    def step_seconds(self, job: JobView, counts: Mapping[str, int]) -> float:
        return self._solve(job, counts)[0]

    def samples_per_second(self, job: JobView, counts: Mapping[str, int]) -> float:
        if sum(counts.values()) == 0:
            return 0.0
        return job.ests * job.batch_size / self.step_seconds(job, counts)

    def device_alone(self, job: JobView, device_type: str) -> float:
        """Samples/s one device of this type gives the job holding one EST: the yardstick
        of what an added device is worth."""
        return job.batch_size / self.table.seconds(job.workload, device_type, 1, job.batch_size)

    def _solve(self, job: JobView, counts: Mapping[str, int]) -> tuple[float, tuple]:
        items = tuple(sorted((t, n) for t, n in counts.items() if n > 0))
        key = (job.workload, job.batch_size, job.ests, items)
        if key in self._cache:
            return self._cache[key]
        devices = [t for t, n in items for _ in range(n)]
        if not devices or len(devices) > job.ests:
            raise ParameterError(
                "allocation", dict(counts), f"1..{job.ests} devices for {job.name}"
            )

        def cost(t: str, k: int) -> float:
            return self.table.seconds(job.workload, t, k, job.batch_size)

        held = [1] * len(devices)
        heap = [(cost(t, 2), i) for i, t in enumerate(devices)]
        heapq.heapify(heap)
        for _ in range(job.ests - len(devices)):
            _, i = heapq.heappop(heap)
            held[i] += 1
            heapq.heappush(heap, (cost(devices[i], held[i] + 1), i))
        step = max(cost(t, k) for t, k in zip(devices, held, strict=True))
        result = (step, tuple(zip(devices, held, strict=True)))
        self._cache[key] = result
        return result


class Policy(Protocol):
    name: str
    label: str
    gang: bool  # a job gets all its devices at once or none (so it must fit its type)

    def schedule(
        self, jobs: Sequence[JobView], free: Mapping[str, int], speed: Speed
    ) -> dict[str, Counts]:
        """What each job holds until the next interval (jobs left out hold nothing)."""
        ...


def _fifo(jobs: Sequence[JobView]) -> list[JobView]:
    return sorted(jobs, key=lambda j: (j.submit, j.name))


@dataclass(frozen=True)
class YarnCS:
    """YARN's capacity scheduler as the paper's baseline: gang, FIFO, preferred type."""

    name: str = "yarn-cs"
    label: str = "YARN-CS"
    gang: bool = True

    def schedule(
        self, jobs: Sequence[JobView], free: Mapping[str, int], speed: Speed
    ) -> dict[str, Counts]:
        left = dict(free)
        out = {j.name: dict(j.counts) for j in jobs if j.running}
        for job in _fifo([j for j in jobs if not j.running]):
            if left.get(job.preferred, 0) < job.ests:
                break  # head-of-line blocking: nobody overtakes the first waiting job
            out[job.name] = {job.preferred: job.ests}
            left[job.preferred] -= job.ests
        return out


@dataclass(frozen=True)
class EasyScale:
    """EasyScale's elastic policy: start small on what is free, grow while it pays.

    Args:
        heterogeneous: mix device types within a job (for jobs that allow it).
        min_gain: the least added throughput per added device, as a fraction of what that
            device alone gives the job, for a job to grow (the lab's setting).
    """

    heterogeneous: bool = True
    min_gain: float = 0.5
    gang = False

    @property
    def name(self) -> str:
        return "easyscale-heter" if self.heterogeneous else "easyscale-homo"

    @property
    def label(self) -> str:
        return "EasyScale-heter" if self.heterogeneous else "EasyScale-homo"

    def schedule(
        self, jobs: Sequence[JobView], free: Mapping[str, int], speed: Speed
    ) -> dict[str, Counts]:
        left = dict(free)
        for j in jobs:  # elastic: every job's devices are up for re-planning
            for t, n in j.counts.items():
                left[t] = left.get(t, 0) + n
        left = {t: n for t, n in left.items() if n > 0}
        order = _fifo(jobs)
        out: dict[str, Counts] = {}
        for job in order:
            if not left:
                break
            start = min(
                left,
                key=lambda t, j=job: (
                    -speed.samples_per_second(j, {t: min(left[t], j.ests)}),
                    speed.step_seconds(j, {t: 1}),
                    t not in j.counts,
                    t != j.preferred,
                    t,
                ),
            )
            out[job.name] = {start: 1}
            _take(left, start, 1)
        by_name = {j.name: j for j in order}
        options: dict[str, list[tuple[float, float, str, int]]] = {}
        while left:
            # (gain per device, added samples/s, -FIFO rank, type, devices): the best first
            best: tuple[float, float, int, str, int] | None = None
            for rank, name in enumerate(out):
                if name not in options:  # a job's options change only when it grows
                    options[name] = self._options(by_name[name], out[name], left, speed)
                for gain, added, t, m in options[name]:
                    if left.get(t, 0) >= m:  # the job's best option that still fits
                        if best is None or (gain, added, -rank) > best[:3]:
                            best = (gain, added, -rank, t, m)
                        break
            if best is None:
                break
            _, _, rank, t, m = best
            name = list(out)[-rank]
            out[name][t] = out[name].get(t, 0) + m
            _take(left, t, m)
            del options[name]
        return out

    def _options(
        self, job: JobView, counts: Counts, left: Mapping[str, int], speed: Speed
    ) -> list[tuple[float, float, str, int]]:
        """The job's ways to grow by m devices of one type that are worth it, best first."""
        room = job.ests - sum(counts.values())
        now = speed.samples_per_second(job, counts)
        found = []
        for t in self._types(job, counts, left):
            alone = speed.device_alone(job, t)
            for m in range(1, min(left[t], room) + 1):
                added = speed.samples_per_second(job, {**counts, t: counts.get(t, 0) + m}) - now
                gain = round(added / (m * alone), 9)
                if gain >= self.min_gain:
                    found.append((gain, round(added, 9), t, m))
        return sorted(found, key=lambda o: (-o[0], -o[1], o[2], o[3]))

    def _types(self, job: JobView, counts: Mapping[str, int], left: Mapping[str, int]) -> list[str]:
        held = [t for t, n in counts.items() if n > 0]
        if self.heterogeneous and job.heterogeneous:
            return sorted(left)
        return [t for t in held if t in left]


def _take(left: dict[str, int], device_type: str, n: int) -> None:
    left[device_type] -= n
    if left[device_type] <= 0:
        del left[device_type]


POLICIES: dict[str, Policy] = {
    p.name: p for p in (YarnCS(), EasyScale(heterogeneous=False), EasyScale(heterogeneous=True))
}


def get_policy(name: str | Policy) -> Policy:
    if not isinstance(name, str):
        return name
    try:
        return POLICIES[name]
    except KeyError:
        raise ParameterError("policy", name, ", ".join(POLICIES)) from None
