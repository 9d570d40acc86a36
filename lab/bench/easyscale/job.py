"""What every worker of a job starts from, EST and DDP rank alike: the model's first bits,
the loss function and the optimizer. Both loops (``runtime``, ``ddp``) import it, so
neither imports the other for them."""

from __future__ import annotations

from typing import Any

from lab.bench.easyscale import context as ctxmod
from lab.bench.easyscale import cuda_d1
from lab.bench.easyscale.config import Config, parse_level
from lab.bench.easyscale.workload import build_model


def make_optimizer(params: list[Any], cfg: Config) -> Any:
    """SGD with momentum and weight decay, the per-parameter loop (same code everywhere):
    torch's SGD arithmetic without the import of its compiler stack (``optim.SGD``)."""
    from lab.bench.easyscale.optim import SGD

    return SGD(params, lr=cfg.lr, momentum=0.9, weight_decay=5e-4)


def job_model(cfg: Config, device: Any = None) -> Any:
    """The model every worker starts from (same seed everywhere, initialised on the CPU so
    every device starts from the same bits), in training mode, on ``device``; at D1 on CUDA
    with deterministic pooling (``cuda_d1``)."""
    ctxmod.seed_all(cfg.seed)
    model = build_model(cfg).train()
    if device is None:
        return model
    if device.type == "cuda" and parse_level(cfg.level)[0]:
        cuda_d1.replace_pooling(model)
    return model.to(device)


def loss_of(cfg: Config, device: Any) -> Any:
    """The loss function of every worker of the job (``cuda_d1.loss_function``)."""
    return cuda_d1.loss_function(device, parse_level(cfg.level)[0])
