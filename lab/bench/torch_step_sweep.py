"""Step times of one PyTorch model over several configurations, in one process:
``python -m lab.bench.torch_step_sweep``.

A step-time table (image size × micro-batches k) measured as one run per configuration
pays the process start, the imports and the cluster set-up once per cell; here a rank
pays them once and measures every configuration one after another. Each configuration
runs a few warm-up steps, then timed steps until both ``--seconds`` of timed steps and
``--min-steps`` have passed, and ends with one ``metric`` record (``name="step_seconds"``)
holding the windowed median of its step times (see ``windowed_median``), beside the step
records it came from. k micro-batches are k mini-batches one after another before one
optimizer step, as k logical workers time-sharing a device.

Every rank measures on its own (no process group): a run with N ranks on N emulated hosts
of different CPU quotas measures N device stand-ins side by side.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from lab.errors import ParameterError, require_at_least
from lab.metrics.records import emit

WINDOW_S = 0.3


def windowed_median(seconds: Sequence[float], window_s: float = WINDOW_S) -> float:
    """The median over consecutive windows of at least ``window_s`` of each window's mean
    step time. A window's mean, not one step's time, because a CPU quota throttles within
    100 ms periods; the median of windows, because other work on a shared machine comes in
    bursts. A tail shorter than a window is left out unless it is all there is."""
    import statistics

    if not seconds:
        return float("nan")
    means, total, n = [], 0.0, 0
    for s in seconds:
        total, n = total + float(s), n + 1
        if total >= window_s:
            means.append(total / n)
            total, n = 0.0, 0
    if not means:
        return total / n
    return float(statistics.median(means))


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated integers") from None
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one integer")
    return values


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lab.bench.torch_step_sweep", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--model", default="tiny_cnn", help="tiny_cnn or a torchvision model name")
    p.add_argument("--batch-size", type=int, default=32, help="mini-batch size")
    p.add_argument("--image-sizes", type=_ints, default=[32], help="e.g. 128,176,224")
    p.add_argument("--micro-batches", type=_ints, default=[1], help="k values, e.g. 1,2,4")
    p.add_argument("--seconds", type=float, default=2.0, help="timed seconds per config")
    p.add_argument("--min-steps", type=int, default=3, help="timed steps per config, at least")
    p.add_argument("--warmup-steps", type=int, default=1, help="untimed steps per config")
    p.add_argument("--window", type=float, default=WINDOW_S, help="seconds per median window")
    p.add_argument(
        "--threads", type=_ints, default=[1], help="intra-op threads: one for all, or one per rank"
    )
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    return p


def _check(ns: argparse.Namespace) -> argparse.Namespace:
    require_at_least(
        ("batch-size", ns.batch_size, 1),
        ("min-steps", ns.min_steps, 1),
        ("warmup-steps", ns.warmup_steps, 0),
        ("num-classes", ns.num_classes, 2),
        *((f"image-sizes[{i}]", v, 8) for i, v in enumerate(ns.image_sizes)),
        *((f"micro-batches[{i}]", v, 1) for i, v in enumerate(ns.micro_batches)),
        *((f"threads[{i}]", v, 1) for i, v in enumerate(ns.threads)),
    )
    for name in ("seconds", "window", "lr"):
        if not getattr(ns, name) > 0:
            raise ParameterError(name, getattr(ns, name), "a number > 0")
    return ns


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The checked flags (the lab calls this before launch, too)."""
    from lab.bench.flags import parse_checked

    return parse_checked(_parser(), _check, argv)


def _measure(ns: argparse.Namespace, rank: int, size: int, k: int, first_step: int) -> int:
    """One configuration: warm-up, timed steps, one metric record; returns the next step."""
    import torch

    from lab.bench.torch_synthetic import build_model

    torch.manual_seed(ns.seed)
    model = build_model(ns.model, ns.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=ns.lr)
    gen = torch.Generator().manual_seed(ns.seed * 1000 + rank)
    images = torch.rand(ns.batch_size, 3, size, size, generator=gen)
    labels = torch.randint(0, ns.num_classes, (ns.batch_size,), generator=gen)
    config = {"image_size": size, "micro_batches": k, "batch_size": ns.batch_size}
    timed: list[float] = []
    step = first_step
    while len(timed) < ns.min_steps or sum(timed) < ns.seconds:
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for _ in range(k):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
        opt.step()
        value = float(loss.detach())
        seconds = time.perf_counter() - start
        warmup = step - first_step < ns.warmup_steps
        emit(
            "step",
            rank=rank,
            step=step,
            samples=ns.batch_size * k,
            seconds=seconds,
            warmup=warmup,
            loss=round(value, 6),
            **config,
        )
        if not warmup:
            timed.append(seconds)
        step += 1
    emit(
        "metric",
        rank=rank,
        name="step_seconds",
        value=windowed_median(timed, ns.window),
        step=step - 1,
        model=ns.model,
        timed_steps=len(timed),
        timed_seconds=round(sum(timed), 6),
        window_s=ns.window,
        **config,
    )
    return step


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    if len(ns.threads) not in (1, world):
        print(f"--threads: one value or {world} (one per rank), not {ns.threads}", file=sys.stderr)
        return 2
    threads = ns.threads[rank] if len(ns.threads) > 1 else ns.threads[0]
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
        engine="torch",
        torch=torch.__version__,
        device_name="cpu",
        pid=os.getpid(),
    )
    step = 0
    for size in ns.image_sizes:
        for k in ns.micro_batches:
            step = _measure(ns, rank, size, k, step)
    emit("event", rank=rank, name="sweep_done", configs=len(ns.image_sizes) * len(ns.micro_batches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
