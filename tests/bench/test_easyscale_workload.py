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
