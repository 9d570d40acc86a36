"""The synthetic benchmark on PyTorch: ``python -m lab.bench.torch_synthetic``.

The same records as ``lab.bench.synthetic`` (header, one step record per step, summary,
Horovod's human lines), with one of three engines (``--backend``, lab.bench.torch_engines):
DistributedDataParallel on ``torch.distributed`` (Gloo on CPU, NCCL on GPU), Horovod's
PyTorch API, or one worker alone. It is the lab's GPU path on nodes where TensorFlow is not
installed, and the base of the PyTorch papers' workloads. ``--monitor noise-scale``
all-reduces gradients by hand so the local gradient is seen before averaging.

Models: the lab's two small CNNs (``tiny_cnn``, ``small_cnn``: the layers of their
TensorFlow namesakes in lab.bench.models) and, where torchvision is installed, its
classification models, also by their Keras names (``ResNet50`` is ``resnet50``,
``MobileNetV2`` ``mobilenet_v2``), so one point names one model for both frameworks.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

from lab.bench.config import WorkloadConfig, flag
from lab.bench.torch_engines import ENGINES
from lab.errors import ParameterError, require_at_least, require_positive
from lab.metrics.records import exit_now

SMOKE_MODELS = ("tiny_cnn", "small_cnn")
DEVICES = ("auto", "cpu", "cuda")
MONITORS = ("none", "noise-scale")


@dataclasses.dataclass(frozen=True)
class Config(WorkloadConfig):
    """The workload's settings; a model name other than the small CNNs is checked where
    torchvision is imported (the rank)."""

    MODULE = "lab.bench.torch_synthetic"
    DESCRIPTION = __doc__.splitlines()[0]

    backend: str = flag("torch-ddp", ", ".join(ENGINES))
    model: str = flag("tiny_cnn", "tiny_cnn, small_cnn or a torchvision model name")
    batch_size: int = flag(32, "per-rank batch size")
    micro_batches: int = flag(
        1,
        "batches run one after another per step before one optimizer step (as K logical "
        "workers time-sharing one device); a step's samples are K x batch size",
    )
    image_size: int = flag(32, "square input size")
    num_classes: int = flag(10, "classes of the random labels")
    warmup_steps: int = flag(3, "steps run before timing counts")
    steps: int = flag(15, "timed steps")
    lr: float = flag(0.01, "learning rate")
    seed: int = flag(1, "model and data seed")
    device: str = flag("auto", ", ".join(DEVICES))
    monitor: str = flag("none", ", ".join(MONITORS))
    interval: int = flag(1, "compute the monitor every K steps")
    channels_last: bool = flag(False, "NHWC memory format (GPU)")
    amp: bool = flag(False, "bfloat16 autocast (GPU)")

    def checked(self) -> Config:
        for name, value, allowed in (
            ("backend", self.backend, ENGINES),
            ("device", self.device, DEVICES),
            ("monitor", self.monitor, MONITORS),
        ):
            if value not in allowed:
                raise ParameterError(name, value, ", ".join(allowed))
        require_at_least(
            ("batch_size", self.batch_size, 1),
            ("micro_batches", self.micro_batches, 1),
            ("steps", self.steps, 1),
            ("warmup_steps", self.warmup_steps, 0),
            ("image_size", self.image_size, 1),
            ("num_classes", self.num_classes, 2),
            ("interval", self.interval, 1),
        )
        require_positive(("lr", self.lr))
        return self

    def described(self) -> dict[str, Any]:
        """What a rank's ``header`` record says (lab.bench.backends.common.Reporter)."""
        return {
            "model": self.model,
            "backend": self.backend,
            "batch_size": self.batch_size,
            "image_size": self.image_size,
            "num_classes": self.num_classes,
            "optimizer": "sgd",
            "lr": self.lr,
            "warmup_steps": self.warmup_steps,
            "steps": self.steps,
            "monitor": self.monitor,
            "interval": self.interval,
            "alternate": 0,
            "seed": self.seed,
        }


def build_model(name: str, num_classes: int) -> Any:
    """A small CNN of the lab's, or a torchvision classification model by its name or its
    Keras name (random weights)."""
    import torch.nn as nn

    if name in SMOKE_MODELS:
        width = 16 if name == "tiny_cnn" else 128  # the last convolution's channels
        return nn.Sequential(*_smoke_layers(nn, name), nn.Flatten(), nn.Linear(width, num_classes))
    from lab.bench import vision_models

    try:
        tvm = vision_models.torchvision_models()
    except Exception as e:  # torchvision missing, or built for another torch
        raise ParameterError(
            "model", name, f"{', '.join(SMOKE_MODELS)} (torchvision is unavailable here: {e})"
        ) from None
    names = sorted(tvm.list_models(module=tvm))
    found = torchvision_name(name, names)
    if found is None:
        raise ParameterError("model", name, ", ".join([*SMOKE_MODELS, *names]))
    kwargs = next((dict(m.kwargs) for m in vision_models.MODELS.values() if m.builder == found), {})
    return tvm.get_model(found, weights=None, num_classes=num_classes, **kwargs)


