"""An EST's buffers are copied in and out in place, per dtype (lab.bench.easyscale.context)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lab.bench.easyscale.context import LiveBuffers, fresh_context  # noqa: E402


def _mixed_model() -> torch.nn.Module:
    """BatchNorm's float32 statistics and int64 counter, and a float64 buffer of its own."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    model.register_buffer("scale", torch.ones(2, dtype=torch.float64))
    return model


def test_live_buffers_group_by_dtype_and_name_every_buffer_once() -> None:
    model = _mixed_model()
    live = LiveBuffers(model)
    assert live.names == [n for n, _ in model.named_buffers()]
    kinds = [{live.tensors[i].dtype for i in g} for g in live.groups]
    assert all(len(k) == 1 for k in kinds) and len(kinds) == 3
    assert sorted(i for g in live.groups for i in g) == list(range(len(live.names)))
    assert all(t is model.get_buffer(n) for n, t in zip(live.names, live.tensors, strict=True))


def test_a_switch_puts_back_the_batchnorm_statistics_and_counters_of_the_est() -> None:
    model = _mixed_model()
    live = LiveBuffers(model)
    first = fresh_context(0, 1, live)
    model(torch.randn(2, 3, 8, 8))  # EST 0's micro-batch moves its statistics
    model.scale.mul_(3)
    first.capture(live)
    second = fresh_context(1, 1, live)
    model(torch.randn(2, 3, 8, 8) * 5)
    second.capture(live)
    first.restore(live)
    bn = model[1]
    assert int(bn.num_batches_tracked) == 1 and torch.equal(model.scale, torch.full((2,), 3.0))
    assert torch.equal(bn.running_var, first.buffers["1.running_var"])
    assert not torch.equal(bn.running_var, second.buffers["1.running_var"])
    second.restore(live)
    assert int(bn.num_batches_tracked) == 2 and torch.equal(model.scale, torch.full((2,), 3.0))


def test_switches_copy_into_the_tensors_already_held_and_never_replace_the_models() -> None:
    model = _mixed_model()
    live = LiveBuffers(model)
    held = [model.get_buffer(n) for n in live.names]
    ctx = fresh_context(0, 1, live)
    kept = {n: t.data_ptr() for n, t in ctx.buffers.items()}
    assert all(
        ctx.buffers[n].data_ptr() != t.data_ptr() for n, t in zip(live.names, held, strict=True)
    )
    for _ in range(3):
        model(torch.randn(2, 3, 8, 8))
        ctx.capture(live)
        ctx.restore(live)
    assert {n: t.data_ptr() for n, t in ctx.buffers.items()} == kept  # no clone after the first
    assert all(model.get_buffer(n) is t for n, t in zip(live.names, held, strict=True))
    assert torch.equal(ctx.buffers["1.running_mean"], model[1].running_mean)
