"""P3's pure scheduling rules: key plans per schedule, placement, queue order, checks."""

from __future__ import annotations

import itertools
import threading

import pytest

from lab.bench.p3.config import P3Config
from lab.bench.p3.schedule import SendQueue, Tensor, even_parts, plan_keys, slices
from lab.errors import ParameterError

# a VGG-ish shape: small conv tensors, one giant fc tensor, a small last layer
MODEL = [
    Tensor("conv1.w", 864, 0),
    Tensor("conv1.b", 32, 0),
    Tensor("fc6.w", 2_097_152, 1),
    Tensor("fc6.b", 1024, 1),
    Tensor("fc8.w", 100_000, 2),
]


def covers(keys, tensor_index: int, numel: int) -> bool:
    spans = sorted((k.start, k.stop) for k in keys if k.tensor == tensor_index)
    return (
        spans[0][0] == 0
        and spans[-1][1] == numel
        and all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    )


def test_slices_and_parts_cover_exactly() -> None:
    assert slices(100_001, 40_000) == [(0, 40_000), (40_000, 80_000), (80_000, 100_001)]
    assert even_parts(10, 3) == [(0, 3), (3, 7), (7, 10)]
    assert slices(5, 40_000) == [(0, 5)]


def test_baseline_splits_only_big_tensors_one_part_per_server() -> None:
    keys = plan_keys(MODEL, "baseline", servers=2)
    fc6 = [k for k in keys if k.tensor == 2]
    assert [(k.numel, k.server) for k in fc6] == [(1_048_576, 0), (1_048_576, 1)]
    assert all(len([k for k in keys if k.tensor == t]) == 1 for t in (0, 1, 3, 4))
    # MXNet's placement of whole tensors: (key * 9973) % servers
    assert [k.server for k in keys if k.tensor != 2] == [0, 1, 1, 0]
    assert all(covers(keys, i, t.numel) for i, t in enumerate(MODEL))


@pytest.mark.parametrize("schedule", ["slicing", "p3"])
def test_slicing_cuts_every_big_tensor_round_robin(schedule: str) -> None:
    keys = plan_keys(MODEL, schedule, servers=3, slice_elements=40_000)
    fc6 = [k for k in keys if k.tensor == 2]
    assert len(fc6) == 53 and max(k.numel for k in fc6) == 40_000
    assert [k.server for k in fc6[:6]] == [0, 1, 2, 0, 1, 2]
    assert [k.numel for k in keys if k.tensor == 4] == [40_000, 40_000, 20_000]
    assert [k.id for k in keys] == list(range(len(keys)))
    assert all(covers(keys, i, t.numel) for i, t in enumerate(MODEL))
    assert {k.layer for k in fc6} == {1}


def test_priority_queue_puts_the_input_side_first_and_fifo_keeps_order() -> None:
    arrivals = [("fc8", 2), ("fc6-a", 1), ("fc6-b", 1), ("conv1", 0), ("fc6-c", 1)]
    for by_priority, want in (
        (True, ["conv1", "fc6-a", "fc6-b", "fc6-c", "fc8"]),
        (False, ["fc8", "fc6-a", "fc6-b", "conv1", "fc6-c"]),
    ):
        q: SendQueue[str] = SendQueue(by_priority)
        for item, layer in arrivals:
            q.put(item, layer)
        assert [q.get() for _ in arrivals] == want


def test_queue_get_blocks_until_put_or_close() -> None:
    q: SendQueue[str] = SendQueue(True)
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.extend([q.get(), q.get()]))
    t.start()
    q.put("x", 3)
    q.close()
    t.join(timeout=5)
    assert got == ["x", None]


@pytest.mark.parametrize(
    ("changes", "hosts", "name"),
    [
        ({"slice_elements": 0}, 2, "slice_elements"),
        ({"schedule": "fifo"}, 2, "schedule"),
        ({"servers": 3}, 2, "servers"),
        ({"model": "alexnet"}, 2, "model"),
        ({"batch_size": 0}, 2, "batch_size"),
        ({"alternate": -1}, 2, "alternate"),
        ({"alternate": 4, "schedule": "baseline"}, 2, "alternate"),  # nothing to alternate with
    ],
)
def test_bad_settings_name_their_parameter(changes: dict, hosts: int, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        P3Config(**changes).check(hosts)
    assert err.value.name == name


def test_argv_round_trips_the_settings() -> None:
    cfg = P3Config(schedule="slicing", slice_elements=50_000, servers=2)
    argv = cfg.check(2).command("py")
    assert argv[:3] == ["py", "-m", "lab.bench.p3"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert flags["--schedule"] == "slicing" and flags["--slice-elements"] == "50000"
    assert flags["--servers"] == "2" and "--dump" not in flags


def test_closing_a_worker_and_a_server_ends_their_threads() -> None:
    """A thread still alive at interpreter exit is stopped inside torch and aborted the
    process after its last record: close() drains the queues and waits for the threads."""
    from lab.bench.p3.ps import Server, Trace, Worker

    sent: list[tuple] = []
    worker = Worker(0, [], [], False, False, lambda *m: sent.append(m), Trace([]))
    server = Server(0, [], {}, 1, 0.1, False, False, lambda *m: sent.append(m), Trace([]))
    worker.queue.put((0, 0, 0, 0, None))  # one message still queued when close() is called
    worker.close()
    server.close()
    threads = [worker.sender.thread, server.sender.thread]
    assert not any(t.is_alive() for t in threads)
    assert sent == [(0, 0, 0, 0, None)]  # drained, not dropped
