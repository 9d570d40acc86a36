"""How the PyTorch synthetic workload's ranks train together: one engine per ``--backend``.

* ``torch-ddp``: ``torch.distributed`` (Gloo on CPU, NCCL on GPU) with
  DistributedDataParallel, as torchrun's examples do; ranks read RANK/WORLD_SIZE/
  MASTER_ADDR/MASTER_PORT (the ``local`` and ``torchrun`` launchers set them).
* ``horovod-torch``: Horovod's PyTorch API as its ``pytorch_synthetic_benchmark.py`` uses it:
  ``hvd.init()``, ``hvd.DistributedOptimizer`` over the model's named parameters, and rank
  0's parameters and optimizer state broadcast before the first step; rank and size come
  from Horovod (mpirun's or horovodrun's environment).
* ``torch-single``: one process, no communication: the ideal that KungFu's Fig 9 multiplies
  by N for the PyTorch systems, as ``single`` is for the TensorFlow ones.

Where a monitor needs each rank's own gradient before averaging, the workload averages the
flattened gradient itself through ``average`` (the engine's all-reduce) instead of letting
DDP or Horovod's optimizer do it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from lab.bench.backends import EngineUnavailable

ENGINES = ("torch-ddp", "horovod-torch", "torch-single")


@dataclass
class Engine:
    """One rank's view of its engine.

    Args:
        name: one of ``ENGINES``.
        rank: this rank.
        world: the number of ranks.
        local_rank: this rank's index on its host (which GPU it takes).
        hvd: ``horovod.torch`` for ``horovod-torch``, else None.
    """

    name: str
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    hvd: Any = None
    fields: dict[str, Any] = field(default_factory=dict)

    def wrap(self, model: Any, opt: Any, by_hand: bool, passes: int) -> tuple[Any, Any]:
        """(the module to call, the optimizer to step). ``by_hand``: the workload averages
        gradients itself (``average``), so neither DDP nor Horovod's optimizer does.
        ``passes``: backward passes per optimizer step (micro-batches)."""
        if self.world < 2:
            return model, opt
        if self.hvd is not None:
            hvd = self.hvd
            hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            if not by_hand:
                opt = hvd.DistributedOptimizer(
                    opt,
                    named_parameters=model.named_parameters(),
                    backward_passes_per_step=passes,
                )
            hvd.broadcast_optimizer_state(opt, root_rank=0)
            return model, opt
        if by_hand:
            return model, opt
        import torch

        return torch.nn.parallel.DistributedDataParallel(model), opt

    def average(self, flat: Any) -> None:
        """Replace ``flat`` (a tensor) by its mean over the ranks, in place."""
        if self.world < 2:
            return
        if self.hvd is not None:
            self.hvd.allreduce_(flat, op=self.hvd.Average)
            return
        import torch.distributed as dist

        dist.all_reduce(flat)
        flat /= self.world

    def shutdown(self) -> None:
        if self.hvd is not None:
            self.hvd.shutdown()
            return
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def start(name: str, device_kind: str) -> Engine:
    """Initialise engine ``name`` for a rank on ``device_kind`` (``cpu`` or ``cuda``).

    Raises:
        EngineUnavailable: Horovod is missing, or was built without PyTorch.
    """
    if name == "torch-single":
        return Engine(name, fields={"engine": "none (one worker)"})
    if name == "horovod-torch":
        hvd = import_horovod_torch()
        hvd.init()
        controller = "gloo" if hvd.gloo_enabled() else "mpi" if hvd.mpi_enabled() else "unknown"
        return Engine(
            name,
            hvd.rank(),
            hvd.size(),
            hvd.local_rank(),
            hvd=hvd,
            fields={"engine": "horovod.torch", "controller": controller},
        )
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    backend = "nccl" if device_kind == "cuda" else "gloo"
    if world > 1 or "MASTER_ADDR" in os.environ:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group(backend, rank=rank, world_size=world)
    return Engine(name, rank, world, local, fields={"engine": f"torch.distributed ({backend})"})


def import_horovod_torch() -> Any:
    """``horovod.torch``, or EngineUnavailable saying how to get a Horovod built with it."""
    try:
        import horovod.torch as hvd
    except ImportError as exc:
        raise EngineUnavailable(
            f"Horovod's PyTorch API is not usable on this node ({exc}); build Horovod "
            "against this torch: HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 pip install "
            "--no-build-isolation horovod==0.28.1 (make setup does it here)"
        ) from exc
    return hvd
