"""D1 on CUDA: the two pieces of a classification step torch has no deterministic GPU kernel for.

With ``torch.use_deterministic_algorithms(True)`` torch raises rather than run a
nondeterministic kernel, and two of them sit in every model here: the backward pass of
``AdaptiveAvgPool2d`` on CUDA (it adds with atomics; ResNet's, VGG's and bn_cnn's pooling)
and ``NLLLoss`` on CUDA (under ``cross_entropy``). At D1 on a GPU the lab replaces them with
the same mathematics through kernels torch lists as deterministic: a pooling whose windows
divide the input becomes ``avg_pool2d`` (or a mean when it pools to 1 x 1), and the loss is
``log_softmax`` then ``gather``. Every process of a job, ESTs and DDP ranks alike, makes the
same replacement, so their bits stay comparable; on the CPU nothing is replaced.
"""

from __future__ import annotations

from typing import Any


def pooling_module() -> Any:
    """The class replacing ``nn.AdaptiveAvgPool2d`` (built on first use: torch is imported
    inside functions only)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class DeterministicAdaptiveAvgPool2d(nn.Module):
        """``AdaptiveAvgPool2d`` where the input divides into equal windows, through
        ``avg_pool2d`` / ``mean``, whose CUDA backward passes gather instead of adding
        with atomics; any other input goes to the adaptive kernel as before."""

        def __init__(self, output_size: Any) -> None:
            super().__init__()
            self.output_size = output_size

        def forward(self, x: Any) -> Any:
            size = self.output_size
            oh, ow = (size, size) if isinstance(size, int) else size
            h, w = x.shape[-2:]
            oh, ow = oh or h, ow or w
            if (oh, ow) == (1, 1):
                return x.mean((-2, -1), keepdim=True)
            if h % oh == 0 and w % ow == 0:
                return F.avg_pool2d(x, (h // oh, w // ow))
            return F.adaptive_avg_pool2d(x, (oh, ow))

    return DeterministicAdaptiveAvgPool2d


def replace_pooling(model: Any) -> int:
    """Swap every ``nn.AdaptiveAvgPool2d`` of ``model`` for the deterministic one, in place;
    returns how many were swapped."""
    import torch.nn as nn

    cls = pooling_module()
    swapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.AdaptiveAvgPool2d):
                setattr(parent, name, cls(child.output_size))
                swapped += 1
    return swapped


def cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean cross-entropy as ``-log_softmax(logits)[i, label_i]``, through ``gather``
    (deterministic on CUDA) rather than ``nll_loss`` (which torch refuses at D1 on CUDA)."""
    logp = logits.log_softmax(dim=1)
    return -logp.gather(1, labels.unsqueeze(1)).mean()


def loss_function(device: Any, d1: bool) -> Any:
    """The loss every worker of a job uses: ``cross_entropy`` above at D1 on CUDA, torch's
    ``F.cross_entropy`` everywhere else."""
    import torch.nn.functional as F

    return cross_entropy if d1 and device.type == "cuda" else F.cross_entropy
