"""One P3 run's settings: checked before launch (``check``) and turned into the ranks'
command line (``argv``), so the lab side and the ranks read the same flags."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lab.bench.p3.models import PAPER_MODELS, SMOKE_MODELS
from lab.bench.p3.schedule import (
    MXNET_BIGARRAY_BOUND,
    P3_SLICE_ELEMENTS,
    check_schedule,
    check_servers,
    check_slice_elements,
)
from lab.errors import ParameterError

DEFAULT_SOCKBUF = 131_072


@dataclass(frozen=True)
class P3Config:
    """Settings of ``python -m lab.bench.p3``.

    Args:
        schedule: ``baseline``, ``slicing`` or ``p3``.
        model: a name from ``lab.bench.p3.models``.
        batch_size: images per worker and step.
        image_size: input side (32 at smoke scale, 224 or 299 at paper scale).
        steps: timed steps; ``warmup_steps`` come first and are not timed.
        slice_elements: slice size of ``slicing``/``p3`` (P3's code: 40,000).
        servers: server shards, on the first hosts; None for one per host.
        big_bound: the size from which ``baseline`` splits a tensor over the servers.
        lr: SGD learning rate, applied to the sum of the workers' gradients.
        sockbuf: SO_SNDBUF/SO_RCVBUF of every socket, bytes (0: the kernel's defaults).
        trace_steps: how many of the last steps emit per-slice and per-layer records.
        seed: initialisation and data seed.
        dump: a directory where every rank saves its final parameters (tests).
    """

    schedule: str = "p3"
    model: str = "vgg_like"
    batch_size: int = 16
    image_size: int = 32
    steps: int = 8
    warmup_steps: int = 2
    slice_elements: int = P3_SLICE_ELEMENTS
    servers: int | None = None
    big_bound: int = MXNET_BIGARRAY_BOUND
    lr: float = 0.01
    sockbuf: int = DEFAULT_SOCKBUF
    trace_steps: int = 2
    seed: int = 1
    dump: str | None = None

    def check(self, hosts: int) -> P3Config:
        """Raise ParameterError, naming the parameter, for anything that cannot run on
        ``hosts`` hosts; return self."""
        check_schedule(self.schedule)
        check_slice_elements(self.slice_elements)
        if self.model not in (*SMOKE_MODELS, *PAPER_MODELS):
            raise ParameterError("model", self.model, ", ".join((*SMOKE_MODELS, *PAPER_MODELS)))
        if self.servers is not None:
            check_servers(self.servers, hosts)
        for name, low in (("batch_size", 1), ("image_size", 8), ("steps", 1), ("big_bound", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(name, value, f"an integer >= {low}")
        for name in ("warmup_steps", "trace_steps", "sockbuf"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ParameterError(name, value, "an integer >= 0")
        if not self.lr > 0:
            raise ParameterError("lr", self.lr, "a number > 0")
        return self

    def argv(self, python: str = "python") -> list[str]:
        """The rank command: ``python -m lab.bench.p3 --schedule ... --model ...``."""
        out = [python, "-m", "lab.bench.p3"]
        for name, value in asdict(self).items():
            if value is not None:
                out += [f"--{name.replace('_', '-')}", str(value)]
        return out
