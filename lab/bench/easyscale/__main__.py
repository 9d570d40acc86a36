"""``python -m lab.bench.easyscale``: one stage of an EST job, or a DDP / plain baseline.

Each rank reads RANK and WORLD_SIZE (the ``local`` launcher sets them), takes its device
type from ``--devices`` (one per process, or one for all), applies that device type's and
the level's settings *before* importing torch, and prints ``@lab`` records (header, one
``est`` event per EST and mini-batch with the loss's bit pattern, one ``step`` per process
and mini-batch, a summary). Examples::

    python -m lab.bench.easyscale --system est --ests 4 --level D1 --steps 5 --save ck/
    python -m lab.bench.easyscale --system est --ests 4 --level D1 --resume ck/  # on 2 ranks
    python -m lab.bench.easyscale --device cuda --model resnet50 --image-size 224  # a GPU each
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Sequence

from lab.bench.easyscale.config import DEVICES, LEVELS, MODELS, SYSTEMS, Config, parse_device
from lab.errors import ParameterError
from lab.metrics.records import emit, exit_now

IMPLEMENTATIONS = {
    "est": "EasyScaleThreads (lab, torch.distributed gloo)",
    "ddp": "DistributedDataParallel (torch.distributed gloo)",
    "plain": "gradient accumulation, one process (torch)",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.bench.easyscale", description=__doc__)
    p.add_argument("--system", default="est", help=", ".join(SYSTEMS))
    p.add_argument("--ests", type=int, default=4, help="logical workers of the job, for life")
    p.add_argument("--placement", default=None, help="ESTs per process, e.g. 2,1,1")
    p.add_argument("--level", default="D1", help=", ".join(LEVELS))
    p.add_argument("--devices", default="cpu:1:native", help="NAME:THREADS:ISA per process")
    p.add_argument("--reduce", default="canonical", help="DDP: canonical or vanilla")
    p.add_argument(
        "--no-switch",
        dest="switch",
        action="store_false",
        help="timing only: ESTs share one context",
    )
    p.add_argument("--model", default="bn_cnn", help=", ".join(MODELS))
    p.add_argument("--device", default="cpu", help=f"{', '.join(DEVICES)}: where ranks compute")
    p.add_argument("--backend", default="auto", help="auto, gloo or nccl")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--start-step", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--dataset-size", type=int, default=512)
    p.add_argument("--image-size", type=int, default=16)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--digest", action="store_true", help="hash the parameters every step")
    p.add_argument(
        "--ddp-beside",
        action="store_true",
        help="est on one process: time a one-rank DDP step after each step (Fig 13)",
    )
    p.add_argument("--save", default="", help="checkpoint directory to write at the end")
    p.add_argument("--resume", default="", help="checkpoint directory to start from")
    p.add_argument(
        "--stop-file",
        default="",
        help="end early (and checkpoint with --save) after the step during which this file "
        "appears: how a scheduler rescales a running job",
    )
    return p


def config_from_args(ns: argparse.Namespace, processes: int) -> Config:
    """The checked Config of parsed flags for a job of ``processes`` processes."""
    devices = tuple(parse_device(d) for d in ns.devices.split(","))
    fields = {k: v for k, v in vars(ns).items() if k != "devices"}
    return Config(processes=processes, devices=devices, **fields).checked()


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
    parser = _parser()
    ns = parser.parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    try:
        cfg = config_from_args(ns, world)
    except ParameterError as e:
        parser.error(str(e))
    from lab.bench.easyscale import determinism
    from lab.bench.easyscale import device as devmod
    from lab.bench.easyscale.config import parse_level

    d1, d2 = parse_level(cfg.level)
    device = cfg.device_of(rank)
    determinism.apply_env(determinism.process_env(device, d2, d1, cfg.device))
    import torch
    import torch.distributed as dist

    if cfg.device == "cuda" and not devmod.cuda_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this host")
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
