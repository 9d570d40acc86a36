"""The parameter server's roles on their own threads, without a network: the sender's
order (priority by layer, one message in flight) and the server's update (the pushes'
sum, sent from the shard's own tensor)."""

from __future__ import annotations

import threading

import pytest

from lab.bench.p3.ps import Sender, Server, Trace
from lab.bench.p3.schedule import Key, SendQueue
from lab.bench.p3.transport import ACK, PULL, PUSH, VALUE

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("by_priority", "want"),
    [(True, [99, 2, 4, 5, 3, 1]), (False, [99, 1, 2, 3, 4, 5])],
)
def test_sender_sends_one_message_at_a_time_highest_priority_first(
    by_priority: bool, want: list[int]
) -> None:
    lock, release, busy = threading.Lock(), threading.Event(), threading.Event()
    sent: list[int] = []
    in_flight = [0, 0]  # now, most ever

    def send(_dst: int, _kind: int, key: int, _step: int, _payload: object) -> None:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            sent.append(key)
        if key == 99:  # the first message is still on the wire while the others queue up
            busy.set()
            release.wait(timeout=10)
        with lock:
            in_flight[0] -= 1

    queue: SendQueue = SendQueue(by_priority)
    sender = Sender(queue, send, Trace([]), "test-send")
    queue.put((1, PUSH, 99, 0, None), 5)
    assert busy.wait(timeout=10)
    for key, layer in [(1, 3), (2, 0), (3, 2), (4, 0), (5, 1)]:
        queue.put((1, PUSH, key, 0, None), layer)
    release.set()
    queue.close()
    sender.join()
    assert sender.error is None
    assert sent == want
    assert in_flight[1] == 1


def _server(
    merged: bool, out: list[tuple], borrowed: frozenset[int] = frozenset()
) -> tuple[Server, list[Key]]:
    keys = [Key(0, 0, 0, 4, 0, 0), Key(1, 0, 4, 6, 0, 1)]
    values = {0: torch.arange(4.0), 1: torch.ones(2)}

    def send(dst: int, kind: int, key: int, step: int, payload: object) -> None:
        out.append((dst, kind, key, step, payload))

    trace = Trace([])
    return Server(0, keys, values, 2, 0.5, merged, True, send, trace, borrowed), keys


def test_a_lent_push_is_summed_where_it_completes_the_key_and_copied_where_it_waits() -> None:
    """The Wire lends a remote push's receive buffer for the call only, and reuses it for
    the next message: what the server keeps must not change with it."""
    server, _ = _server(True, [], borrowed=frozenset({0}))
    ring = torch.tensor([3.0, 2.0, 1.0, 0.0])
    server.receive(PUSH, 0, 0, 1, ring)  # first: waits for the local worker's push
    assert server.pushes[0][0] is not ring
    own_buffer = torch.ones(2)  # key 1 is not lent: its payload is the Wire's own buffer
    server.receive(PUSH, 1, 0, 1, own_buffer)
    assert server.pushes[1][0] is own_buffer  # kept as it is, not copied
    ring.fill_(100.0)  # the buffer receives the next message
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    server.receive(PUSH, 0, 0, 0, a)
    torch.testing.assert_close(
        server.values[0], torch.arange(4.0) - 0.5 * (a + torch.tensor([3.0, 2.0, 1.0, 0.0]))
    )
    # next step, the usual order: the local push first, the lent one completes the key
    before = server.values[0].clone()
    server.receive(PUSH, 0, 1, 0, a)
    ring.copy_(torch.tensor([1.0, 1.0, 1.0, 1.0]))
    server.receive(PUSH, 0, 1, 1, ring)
    ring.fill_(100.0)
    server.close()
    torch.testing.assert_close(server.values[0], before - 0.5 * (a + 1.0))


