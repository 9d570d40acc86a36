"""EasyScaleThreads (EasyScale, SC'23) on torch.distributed (lab, gloo).

EasyScale's runtime was never published, so the lab implements its algorithm: a job keeps
N logical workers (ESTs) for life and places them on P <= N processes; each EST owns its
RNG state, sampler shard and BatchNorm buffers, which are switched in and out around its
mini-batch, and its gradient, kept apart until one sync sums the N gradients in EST-index
order whatever the placement. A rescale is a checkpoint and a restart with a new placement.
Modules: ``config`` (the stage's typed config, checked before anything starts),
``determinism`` (levels D0/D1/D2 and device types), ``workload`` (model and data),
``context`` (per-EST state and checkpoints), ``device`` (cpu or cuda: placement,
backend, timers, GPU memory), ``cuda_d1`` (deterministic stand-ins for the two kernels
torch refuses at D1 on CUDA), ``job`` (the model, loss and optimizer every worker starts
from), ``runtime`` (the EST loop), ``ddp`` (the DDP baselines), ``__main__`` (CLI).
"""

from lab.bench.easyscale.config import Config  # what lab.bench.flags checks a command with

__all__ = ["Config"]
