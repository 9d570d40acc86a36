"""The model and data every EST and every DDP rank trains on.

The data pipeline draws from all three random number generators a training script
usually touches (Python's ``random`` for flips, NumPy for noise, torch for crops, and
torch again for dropout), so an EST whose RNG state were shared or lost would show in its
loss at once. Batches are indexed in the training process (no loader workers), from a
``DistributedSampler`` whose ``num_replicas`` is the job's number of ESTs for life.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from lab.bench.easyscale.config import Config


def build_model(cfg: Config) -> Any:
    """``bn_cnn``: a small CNN with BatchNorm (per-EST buffers) and dropout (per-EST RNG);
    any other name: the torchvision paper model (lab.bench.vision_models)."""
    import torch.nn as nn

    if cfg.model != "bn_cnn":
        from lab.bench import vision_models

        return vision_models.build(cfg.model, cfg.num_classes)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(32, cfg.num_classes),
    )


POOL_BYTES = 64 * 2**20


class SyntheticImages:
    """A fixed set of random images and labels, with RNG-driven augmentation per read.

    The images are drawn once. A set that would take more than ``POOL_BYTES``
    (ImageNet-sized inputs at paper scale) repeats a pool of that many bytes of images, so
    image ``i`` is the same every time and on every device and costs an index, not a draw:
    drawing each 224-px image and its full-size NumPy noise when read took ~130 ms of a
    ResNet50 mini-batch of 32 on a GPU node, four times its compute. Labels stay one per
    index.
    """

    def __init__(self, cfg: Config) -> None:
        import torch

        gen = torch.Generator().manual_seed(cfg.seed)
        size, side = cfg.dataset_size, cfg.image_size
        self.side = side
        pool = max(1, min(size, POOL_BYTES // (3 * (side + 2) ** 2 * 4)))
        self.images = torch.randn(pool, 3, side + 2, side + 2, generator=gen)
        self.labels = torch.randint(0, cfg.num_classes, (size,), generator=gen)
        # batches bound for a GPU are made in page-locked memory: the copy of a ResNet50
        # batch of 32 at 224 px took 1.5 ms from pageable memory, 0.4 ms from pinned (H200)
        self.pin = cfg.device == "cuda"

    def __len__(self) -> int:
        return len(self.labels)

    def image(self, i: int) -> Any:
        """Image ``i`` before augmentation (3 x (side+2) x (side+2))."""
        return self.images[i % len(self.images)]

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        x, y = self.batch([i])
        return x[0], y[0]

    def batch(self, indices: list[int]) -> tuple[Any, Any]:
        """Items ``indices``, augmented, as one batch of images and one of labels.

        Each item draws its crop (torch), flip (Python) and noise (NumPy) in that order,
        and its noisy image is written straight into the batch: one pass over an image
        that is not flipped, two over one that is, where a stack of separately made
        items took one more each.
        """
        import numpy as np
        import torch

        side = self.side
        shape = (len(indices), self.images.shape[1], side, side)
        x = torch.empty(shape, dtype=self.images.dtype, pin_memory=self.pin)
        for k, i in enumerate(indices):
            dx, dy = (int(v) for v in torch.randint(0, 3, (2,)))
            img = self.image(i)[:, dy : dy + side, dx : dx + side]
            if random.random() < 0.5:
                img = img.flip(-1)
            # one NumPy draw per row and channel, broadcast along the row: it still
            # advances NumPy's generator on every read, at 1/side of a full-size draw
            noise = np.random.normal(0.0, 0.05, size=(img.shape[0], side, 1))
            torch.add(img, torch.from_numpy(noise.astype(np.float32)), out=x[k])
        return x, self.labels[list(indices)]


@dataclass
class Cursor:
    """Where one logical worker is in its shard: the epoch and the next index in it.
    ``order`` caches the epoch's shard (a checkpoint keeps epoch and offset only): drawing
    a 50,000-index permutation per mini-batch cost milliseconds per EST."""

    epoch: int = 0
    offset: int = 0
    order: tuple[int, list[int]] | None = field(default=None, repr=False, compare=False)


def next_batch(data: SyntheticImages, cfg: Config, worker: int, cursor: Cursor) -> Any:
    """The next mini-batch of logical worker ``worker`` (a virtual rank among cfg.ests)."""
    from torch.utils.data.distributed import DistributedSampler

    def shard(epoch: int) -> list[int]:
        if cursor.order is None or cursor.order[0] != epoch:
            sampler = DistributedSampler(
                data,
                num_replicas=cfg.ests,
                rank=worker,
                shuffle=True,
                seed=cfg.seed,
                drop_last=True,
            )
            sampler.set_epoch(epoch)
            cursor.order = (epoch, list(sampler))
        return cursor.order[1]

    order = shard(cursor.epoch)
    if cursor.offset + cfg.batch_size > len(order):
        cursor.epoch, cursor.offset = cursor.epoch + 1, 0
        order = shard(cursor.epoch)
    idx = order[cursor.offset : cursor.offset + cfg.batch_size]
    cursor.offset += cfg.batch_size
    return data.batch(idx)
