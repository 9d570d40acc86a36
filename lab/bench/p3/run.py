"""The rank program of ``python -m lab.bench.p3``: one process per host, worker and server
shard together: torch computes, the messages go over TCP sockets of their own
(lab.bench.p3.transport), torch.distributed (gloo) starts the job and keeps its barriers.

Ranks read RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the ``local`` launcher sets them,
on emulated hosts too). Every rank prints ``@lab`` records: a header, one ``step`` record
per step (the time from one forward pass's start to the next's, which includes its wait
for the values the step before pushed; the last step's ends with its backward pass, as
if a next one started, and the wait for its own values is the summary's ``drain_seconds``),
a summary, and for the last ``--trace-steps`` steps ``event`` records named
``slice`` (per key: grad, push_start, push_sent, update, ack, pull_sent, value, in
seconds from the step's start) and ``layer`` (backward end, forward wait start and end).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.bench.p3 import models
from lab.bench.p3.config import P3Config
from lab.bench.p3.ps import Server, Trace, Worker
from lab.bench.p3.schedule import plan_keys
from lab.bench.p3.transport import ACK, PULL, PUSH, VALUE, Wire
from lab.bench.shares_wait import wait_for_shares
from lab.errors import ParameterError
from lab.metrics.records import emit, exit_now


def parse(argv: Sequence[str] | None) -> tuple[P3Config, int, int]:
    """The checked config, this rank and the world size; a bad flag prints the usage and
    what is allowed and exits with 2."""
    cfg = P3Config.main_config(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    try:
        cfg.check(world)
    except ParameterError as e:
        P3Config.usage_error(str(e))
    return cfg, rank, world


def expected(keys: Sequence[Any], src: int, dst: int, merged: bool) -> list[tuple[int, int, int]]:
    """The (kind, key, numel) messages host ``src`` sends host ``dst`` in one step."""
    out = []
    for k in keys:
        if k.server == dst:  # src's worker -> dst's server
            out.append((PUSH, k.id, k.numel))
            if not merged:
                out.append((PULL, k.id, 0))
        if k.server == src:  # src's server -> dst's worker
            out.append((VALUE, k.id, k.numel))
            if not merged:
                out.append((ACK, k.id, 0))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    cfg, rank, world = parse(argv)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(cfg.seed)
    model = models.build(cfg.model)
    params = [p for p in model.parameters() if p.requires_grad]
    tensors = models.tensors(model)
    servers = cfg.servers or world
    merged, by_priority = cfg.schedule == "p3", cfg.schedule == "p3"
    keys = plan_keys(tensors, cfg.schedule, servers, cfg.slice_elements, cfg.big_bound)
    flats = [p.data.view(-1) for p in params]
    total = cfg.warmup_steps + cfg.steps
    trace = Trace(range(max(total - cfg.trace_steps, 0), total))

    wire: Wire | None = None
    server: Server | None = None

    def send(dst: int, kind: int, key: int, step: int, payload: Any) -> None:
        # only remote messages come here: a host's own are handed over (Worker.local_server)
        assert wire is not None
        wire.send(dst, kind, key, step, payload)

    profiles = None
    if cfg.profile:  # from here on: the parameter server's threads and the training loop
        from lab.bench.profiling import ThreadProfiles

        profiles = ThreadProfiles()
        profiles.start()
    worker = Worker(rank, keys, flats, merged, by_priority, send, trace)
    if rank < servers:
        # the shard's values of its keys are the local worker's parameter slices: the same
        # numbers on every host after every update, so a local value needs no copy
        values = {k.id: worker.views[k.id] for k in keys if k.server == rank}
        server = Server(rank, keys, values, world, cfg.lr, merged, by_priority, send, trace)
        server.local_worker, worker.local_server = worker.receive, server.receive
    sockets: list[tuple[int, int]] = []
    if world > 1:
        dist.barrier()

        def deliver(kind: int, key: int, step: int, src: int, payload: Any) -> None:
            target = server if kind in (PUSH, PULL) else worker
            assert target is not None
            target.receive(kind, key, step, src, payload)

        expect = {p: expected(keys, p, rank, merged) for p in range(world) if p != rank}
        # a value comes from one server only: it is received straight into the parameter
        into = {(VALUE, k.id): worker.views[k.id] for k in keys if k.server != rank}
        # a server sums a remote push where it arrives, or keeps a copy (Server.borrowed)
        lend = frozenset({PUSH}) if server is not None else frozenset()
        wire = Wire(rank, expect, total, deliver, into, cfg.slice_elements, lend, cfg.sockbuf)
        sockets = wire.socket_buffers
        if server is not None:
            server.borrowed = wire.lent_keys(PUSH)
        wire.start()
        dist.barrier()

    def check() -> None:
        for part in (worker.sender, server.sender if server else None, wire):
            err = getattr(part, "error", None) or (getattr(part, "errors", None) or [None])[0]
            if err is not None:
                raise RuntimeError(f"parameter server thread failed: {err!r}") from err

    state = {"step": 0}
    layer_of = {id(m): i for i, m in enumerate(models.layers(model))}

    def before_layer(module: Any, _inputs: Any) -> None:
        step, layer = state["step"], layer_of[id(module)]
        trace.layer(step, layer, "wait_start")
        worker.wait_layer(layer, step, check)
        trace.layer(step, layer, "wait_end")

    def grad_hook(index: int) -> Any:
        def hook(p: Any) -> None:
            step = state["step"]
            trace.layer(step, tensors[index].layer, "backward_end")
            worker.gradient_ready(index, p.grad, step)

        return hook

    for m in models.layers(model):
        m.register_forward_pre_hook(before_layer)
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(grad_hook(i))

    gen = torch.Generator().manual_seed(cfg.seed * 1000 + rank)
    size = 299 if cfg.model == "inception_v3" and cfg.image_size < 75 else cfg.image_size
    images = torch.rand(cfg.batch_size, 3, size, size, generator=gen)
    labels = torch.randint(0, 10, (cfg.batch_size,), generator=gen)
    n_params = sum(p.numel() for p in params)
    emit(
        "header", rank=rank, world_size=world, model=cfg.model, params=n_params,
        backend=f"p3-{cfg.schedule}", engine="torch + TCP", torch=torch.__version__,
        schedule=cfg.schedule, servers=servers, keys=len(keys), slice_elements=cfg.slice_elements,
        batch_size=cfg.batch_size, image_size=size, warmup_steps=cfg.warmup_steps,
        steps=cfg.steps, lr=cfg.lr, sockbuf=cfg.sockbuf, socket_buffers=sockets,
        host=os.environ.get("DISTLAB_HOST", "localhost"), pid=os.getpid(),
    )  # fmt: skip
    starts: list[float] = []
    cpu_starts: list[float] = []  # this process's CPU time, all threads (scheduling's cost)
    switches: list[tuple[int, int]] = []  # its context switches (voluntary, not), all threads
    losses: list[float] = []
    for step in range(total):
        state["step"] = step
        if step == cfg.warmup_steps and step >= 2:
            # an emulated host's share (lab.bench.shares_wait), once step 0's record is
            # out (each step's record is printed during the next); the wait falls in the
            # last warm-up step's interval
            wait_for_shares(rank)
        starts.append(time.time())
        cpu_starts.append(time.process_time())
        switches.append(_context_switches())
        trace.mark(step, "start")
        for p in params:
            p.grad = None
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        trace.mark(step, "backward_start")
        loss.backward()
        trace.mark(step, "backward_end")
        losses.append(float(loss.detach()))
        if step > 0:
            _step_record(rank, cfg, step - 1, starts[step] - starts[step - 1], losses[step - 1])
    # Every step's record holds one wait, for the values of the step before. The last
    # step's own values are waited for by no next step: counted in its record, that step
    # read ~2x the others (3.1 s against 1.6-1.7 s at 100 Mbit/s) and made a 3-step mean's
    # interval ±66% around a gain of +56%; without it, ±15%.
    computed = time.time()
    worker.wait_all(total, check)
    end, cpu_end, switches_end = time.time(), time.process_time(), _context_switches()
    trace.mark(total - 1, "end")
    _step_record(rank, cfg, total - 1, computed - starts[-1], losses[-1])
    ends = [*starts[1:], computed]
    rates = [cfg.batch_size / (b - a) for a, b in zip(starts, ends, strict=True)]
    timed = rates[cfg.warmup_steps :]
    timed_s = end - starts[cfg.warmup_steps]
    wire_bytes = 0
    if wire is not None:
        # once every worker has all its values, every server has counted what it sent (a
        # server can still be answering the other worker when this one is done)
        dist.barrier()
        wire_bytes = sum(n for st, n in wire.sent_bytes.items() if st >= cfg.warmup_steps)
    emit("summary", rank=rank, world_size=world, img_per_sec=round(sum(timed) / len(timed), 3),
         steps=len(timed), unit="img/sec per rank", schedule=cfg.schedule,
         timed_seconds=round(timed_s, 6), drain_seconds=round(end - computed, 6),
         wire_bytes_sent=wire_bytes,
         cpu_seconds=round(cpu_end - cpu_starts[cfg.warmup_steps], 6),
         voluntary_switches=switches_end[0] - switches[cfg.warmup_steps][0],
         involuntary_switches=switches_end[1] - switches[cfg.warmup_steps][1],
         wire_bytes_per_s=round(wire_bytes / timed_s, 1))  # fmt: skip
    _emit_trace(rank, cfg, trace, keys, tensors)
    if cfg.dump:
        Path(cfg.dump).mkdir(parents=True, exist_ok=True)
        torch.save([p.detach().clone() for p in params], Path(cfg.dump) / f"rank{rank}.pt")
    if wire is not None:
        wire.stop()
        check()
    worker.close()
    if server is not None:
        server.close()
    if world > 1:
        dist.destroy_process_group()
    if profiles is not None:
        profiles.dump(Path(cfg.profile) / f"rank{rank}.prof")
    return 0


def _context_switches() -> tuple[int, int]:
    """This process's context switches so far, all its threads: (voluntary, involuntary).
    Each message a thread waits for costs a switch on the rank's core, beside the compute."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw, usage.ru_nivcsw


