"""An EST's buffers are copied in and out per dtype (lab.bench.easyscale.context)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lab.bench.easyscale.context import copy_buffers, fresh_context  # noqa: E402


def test_copy_buffers_puts_each_source_in_its_own_target_across_dtypes() -> None:
    targets = [torch.zeros(3), torch.zeros((), dtype=torch.int64),
               torch.zeros(2, dtype=torch.float64), torch.zeros(1)]  # fmt: skip
    sources = [torch.arange(3.0), torch.tensor(7),
               torch.tensor([1.5, 2.5], dtype=torch.float64), torch.tensor([9.0])]  # fmt: skip
    dtypes = [t.dtype for t in targets]
    copy_buffers(targets, sources)
    assert [t.dtype for t in targets] == dtypes
    assert all(torch.equal(t, s) for t, s in zip(targets, sources, strict=True))
    with pytest.raises(ValueError):
        copy_buffers(targets, sources[:-1])


def test_a_switch_puts_back_the_batchnorm_statistics_and_counters_of_the_est() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    first = fresh_context(0, 1, model)
    model(torch.randn(2, 3, 8, 8))  # EST 0's micro-batch moves its statistics
    first.capture(model)
    second = fresh_context(1, 1, model)
    model(torch.randn(2, 3, 8, 8) * 5)
    second.capture(model)
    first.restore(model)
    bn = model[1]
    assert int(bn.num_batches_tracked) == 1
    assert torch.equal(bn.running_var, first.buffers["1.running_var"])
    assert not torch.equal(bn.running_var, second.buffers["1.running_var"])
