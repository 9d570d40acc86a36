"""The synthetic benchmark on PyTorch: ``python -m lab.bench.torch_synthetic``.

The same records as ``lab.bench.synthetic`` (header, one step record per step, summary,
Horovod's human lines), on ``torch.distributed`` (Gloo on CPU, NCCL on GPU). It is the
lab's GPU path on nodes where TensorFlow is not installed, and the base of the PyTorch
papers' workloads. Ranks read RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (the ``local`` and
``torchrun`` launchers set them). ``--monitor noise-scale`` all-reduces gradients by hand
(as Horovod does) so the local gradient is seen before averaging; otherwise DDP is used.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from lab.bench.synthetic import Config
from lab.errors import ParameterError

SMOKE_MODELS = ("tiny_cnn",)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.bench.torch_synthetic", description=__doc__)
    p.add_argument("--model", default="tiny_cnn", help="tiny_cnn or a torchvision model name")
    p.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    p.add_argument(
        "--micro-batches",
        type=int,
        default=1,
        help="batches run one after another per step before one optimizer step (as K logical "
        "workers time-sharing one device); a step's samples are K x batch size",
    )
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--monitor", choices=("none", "noise-scale"), default="none")
    p.add_argument("--interval", type=int, default=1)
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format (GPU)")
    p.add_argument("--amp", action="store_true", help="bfloat16 autocast (GPU)")
    return p


def build_model(name: str, num_classes: int) -> Any:
    """``tiny_cnn`` (always there) or any torchvision classification model by name."""
    import torch.nn as nn

    if name == "tiny_cnn":
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(16, num_classes),
        )
    try:
        import torchvision.models as tvm
    except Exception as e:  # torchvision missing, or built for another torch
        raise ParameterError(
            "model", name, f"{', '.join(SMOKE_MODELS)} (torchvision is unavailable here: {e})"
        ) from None
    names = sorted(tvm.list_models(module=tvm))
    if name not in names:
        raise ParameterError("model", name, ", ".join([*SMOKE_MODELS, *names]))
    return tvm.get_model(name, weights=None, num_classes=num_classes)


def _setup_dist(device_kind: str) -> tuple[int, int, int]:
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if world > 1 or "MASTER_ADDR" in os.environ:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        backend = "nccl" if device_kind == "cuda" else "gloo"
        dist.init_process_group(backend, rank=rank, world_size=world)
    return rank, world, local


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    ns = parser.parse_args(argv)
    for flag in ("batch_size", "micro_batches", "steps", "image_size", "interval"):
        if getattr(ns, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')}={getattr(ns, flag)} must be >= 1")
    import torch
    import torch.distributed as dist

    from lab.bench.backends.common import Reporter, freeze_garbage
    from lab.bench.monitors import NoiseScaleEMA, noise_scale_terms

    kind = ns.device if ns.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no GPU is visible to PyTorch")
    rank, world, local = _setup_dist(kind)
    device = (
        torch.device(kind, local % max(torch.cuda.device_count(), 1))
        if kind == "cuda"
        else torch.device("cpu")
    )
    if kind == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    if ns.monitor != "none" and world < 2:
        parser.error(
            "--monitor noise-scale needs >= 2 ranks (it compares local and global gradients)"
        )
    torch.manual_seed(ns.seed)
    try:
        model = build_model(ns.model, ns.num_classes).to(device)
    except ParameterError as e:
        parser.error(str(e))
    if ns.channels_last:
        model = model.to(memory_format=torch.channels_last)
    use_ddp = world > 1 and ns.monitor == "none"
    net = torch.nn.parallel.DistributedDataParallel(model) if use_ddp else model
    opt = torch.optim.SGD(net.parameters(), lr=ns.lr)
    gen = torch.Generator(device="cpu").manual_seed(ns.seed * 1000 + rank)
    images = torch.rand(ns.batch_size, 3, ns.image_size, ns.image_size, generator=gen).to(device)
    if ns.channels_last:
        images = images.to(memory_format=torch.channels_last)
    labels = torch.randint(0, ns.num_classes, (ns.batch_size,), generator=gen).to(device)
    cfg = Config(
        model=ns.model,
        batch_size=ns.batch_size * ns.micro_batches,
        image_size=ns.image_size,
        num_classes=ns.num_classes,
        warmup_steps=ns.warmup_steps,
        steps=ns.steps,
        lr=ns.lr,
        seed=ns.seed,
        backend="torch-ddp",
        monitor=ns.monitor,
        interval=ns.interval,
    )
    dev_word = "GPU" if kind == "cuda" else "CPU"
    reporter = Reporter(cfg, rank, world, dev_word, root=rank == 0)
    name = torch.cuda.get_device_name(device) if kind == "cuda" else "cpu"
    reporter.header(
        sum(p.numel() for p in model.parameters()),
        engine="torch.distributed",
        torch=torch.__version__,
        device_name=name,
        amp=ns.amp,
        micro_batches=ns.micro_batches,
    )
    ema = NoiseScaleEMA()
    params = [p for p in model.parameters() if p.requires_grad]

    def sync() -> None:
        if kind == "cuda":
            torch.cuda.synchronize(device)

    for i in range(ns.warmup_steps + ns.steps):
        if i == ns.warmup_steps:
            freeze_garbage(rank)  # as run_steps: no full collection in a timed step
        sync()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for _ in range(ns.micro_batches):
            with torch.autocast(kind, dtype=torch.bfloat16, enabled=ns.amp):
                loss = torch.nn.functional.cross_entropy(net(images), labels)
            loss.backward()
        measured = ns.monitor != "none" and i % ns.interval == 0
        if world > 1 and not use_ddp:
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            small_sq = float(flat.float().pow(2).sum()) if measured else 0.0
            dist.all_reduce(flat)
            flat /= world
            offset = 0
            for p in params:
                n = p.numel()
                p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
                offset += n
            if measured:
                big_sq = float(flat.float().pow(2).sum())
                g_sq, s = noise_scale_terms(small_sq, big_sq, ns.batch_size, ns.batch_size * world)
                value = ema.update(g_sq, s)
                if value is not None:
                    reporter.metric("noise_scale", value, i)
        opt.step()
        value = float(loss.detach())  # waits for the step
        sync()
        reporter.step(i, time.perf_counter() - start, value)
    reporter.summary()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