def test_p3_server_answers_both_pushes_with_the_summed_update_from_its_own_tensor() -> None:
    out: list[tuple] = []
    server, _ = _server(True, out)
    a, b = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([3.0, 2.0, 1.0, 0.0])
    server.receive(PUSH, 0, 0, 1, b)
    server.receive(PUSH, 0, 0, 0, a)
    server.close()
    assert server.sender.error is None
    torch.testing.assert_close(server.values[0], torch.arange(4.0) - 0.5 * (a + b))
    assert sorted((dst, kind, key, step) for dst, kind, key, step, _ in out) == [
        (0, VALUE, 0, 0),
        (1, VALUE, 0, 0),
    ]
    assert all(payload is server.values[0] for *_, payload in out)  # no copy per worker
    # the pushes were read, not written: a worker's gradient is left as it was
    torch.testing.assert_close(a, torch.tensor([1.0, 2.0, 3.0, 4.0]))


def test_baseline_server_acknowledges_then_answers_each_pull() -> None:
    out: list[tuple] = []
    server, _ = _server(False, out)
    server.receive(PUSH, 1, 3, 0, torch.ones(2))
    server.receive(PUSH, 1, 3, 1, torch.ones(2))
    server.receive(PULL, 1, 3, 1, None)
    server.close()
    assert [(dst, kind) for dst, kind, *_ in out] == [(0, ACK), (1, ACK), (1, VALUE)]
    torch.testing.assert_close(out[-1][4], torch.zeros(2))  # 1 - 0.5 * (1 + 1)


def test_worker_wakes_the_forward_pass_once_its_layer_has_every_value() -> None:
    from lab.bench.p3.ps import Worker

    keys = [Key(0, 0, 0, 2, 1, 0), Key(1, 0, 2, 4, 1, 0), Key(2, 1, 0, 2, 1, 1)]
    flats = [torch.zeros(4), torch.zeros(2)]
    worker = Worker(0, keys, flats, True, True, lambda *m: None, Trace([]))
    done = threading.Event()

    def forward() -> None:
        worker.wait_layer(0, 1, lambda: None)
        done.set()

    t = threading.Thread(target=forward)
    t.start()
    worker.receive(VALUE, 0, 0, 1, torch.tensor([1.0, 2.0]))
    worker.receive(VALUE, 2, 0, 1, torch.tensor([5.0, 6.0]))  # another layer's value
    assert not done.wait(timeout=0.5)  # layer 0 still lacks key 1
    worker.receive(VALUE, 1, 0, 1, torch.tensor([3.0, 4.0]))
    assert done.wait(timeout=5)
    t.join(timeout=5)
    worker.close()
    torch.testing.assert_close(flats[0], torch.tensor([1.0, 2.0, 3.0, 4.0]))
    worker.wait_layer(1, 1, lambda: None)  # complete: returns at once
    worker.wait_layer(7, 3, lambda: None)  # a layer without keys has nothing to wait for


def test_a_hosts_own_messages_skip_the_send_queues() -> None:
    """A push to this host's shard and the shard's answer to this host's worker are calls
    made where they arise (no wire, so no queue); a remote key's push is queued."""
    from lab.bench.p3.ps import Worker

    keys = [Key(0, 0, 0, 2, 0, 0), Key(1, 0, 2, 4, 1, 0)]  # key 0 here, key 1 on rank 1
    flats = [torch.zeros(4)]
    queued: list[tuple] = []
    worker = Worker(0, keys, flats, True, True, lambda *m: queued.append(m), Trace([]))
    server = Server(0, keys[:1], {0: worker.views[0]}, 1, 0.5, True, True,
                    lambda *m: queued.append(m), Trace([]))  # fmt: skip
    server.local_worker, worker.local_server = worker.receive, server.receive
    on: list[str] = []
    real = server.receive
    server.receive = lambda *m: (on.append(threading.current_thread().name), real(*m))[1]
    worker.local_server = server.receive
    worker.gradient_ready(0, torch.tensor([2.0, 4.0, 6.0, 8.0]), step=0)
    worker.close()
    server.close()
    assert on == [threading.current_thread().name]  # handed over on the hook's thread
    torch.testing.assert_close(flats[0][:2], torch.tensor([-1.0, -2.0]))  # 0 - 0.5 * grad
    assert worker.layer_version[0] == 0  # layer 0 still waits for key 1's value
    assert [(dst, kind, key) for dst, kind, key, *_ in queued] == [(1, PUSH, 1)]
