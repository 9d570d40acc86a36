"""An upstream-style Horovod PyTorch script: a synthetic benchmark with a checkpoint.

Written the way Horovod's PyTorch synthetic benchmark is (nothing lab-specific): after
``hvd.init()`` the optimizer is wrapped in ``hvd.DistributedOptimizer`` over the model's
named parameters, rank 0's parameters and optimizer state are broadcast, and each
iteration of a few batches on random images is timed with ``timeit``. Rank 0 reports
``Iter #k: X img/sec per CPU`` per iteration, then ``Img/sec per CPU: X +-Y`` and
``Total img/sec on N CPU(s): X +-Y``, and saves ``checkpoint.pt`` where it runs.

    python hvd_torch_loop.py [--batch-size 16] [--num-warmup-batches 2]
        [--num-batches-per-iter 4] [--num-iters 4]
"""

import argparse
import timeit

import horovod.torch as hvd
import numpy as np
import torch
import torch.nn.functional as F


def build_model(classes: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, classes),
    )


def main() -> None:
    p = argparse.ArgumentParser(description="Horovod PyTorch synthetic benchmark")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-warmup-batches", type=int, default=2)
    p.add_argument("--num-batches-per-iter", type=int, default=4)
    p.add_argument("--num-iters", type=int, default=4)
    p.add_argument("--fp16-allreduce", action="store_true")
    args = p.parse_args()

    hvd.init()
    torch.manual_seed(42)
    device = "CPU"

    model = build_model(10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size(), momentum=0.9)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(), compression=compression
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    data = torch.randn(args.batch_size, 3, 32, 32)
    target = torch.randint(0, 10, (args.batch_size,))

    def benchmark_step() -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    def log(text: str) -> None:
        if hvd.rank() == 0:
            print(text, flush=True)

    log(f"Model: small CNN, batch size: {args.batch_size}, ranks: {hvd.size()}")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)

    rates = []
    for k in range(args.num_iters):
        took = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / took
        log(f"Iter #{k}: {rate:.1f} img/sec per {device}")
        rates.append(rate)

    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    size = hvd.size()
    log(f"Img/sec per {device}: {mean:.1f} +-{conf:.1f}")
    log(f"Total img/sec on {size} {device}(s): {size * mean:.1f} +-{size * conf:.1f}")

    if hvd.rank() == 0:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save(state, "checkpoint.pt")
        print("saved checkpoint.pt", flush=True)


if __name__ == "__main__":
    main()