def torchvision_name(name: str, names: Sequence[str]) -> str | None:
    """``name`` among torchvision's ``names``, also as Keras spells it (``MobileNetV2``:
    ``mobilenet_v2``); None when there is none."""
    if name in names:
        return name
    key = name.lower().replace("_", "")
    return next((n for n in names if n.replace("_", "") == key), None)


def _smoke_layers(nn: Any, name: str) -> list[Any]:
    """The body of ``tiny_cnn`` or ``small_cnn`` (lab.bench.models' layers), pooled."""
    if name == "tiny_cnn":
        body = [
            nn.Conv2d(3, 8, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
        ]
    else:
        body = []
        for cin, cout, stride in ((3, 32, 1), (32, 64, 2), (64, 128, 2)):
            body += [
                nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(),
            ]
        body += [nn.Conv2d(128, 128, 3, padding=1), nn.ReLU()]
    return [*body, nn.AdaptiveAvgPool2d(1)]


def main(argv: Sequence[str] | None = None) -> int:
    cfg = Config.main_config(argv)
    import torch

    from lab.bench import torch_engines
    from lab.bench.backends import EngineUnavailable
    from lab.bench.backends.common import Reporter, freeze_garbage
    from lab.bench.monitors import NoiseScaleEMA, noise_scale_terms
    from lab.bench.shares_wait import wait_before_step

    kind = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        Config.usage_error("--device cuda: no GPU is visible to PyTorch")
    try:
        engine = torch_engines.start(cfg.backend, kind)
    except EngineUnavailable as e:
        print(f"python -m {Config.MODULE}: error: {e}", file=sys.stderr, flush=True)
        return 2
    rank, world = engine.rank, engine.world
    device = (
        torch.device(kind, engine.local_rank % max(torch.cuda.device_count(), 1))
        if kind == "cuda"
        else torch.device("cpu")
    )
    if kind == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    if cfg.monitor != "none" and world < 2:
        Config.usage_error(
            "--monitor noise-scale needs >= 2 ranks (it compares local and global gradients)"
        )
    torch.manual_seed(cfg.seed)
    try:
        model = build_model(cfg.model, cfg.num_classes).to(device)
    except ParameterError as e:
        Config.usage_error(str(e))
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    by_hand = world > 1 and cfg.monitor != "none"
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    net, opt = engine.wrap(model, opt, by_hand, cfg.micro_batches)
    gen = torch.Generator(device="cpu").manual_seed(cfg.seed * 1000 + rank)
    images = torch.rand(cfg.batch_size, 3, cfg.image_size, cfg.image_size, generator=gen).to(device)
    if cfg.channels_last:
        images = images.to(memory_format=torch.channels_last)
    labels = torch.randint(0, cfg.num_classes, (cfg.batch_size,), generator=gen).to(device)
    # the reporter counts a step's samples: its micro-batches' together
    per_step = dataclasses.replace(cfg, batch_size=cfg.batch_size * cfg.micro_batches)
    dev_word = "GPU" if kind == "cuda" else "CPU"
    reporter = Reporter(per_step, rank, world, dev_word, root=rank == 0)
    name = torch.cuda.get_device_name(device) if kind == "cuda" else "cpu"
    reporter.header(
        sum(p.numel() for p in model.parameters()),
        **engine.fields,
        torch=torch.__version__,
        device_name=name,
        amp=cfg.amp,
        micro_batches=cfg.micro_batches,
    )
    ema = NoiseScaleEMA()
    params = [p for p in model.parameters() if p.requires_grad]

    def sync() -> None:
        if kind == "cuda":
            torch.cuda.synchronize(device)

    for i in range(cfg.warmup_steps + cfg.steps):
        if i == cfg.warmup_steps:
            freeze_garbage(rank)  # as run_steps: no full collection in a timed step
        wait_before_step(i, cfg.warmup_steps, rank)  # an emulated host's share, as run_loop
        sync()
        start = time.perf_counter()
        opt.zero_grad()  # None grads (torch>=2 default); Horovod's wrapper takes no argument
        for _ in range(cfg.micro_batches):
            with torch.autocast(kind, dtype=torch.bfloat16, enabled=cfg.amp):
                loss = torch.nn.functional.cross_entropy(net(images), labels)
            loss.backward()
        measured = cfg.monitor != "none" and i % cfg.interval == 0
        if by_hand:
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            small_sq = float(flat.float().pow(2).sum()) if measured else 0.0
            engine.average(flat)
            offset = 0
            for p in params:
                n = p.numel()
                p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
                offset += n
            if measured:
                big_sq = float(flat.float().pow(2).sum())
                g_sq, s = noise_scale_terms(
                    small_sq, big_sq, cfg.batch_size, cfg.batch_size * world
                )
                value = ema.update(g_sq, s)
                if value is not None:
                    reporter.metric("noise_scale", value, i)
        opt.step()
        value = float(loss.detach())  # waits for the step
        sync()
        reporter.step(i, time.perf_counter() - start, value)
    reporter.summary()
    engine.shutdown()
    return 0


if __name__ == "__main__":
    exit_now(main())