def _step_record(rank: int, cfg: P3Config, step: int, seconds: float, loss: float) -> None:
    emit("step", rank=rank, step=step, samples=cfg.batch_size, seconds=round(seconds, 6),
         warmup=step < cfg.warmup_steps, loss=round(loss, 6), schedule=cfg.schedule)  # fmt: skip


def _emit_trace(rank: int, cfg: P3Config, trace: Trace, keys: Sequence[Any], tensors: Any) -> None:
    for step in sorted(trace.marks):
        t0 = trace.marks[step]["start"]
        marks = {k: round(v - t0, 6) for k, v in trace.marks[step].items()}
        emit("event", name="iteration", rank=rank, step=step, t0=t0, schedule=cfg.schedule, **marks)
        for (s, layer), times in sorted(trace.layers.items()):
            if s == step:
                rel = {k: round(v - t0, 6) for k, v in times.items()}
                emit("event", name="layer", rank=rank, step=step, layer=layer,
                     schedule=cfg.schedule, **rel)  # fmt: skip
        for (s, key), times in sorted(trace.slices.items()):
            if s == step:
                k = keys[key]
                rel = {w: round(v - t0, 6) for w, v in times.items()}
                emit("event", name="slice", rank=rank, step=step, key=key, layer=k.layer,
                     tensor=tensors[k.tensor].name, server=k.server, elements=k.numel,
                     schedule=cfg.schedule, **rel)  # fmt: skip


if __name__ == "__main__":
    exit_now(main())
