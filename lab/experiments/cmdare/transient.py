"""Training on transient servers: lifetimes, revocations and what a job costs (Monte Carlo).

A job of ``steps`` steps runs at ``speed`` steps/s on ``servers`` servers and checkpoints
every ``checkpoint_every`` steps (``checkpoint_seconds`` each). On transient servers each
server lives for a time drawn from a lifetime distribution; when one is revoked the job
stops, a replacement starts (``restart_seconds``, drawn per revocation), and training
resumes from the last checkpoint, so the steps since it are done again. That is
CM-DARE's chief-revocation case, and conservative for a worker revocation in asynchronous
training. On-demand servers are never revoked. Every server is billed for the whole wall
time, at its price per hour.

numpy is imported where used, so importing this module is free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lab.errors import ParameterError

Sampler = Callable[[Any, int], Any]  # (numpy Generator, n) -> n lifetimes in seconds


@dataclass(frozen=True)
class HourlyLifetimes:
    """A lifetime distribution given as an hour-binned CDF.

    ``cdf[i]`` is the fraction of servers revoked within ``hours[i]`` hours. A draw picks
    the bin by inverse CDF and a time uniformly inside it (the binning hides where); the
    mass the CDF leaves above ``max_hours`` lives exactly ``max_hours`` (a provider's
    limit, 24 h for Google Compute Engine preemptible VMs).
    """

    hours: tuple[float, ...]
    cdf: tuple[float, ...]
    max_hours: float = 24.0

    def __post_init__(self) -> None:
        if len(self.hours) != len(self.cdf) or not self.hours:
            raise ParameterError("cdf", len(self.cdf), f"{len(self.hours)} values, one per hour")
        if any(b < a for a, b in zip(self.cdf, self.cdf[1:], strict=False)):
            raise ParameterError("cdf", self.cdf, "non-decreasing fractions")
        if self.cdf[0] < 0 or self.cdf[-1] > 1:
            raise ParameterError("cdf", self.cdf, "fractions in [0, 1]")
        if any(h > self.max_hours for h in self.hours):
            raise ParameterError("hours", max(self.hours), f"bins up to max_hours={self.max_hours}")

    @classmethod
    def from_table(cls, table: Any, max_hours: float = 24.0) -> HourlyLifetimes:
        """From rows ``within_hours, cdf`` (bins past ``max_hours`` are the limit itself)."""
        rows = table.sort_values("within_hours")
        rows = rows[rows["within_hours"] <= max_hours]
        return cls(
            tuple(float(h) for h in rows["within_hours"]),
            tuple(float(c) for c in rows["cdf"]),
            max_hours,
        )

    def survival_at_limit(self) -> float:
        """The fraction of servers that reach ``max_hours``."""
        return 1.0 - self.cdf[-1]

    def mean_hours(self) -> float:
        """The exact mean lifetime of this distribution (uniform inside each bin)."""
        mean, prev_c, prev_h = 0.0, 0.0, 0.0
        for h, c in zip(self.hours, self.cdf, strict=True):
            mean += (c - prev_c) * (prev_h + h) / 2
            prev_c, prev_h = c, h
        return mean + self.survival_at_limit() * self.max_hours

    def sample(self, rng: Any, n: int) -> Any:
        """``n`` lifetimes in seconds."""
        import numpy as np

        cdf = np.asarray(self.cdf, dtype=float)
        edges = np.concatenate([[0.0], np.asarray(self.hours, dtype=float)])
        u = rng.uniform(0.0, 1.0, n)
        i = np.searchsorted(cdf, u, side="left")  # first bin whose CDF reaches u
        inside = i < len(cdf)
        out = np.full(n, float(self.max_hours))
        j = i[inside]
        out[inside] = edges[j] + rng.uniform(0.0, 1.0, j.size) * (edges[j + 1] - edges[j])
        return out * 3600.0


def exponential_lifetimes(mean_hours: float) -> Sampler:
    """Memoryless lifetimes (mean ``mean_hours``): the case with a closed-form expectation."""
    if not mean_hours > 0:
        raise ParameterError("mean_hours", mean_hours, "a number > 0")
    return lambda rng, n: rng.exponential(mean_hours * 3600.0, n)


def fixed_seconds(value: float) -> Sampler:
    """A 'distribution' that always draws ``value`` seconds."""

    def draw(rng: Any, n: int) -> Any:
        import numpy as np

        return np.full(n, float(value))

    return draw


def empirical_seconds(values: Sequence[float]) -> Sampler:
    """Draws with replacement from measured seconds (e.g. VM start-up times)."""
    vals = [float(v) for v in values]
    if not vals or min(vals) < 0:
        raise ParameterError("values", vals[:3], "a non-empty list of seconds >= 0")
    return lambda rng, n: rng.choice(vals, n)


@dataclass(frozen=True)
class Job:
    """A training job and its cluster.

    Args:
        steps: global steps to train.
        speed: cluster speed in steps/s (e.g. from a speed model).
        servers: servers in the cluster (each can be revoked).
        checkpoint_every: steps between checkpoints.
        checkpoint_seconds: how long one checkpoint stalls training.
    """

    steps: int
    speed: float
    servers: int = 1
    checkpoint_every: int = 1000
    checkpoint_seconds: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (
            ("steps", self.steps),
            ("servers", self.servers),
            ("checkpoint_every", self.checkpoint_every),
        ):
            if not isinstance(value, int) or value < 1:
                raise ParameterError(name, value, "an integer >= 1")
        if not self.speed > 0:
            raise ParameterError("speed", self.speed, "steps/s > 0")
        if self.checkpoint_seconds < 0:
            raise ParameterError("checkpoint_seconds", self.checkpoint_seconds, "seconds >= 0")

    def undisturbed_seconds(self) -> float:
        """Wall time with no revocation: the steps plus every checkpoint but a final one."""
        return _left(self, self.steps)


def simulate(job: Job, lifetimes: Sampler, restart: Sampler, rng: Any) -> tuple[float, int]:
    """One run of ``job`` on transient servers: (wall seconds, revocations)."""
    import numpy as np

    interval = job.checkpoint_every / job.speed + job.checkpoint_seconds
    t, saved, revocations = 0.0, 0, 0
    revoke_at = np.asarray(lifetimes(rng, job.servers), dtype=float)
    while True:
        finish_at = t + _left(job, job.steps - saved)
        k = int(np.argmin(revoke_at))
        if finish_at <= revoke_at[k]:
            return finish_at, revocations
        elapsed = max(revoke_at[k] - t, 0.0)
        saved = min(saved + int(elapsed // interval) * job.checkpoint_every, job.steps)
        t = max(revoke_at[k], t) + float(restart(rng, 1)[0])
        revoke_at[k] = t + float(lifetimes(rng, 1)[0])
        revocations += 1
        if revocations > 1_000_000:
            raise ParameterError("lifetimes", "too short", "lifetimes that let the job progress")


def _left(job: Job, remaining: int) -> float:
    """Seconds to train ``remaining`` steps from a checkpoint, undisturbed."""
    checkpoints = math.ceil(remaining / job.checkpoint_every) - 1
    return remaining / job.speed + checkpoints * job.checkpoint_seconds


def what_if(
    job: Job,
    lifetimes: Sampler,
    restart: Sampler,
    transient_price: float,
    on_demand_price: float,
    trials: int = 1000,
    seed: int = 0,
) -> Any:
    """Monte Carlo of ``job`` on transient servers beside its on-demand run.

    Prices are per server-hour. Returns one row per trial: ``option`` ("transient" or
    "on-demand"), ``trial``, ``hours``, ``cost``, ``revocations`` (on-demand: one row).
    """
    import numpy as np
    import pandas as pd

    if trials < 1:
        raise ParameterError("trials", trials, "an integer >= 1")
    for name, price in (("transient_price", transient_price), ("on_demand_price", on_demand_price)):
        if price < 0:
            raise ParameterError(name, price, "a price per server-hour >= 0")
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(trials):
        seconds, revocations = simulate(job, lifetimes, restart, rng)
        hours = seconds / 3600.0
        rows.append(("transient", i, hours, hours * job.servers * transient_price, revocations))
    hours = job.undisturbed_seconds() / 3600.0
    rows.append(("on-demand", 0, hours, hours * job.servers * on_demand_price, 0))
    return pd.DataFrame(rows, columns=["option", "trial", "hours", "cost", "revocations"])


def summarize(runs: Any) -> Any:
    """Mean, 5th and 95th percentile of hours and cost per option."""
    g = runs.groupby("option")
    out = g[["hours", "cost", "revocations"]].mean()
    for col in ("hours", "cost"):
        out[f"{col}_p5"] = g[col].quantile(0.05)
        out[f"{col}_p95"] = g[col].quantile(0.95)
    return out.reset_index()
