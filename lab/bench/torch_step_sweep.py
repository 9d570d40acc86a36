"""Step times of one PyTorch model over several configurations, in one process:
``python -m lab.bench.torch_step_sweep``.

A step-time table (image size × micro-batches k) measured as one run per configuration
pays the process start, the imports and the cluster set-up once per cell; here a rank
pays them once and measures every configuration in turn. k micro-batches are k
mini-batches one after another before one optimizer step, as k logical workers
time-sharing a device.

The configurations are visited in ``--rounds`` rounds, each visit running timed steps for
its share of ``--seconds`` (and of ``--min-steps``), after ``--warmup-steps`` on the
first visit only. Visiting in rounds rather than one configuration after another spreads
each configuration over the whole run, so a burst of other work on a shared machine
slows a part of several configurations' windows instead of all of one configuration's.
Each configuration ends with one ``metric`` record (``name="step_seconds"``): the median
of its windows' mean step times (see ``windowed_median``), beside the step records it
came from.

Every rank measures on its own: a run with N ranks on N emulated hosts of different CPU
quotas measures N device stand-ins side by side. With ``--in-step`` the ranks start each
round together (a gloo barrier, the only use of its process group), so visit k of every
rank falls in the same stretch of time: left to their own pace, a fast rank's last visit
ran while a slow one was two visits behind, and a drift in the machine's speed between
them moved the speed ratio between device types that a visit's table gives.

``--allocator keep`` (the default) has glibc keep freed blocks for the next step, as a
GPU's caching allocator does (``lab.bench.allocator``): otherwise a large input's step
faults its activations' pages in again every time, and that kernel time swayed the speed
ratio between stand-ins.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from lab.bench.allocator import CHOICES
from lab.bench.config import WorkloadConfig, flag
from lab.errors import ParameterError, require_at_least, require_positive
from lab.metrics.records import emit, exit_now

WINDOW_S = 0.3


def windows(seconds: Sequence[float], window_s: float = WINDOW_S) -> list[float]:
    """Mean step time of each window of consecutive steps lasting at least ``window_s``; a
    remainder shorter than a window joins the window before it (or is the only one)."""
    means: list[float] = []
    sizes: list[int] = []
    total, n = 0.0, 0
    for s in seconds:
        total, n = total + float(s), n + 1
        if total >= window_s:
            means.append(total / n)
            sizes.append(n)
            total, n = 0.0, 0
    if n and means:
        last = means[-1] * sizes[-1] + total
        means[-1] = last / (sizes[-1] + n)
    elif n:
        means.append(total / n)
    return means


def windowed_median(segments: Sequence[Sequence[float]], window_s: float = WINDOW_S) -> float:
    """The median over windows (``windows`` of each segment of consecutive steps) of the
    windows' mean step time. A window's mean, not one step's time, because a CPU quota
    throttles within its periods (lab.cluster.emulation.cgroups.PERIOD_US); the median of
    windows, because other work on a shared machine comes in bursts."""
    import statistics

    means = [m for seg in segments for m in windows(seg, window_s)]
    return float(statistics.median(means)) if means else float("nan")


@dataclasses.dataclass(frozen=True)
class Config(WorkloadConfig):
    """The sweep's settings; lists are comma-separated on the command line."""

    MODULE = "lab.bench.torch_step_sweep"
    DESCRIPTION = __doc__.split("\n\n")[0]

    model: str = flag("tiny_cnn", "tiny_cnn or a torchvision model name")
    batch_size: int = flag(32, "mini-batch size")
    image_sizes: tuple[int, ...] = flag((32,), "e.g. 128,176,224")
    micro_batches: tuple[int, ...] = flag((1,), "k values, e.g. 1,2,4")
    seconds: float = flag(2.0, "timed seconds per config")
    min_steps: int = flag(3, "timed steps per config, at least")
    rounds: int = flag(3, "visits to each config")
    warmup_steps: int = flag(1, "untimed steps per config")
    window: float = flag(WINDOW_S, "seconds per median window")
    threads: tuple[int, ...] = flag((1,), "intra-op threads: one for all, or one per rank")
    num_classes: int = flag(10, "classes of the random labels")
    lr: float = flag(0.01, "learning rate")
    seed: int = flag(1, "model and data seed")
    in_step: bool = flag(False, "ranks start each round together")
    timeout: float = flag(300.0, "seconds a rank waits at a round")
    allocator: str = flag("keep", f"{', '.join(CHOICES)}: keep freed memory, or glibc's way")

    def checked(self) -> Config:
        for name in ("image_sizes", "micro_batches", "threads"):
            if not getattr(self, name):
                raise ParameterError(name, getattr(self, name), "at least one integer")
        require_at_least(
            ("batch_size", self.batch_size, 1),
            ("min_steps", self.min_steps, 1),
            ("rounds", self.rounds, 1),
            ("warmup_steps", self.warmup_steps, 0),
            ("num_classes", self.num_classes, 2),
            *((f"image_sizes[{i}]", v, 8) for i, v in enumerate(self.image_sizes)),
            *((f"micro_batches[{i}]", v, 1) for i, v in enumerate(self.micro_batches)),
            *((f"threads[{i}]", v, 1) for i, v in enumerate(self.threads)),
        )
        require_positive(
            *((name, getattr(self, name)) for name in ("seconds", "window", "lr", "timeout"))
        )
        if self.allocator not in CHOICES:
            raise ParameterError("allocator", self.allocator, ", ".join(CHOICES))
        return self


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """The checked flags (the lab checks a rank command with ``Config`` before launch)."""
    return Config.main_config(argv)


