"""EasyScale's synthetic data: the same image for an index everywhere, cheap at paper
size, and a cached shard that yields what the sampler would."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lab.bench.easyscale.config import Config  # noqa: E402
from lab.bench.easyscale.workload import POOL_BYTES, Cursor, SyntheticImages, next_batch  # noqa: E402


def test_a_paper_sized_set_repeats_a_pool_of_images() -> None:
    cfg = Config(dataset_size=50_000, image_size=224)
    data = SyntheticImages(cfg)
    pool = POOL_BYTES // (3 * 226 * 226 * 4)
    assert len(data) == 50_000 and len(data.images) == pool
    assert torch.equal(data.image(3), data.image(3 + pool))
    assert not torch.equal(data.image(3), data.image(4))
    assert torch.equal(SyntheticImages(cfg).image(5), data.image(5)), "same on every build"


def test_a_small_set_is_drawn_whole() -> None:
    data = SyntheticImages(Config(dataset_size=512, image_size=16))
    assert len(data.images) == 512
    assert not torch.equal(data.image(0), data.image(256))


def _sampler_labels(data: SyntheticImages, cfg: Config, worker: int, batches: int) -> list:
    from torch.utils.data.distributed import DistributedSampler

    out, epoch, offset = [], 0, 0
    for _ in range(batches):
        s = DistributedSampler(data, num_replicas=cfg.ests, rank=worker, shuffle=True,
                               seed=cfg.seed, drop_last=True)  # fmt: skip
        s.set_epoch(epoch)
        order = list(s)
        if offset + cfg.batch_size > len(order):
            epoch, offset = epoch + 1, 0
            s.set_epoch(epoch)
            order = list(s)
        out.append([int(data.labels[i]) for i in order[offset : offset + cfg.batch_size]])
        offset += cfg.batch_size
    return out


def test_the_cached_shard_yields_the_samplers_batches_across_epochs() -> None:
    cfg = Config(ests=4, batch_size=8, dataset_size=96, num_classes=1000)  # 3 batches an epoch
    data = SyntheticImages(cfg)
    cursor = Cursor()
    got = [next_batch(data, cfg, 1, cursor)[1].tolist() for _ in range(7)]
    assert got == _sampler_labels(data, cfg, 1, 7)
    assert cursor.epoch == 2


def test_a_cursor_rebuilt_from_epoch_and_offset_goes_on_alike() -> None:
    cfg = Config(ests=2, batch_size=8, dataset_size=64, num_classes=1000)
    data = SyntheticImages(cfg)
    a = Cursor()
    for _ in range(5):
        next_batch(data, cfg, 0, a)
    b = Cursor(a.epoch, a.offset)  # what a checkpoint keeps
    assert next_batch(data, cfg, 0, b)[1].tolist() == next_batch(data, cfg, 0, a)[1].tolist()


def _augmented(data: SyntheticImages, i: int, side: int) -> object:
    """Item ``i`` as the workload documents it: a crop (torch draw), a flip (Python
    draw), then noise per row and channel (NumPy draw)."""
    import random

    import numpy as np

    dx, dy = (int(v) for v in torch.randint(0, 3, (2,)))
    img = data.image(i)[:, dy : dy + side, dx : dx + side]
    if random.random() < 0.5:
        img = img.flip(-1)
    noise = np.random.normal(0.0, 0.05, size=(img.shape[0], side, 1))
    return img + torch.from_numpy(noise.astype(np.float32))


def test_a_batch_has_the_bits_and_draws_of_its_items_augmented_one_by_one() -> None:
    from lab.bench.easyscale.context import seed_all

    data = SyntheticImages(Config(dataset_size=512, image_size=16))
    indices = [5, 300, 5, 77, 511, 0, 128, 9]
    seed_all(3)
    x, y = data.batch(indices)
    after_batch = torch.get_rng_state()
    seed_all(3)
    expected = torch.stack([_augmented(data, i, 16) for i in indices])
    assert torch.equal(x, expected)
    assert torch.equal(torch.get_rng_state(), after_batch), "the same draws, in the same order"
    assert y.tolist() == [int(data.labels[i]) for i in indices]
    seed_all(3)
    one = data[indices[0]]
    assert torch.equal(one[0], expected[0]) and int(one[1]) == y[0]
