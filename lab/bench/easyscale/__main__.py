"""``python -m lab.bench.easyscale``: one stage of an EST job, or a DDP / plain baseline.

Each rank parses its flags with ``Config`` (its process count from WORLD_SIZE, its rank
from RANK: the ``local`` launcher sets both), takes its device type from ``--devices``
(one per process, or one for all), applies that device type's and the level's settings
*before* importing torch, and prints ``@lab`` records (header, one ``est`` event per EST
and mini-batch with the loss's bit pattern, one ``step`` per process and mini-batch, a
summary). Examples::

    python -m lab.bench.easyscale --system est --ests 4 --level D1 --steps 5 --save ck/
    python -m lab.bench.easyscale --system est --ests 4 --level D1 --resume ck/  # on 2 ranks
    python -m lab.bench.easyscale --device cuda --model resnet50 --image-size 224  # a GPU each
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence

from lab.bench.easyscale.config import Config
from lab.metrics.records import emit, exit_now

IMPLEMENTATIONS = {
    "est": "EasyScaleThreads (lab, torch.distributed gloo)",
    "ddp": "DistributedDataParallel (torch.distributed gloo)",
    "plain": "gradient accumulation, one process (torch)",
}


def memory_bytes() -> dict[str, int]:
    """This process's peak resident set (VmHWM) and proportional set size (PSS): PSS
    splits shared pages (the torch libraries) among the processes that map them, so N packed
    processes and one process with N ESTs can be compared by their sum."""
    out = {}
    for path, key, name in (
        ("/proc/self/status", "VmHWM:", "rss_peak_bytes"),
        ("/proc/self/smaps_rollup", "Pss:", "pss_bytes"),
    ):
        try:
            with open(path) as fh:
                for line in fh:
                    if line.startswith(key):
                        out[name] = int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return out


def _init_dist(rank: int, world: int, backend: str = "gloo") -> None:
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    dist.init_process_group(backend, rank=rank, world_size=world)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = Config.main_config(argv)  # its process count from WORLD_SIZE
    rank, world = int(os.environ.get("RANK", 0)), cfg.processes
    from lab.bench.easyscale import determinism
    from lab.bench.easyscale import device as devmod
    from lab.bench.easyscale.config import parse_level

    d1, d2 = parse_level(cfg.level)
    kind, backend, fell_back = devmod.fallback(cfg.device, cfg.backend)
    cfg = cfg.with_(device=kind, backend=backend)
    device = cfg.device_of(rank)
    determinism.apply_env(determinism.process_env(device, d2, d1, cfg.device))
    import torch
    import torch.distributed as dist

    if cfg.device == "cuda" and not devmod.cuda_available():
        Config.usage_error("--device cuda: torch.cuda.is_available() is False on this host")
    where = devmod.select(cfg.device)
    effective = determinism.effective_device(device, d2)
    settings = determinism.configure_torch(effective, d1, d2, cfg.device)
    backend = devmod.backend(cfg.device, cfg.backend)
    _init_dist(rank, world, backend)
    emit(
        "header",
        rank=rank,
        world_size=world,
        system=cfg.system,
        implementation=IMPLEMENTATIONS[cfg.system],
        level=cfg.level,
        ests=cfg.ests,
        placement=list(cfg.counts()),
        est_indices=list(cfg.ests_of(rank)) if cfg.system != "plain" else [],
        device_type=device.name,
        device=device.text(),
        batch_size=cfg.batch_size,
        model=cfg.model,
        backend=backend,
        torch=torch.__version__,
        **fell_back,
        **devmod.describe(where),
        **settings,
    )
    began = time.perf_counter()
    if cfg.system == "ddp":
        from lab.bench.easyscale.ddp import run_ddp

        run_ddp(cfg, rank, where)
    elif cfg.system == "plain":
        from lab.bench.easyscale.runtime import run_plain

        run_plain(cfg, rank, where)
    else:
        from lab.bench.easyscale.runtime import run_est

        run_est(cfg, rank, where)
    emit(
        "summary",
        rank=rank,
        seconds=time.perf_counter() - began,
        steps=cfg.steps,
        **memory_bytes(),
        **devmod.memory(where),
    )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_now(main())
