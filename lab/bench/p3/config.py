"""One P3 run's settings as the workload's typed config (lab.bench.config): the rank
parses its flags with it, the lab checks a point with it before launch and writes the
ranks' command from it, so both sides read the same flags."""

from __future__ import annotations

import dataclasses

from lab.bench.config import WorkloadConfig, flag
from lab.bench.p3.models import PAPER_MODELS, SMOKE_MODELS
from lab.bench.p3.schedule import (
    MXNET_BIGARRAY_BOUND,
    P3_SLICE_ELEMENTS,
    SCHEDULES,
    check_schedule,
    check_servers,
    check_slice_elements,
)
from lab.errors import ParameterError, require_positive

DEFAULT_SOCKBUF = 131_072


@dataclasses.dataclass(frozen=True)
class P3Config(WorkloadConfig):
    """Settings of ``python -m lab.bench.p3`` (see ``--help``). ``checked()`` checks what
    needs no cluster; ``check(hosts)`` also the servers against the hosts."""

    MODULE = "lab.bench.p3"
    DESCRIPTION = "P3's synchronous parameter server on torch.distributed (one rank a host)."

    schedule: str = flag("p3", ", ".join(SCHEDULES))
    model: str = flag("vgg_like", "a name from lab.bench.p3.models")
    batch_size: int = flag(16, "images per worker and step")
    image_size: int = flag(32, "input side (32 at smoke scale, 224 or 299 at paper scale)")
    steps: int = flag(8, "timed steps")
    warmup_steps: int = flag(2, "untimed steps before them")
    slice_elements: int = flag(P3_SLICE_ELEMENTS, "slice size of slicing and p3")
    servers: int | None = flag(None, "server shards, on the first hosts (None: one a host)")
    big_bound: int = flag(
        MXNET_BIGARRAY_BOUND, "the size from which baseline splits a tensor over the servers"
    )
    lr: float = flag(0.01, "SGD learning rate, applied to the sum of the workers' gradients")
    sockbuf: int = flag(DEFAULT_SOCKBUF, "SO_SNDBUF/SO_RCVBUF of every socket (0: the kernel's)")
    trace_steps: int = flag(2, "how many of the last steps emit per-slice and per-layer records")
    alternate: int = flag(
        0,
        "K > 0: alternate baseline and the schedule every K timed steps in this one run, "
        "each step tagged with its schedule (the cost of a schedule against baseline, "
        "paired within a run); 0: the schedule throughout",
    )
    seed: int = flag(1, "initialisation and data seed")
    dump: str | None = flag(None, "a directory where every rank saves its final parameters")
    profile: str | None = flag(
        None, "a directory where every rank writes a CPU profile of all its threads (rank<N>.prof)"
    )

    def checked(self) -> P3Config:
        """This config if every setting can run on some cluster; ParameterError naming
        the first that cannot."""
        check_schedule(self.schedule)
        check_slice_elements(self.slice_elements)
        if self.model not in (*SMOKE_MODELS, *PAPER_MODELS):
            raise ParameterError("model", self.model, ", ".join((*SMOKE_MODELS, *PAPER_MODELS)))
        for name, low in (("batch_size", 1), ("image_size", 8), ("steps", 1), ("big_bound", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(name, value, f"an integer >= {low}")
        for name in ("warmup_steps", "trace_steps", "sockbuf", "alternate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ParameterError(name, value, "an integer >= 0")
        if self.alternate and self.schedule == "baseline":
            raise ParameterError("alternate", self.alternate, "0 with schedule baseline")
        require_positive(("lr", self.lr))
        return self

    def check(self, hosts: int) -> P3Config:
        """``checked()`` and the servers placed on ``hosts`` hosts (one a host at most);
        ParameterError naming the parameter; returns self."""
        self.checked()
        if self.servers is not None:
            check_servers(self.servers, hosts)
        return self