class _Config:
    """One configuration's model, optimizer, batch and timed steps per visit."""

    def __init__(self, ns: Config, rank: int, size: int, k: int) -> None:
        import torch

        from lab.bench.torch_synthetic import build_model

        torch.manual_seed(ns.seed)
        self.model = build_model(ns.model, ns.num_classes)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=ns.lr)
        gen = torch.Generator().manual_seed(ns.seed * 1000 + rank)
        self.images = torch.rand(ns.batch_size, 3, size, size, generator=gen)
        self.labels = torch.randint(0, ns.num_classes, (ns.batch_size,), generator=gen)
        self.k = k
        self.fields = {"image_size": size, "micro_batches": k, "batch_size": ns.batch_size}
        self.visits: list[list[float]] = []

    def step(self) -> tuple[float, float]:
        """One training step of k micro-batches; returns (seconds, loss)."""
        import torch

        start = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        for _ in range(self.k):
            loss = torch.nn.functional.cross_entropy(self.model(self.images), self.labels)
            loss.backward()
        self.opt.step()
        value = float(loss.detach())  # waits for the step
        return time.perf_counter() - start, value


def _visit(ns: Config, rank: int, config: _Config, step: int) -> int:
    """One visit: warm-up steps on the first, then timed steps for this visit's share of
    the seconds and steps; returns the next step number."""
    warmup = ns.warmup_steps if not config.visits else 0
    seconds, steps = ns.seconds / ns.rounds, -(-ns.min_steps // ns.rounds)
    timed: list[float] = []
    config.visits.append(timed)
    for i in itertools.count():
        if i >= warmup and len(timed) >= steps and sum(timed) >= seconds:
            return step
        took, loss = config.step()
        emit(
            "step",
            rank=rank,
            step=step,
            samples=ns.batch_size * config.k,
            seconds=took,
            warmup=i < warmup,
            loss=round(loss, 6),
            visit=len(config.visits),
            **config.fields,
        )
        if i >= warmup:
            timed.append(took)
        step += 1
    raise AssertionError("unreachable")


def _report(ns: Config, rank: int, config: _Config, step: int) -> None:
    emit(
        "metric",
        rank=rank,
        name="step_seconds",
        value=windowed_median(config.visits, ns.window),
        step=step - 1,
        model=ns.model,
        timed_steps=sum(len(v) for v in config.visits),
        timed_seconds=round(sum(sum(v) for v in config.visits), 6),
        visits=len(config.visits),
        window_s=ns.window,
        **config.fields,
    )


def _round_barrier(ns: Config, rank: int, world: int) -> Any:
    """What a rank calls at each round's start; returns the seconds it waited there (0
    without ``--in-step`` or with one rank)."""
    if not ns.in_step or world < 2:
        return lambda: 0.0
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method="env://", rank=rank, world_size=world,
        timeout=timedelta(seconds=ns.timeout),
    )  # fmt: skip

    def wait() -> float:
        start = time.perf_counter()
        dist.barrier()
        return time.perf_counter() - start

    return wait


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    if len(ns.threads) not in (1, world):
        print(f"--threads: one value or {world} (one per rank), not {ns.threads}", file=sys.stderr)
        return 2
    threads = ns.threads[rank] if len(ns.threads) > 1 else ns.threads[0]
    from lab.bench.allocator import configure

    allocator = configure(ns.allocator)
    import torch

    torch.set_num_threads(threads)
    emit(
        "header",
        rank=rank,
        world_size=world,
        model=ns.model,
        batch_size=ns.batch_size,
        image_sizes=ns.image_sizes,
        micro_batches=ns.micro_batches,
        threads=threads,
        cpus=sorted(os.sched_getaffinity(0)),
        engine="torch",
        torch=torch.__version__,
        device_name="cpu",
        pid=os.getpid(),
        **allocator,
    )
    configs = [_Config(ns, rank, size, k) for size in ns.image_sizes for k in ns.micro_batches]
    barrier = _round_barrier(ns, rank, world)
    step = 0
    for r in range(ns.rounds):
        waited = barrier()
        emit("event", rank=rank, name="round", round=r + 1, waited=round(waited, 6))
        for config in configs:
            step = _visit(ns, rank, config, step)
    for config in configs:
        _report(ns, rank, config, step)
    emit("event", rank=rank, name="sweep_done", configs=len(ns.image_sizes) * len(ns.micro_batches))
    _leave_group()
    return 0


def _leave_group() -> None:
    """Destroy the gloo group ``--in-step`` joined, while every rank is still alive (the
    process then ends through ``exit_now``, skipping the interpreter's teardown)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    exit_now(main())
