"""Time one allreduce of a given size with torch.distributed (gloo) between ranks.

The rendezvous is torch's ``env://`` (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), so
any launcher that sets those runs it; on emulated hosts the bytes cross the shaped links.

    python -m lab.bench.allreduce --bytes 16777216 --repeats 5
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

from lab.bench.config import WorkloadConfig, flag
from lab.errors import require_at_least, require_positive
from lab.metrics.records import emit, exit_now


def _rank_env() -> tuple[int, int]:
    rank = os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK"))
    size = os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE"))
    if rank is None or size is None:
        raise SystemExit("lab.bench.allreduce needs RANK and WORLD_SIZE (and MASTER_ADDR/PORT)")
    os.environ.setdefault("RANK", rank)
    os.environ.setdefault("WORLD_SIZE", size)
    return int(rank), int(size)


@dataclasses.dataclass(frozen=True)
class Config(WorkloadConfig):
    """The message, how often it is reduced, and the collective's engine."""

    MODULE = "lab.bench.allreduce"
    DESCRIPTION = "Time one allreduce of a given size with torch.distributed between ranks."

    bytes: int = flag(16 * 2**20, "message size in bytes")
    repeats: int = flag(5, "timed allreduces")
    warmup: int = flag(1, "untimed allreduces first")
    backend: str = flag("gloo", "torch.distributed backend")
    timeout: float = flag(120.0, "seconds for any collective")

    def checked(self) -> Config:
        require_at_least(("bytes", self.bytes, 4), ("repeats", self.repeats, 1))
        require_at_least(("warmup", self.warmup, 0))
        require_positive(("timeout", self.timeout))
        return self


def main(argv: list[str] | None = None) -> None:
    args = Config.main_config(argv)
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise SystemExit("lab.bench.allreduce needs PyTorch: pip install torch") from None
    from datetime import timedelta

    rank, size = _rank_env()
    dist.init_process_group(
        args.backend, init_method="env://", timeout=timedelta(seconds=args.timeout)
    )
    tensor = torch.ones(args.bytes // 4, dtype=torch.float32)
    emit(
        "header",
        model="allreduce",
        rank=rank,
        world_size=size,
        backend=args.backend,
        bytes=tensor.numel() * 4,
        host=os.environ.get("DISTLAB_HOST", ""),
    )
    for _ in range(args.warmup):
        dist.all_reduce(tensor)
    times = []
    for i in range(args.repeats):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(tensor)
        dt = time.perf_counter() - t0
        times.append(dt)
        emit("metric", name="allreduce_seconds", value=dt, step=i, rank=rank, bytes=args.bytes)
    emit(
        "summary",
        rank=rank,
        world_size=size,
        bytes=tensor.numel() * 4,
        allreduce_seconds_median=statistics.median(times),
    )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    exit_now(0)
