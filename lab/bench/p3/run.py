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

With ``--alternate K`` one job runs two parameter servers over the same parameters,
``baseline`` and the run's schedule, taking turns every K timed steps (``Side``,
``schedule_at``): each step's record names its schedule, and the summary's ``phases``
gives each schedule's figures, so that the two are compared a second apart rather than
one run apart (lab.experiments.selfbench.p3).
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.bench import alternation
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


@dataclasses.dataclass
class Side:
    """One schedule's parameter server on this host: its keys, this host's worker and
    server shard, and the sockets they talk over (none in a one-host run)."""

    keys: list[Any]
    worker: Worker
    server: Server | None
    wire: Wire | None

    def check(self) -> None:
        """Raise the first error of one of the side's threads."""
        senders = [self.worker.sender, *([self.server.sender] if self.server else [])]
        errors = [s.error for s in senders if s.error is not None]
        errors += self.wire.errors if self.wire is not None else []
        if errors:
            raise RuntimeError(f"parameter server thread failed: {errors[0]!r}") from errors[0]

    def close(self) -> None:
        if self.wire is not None:
            self.wire.stop()
            self.check()
        self.worker.close()
        if self.server is not None:
            self.server.close()


def build_side(
    schedule: str, cfg: P3Config, rank: int, world: int, tensors: Any, flats: Any, trace: Trace
) -> Side:
    """The parameter server of ``schedule`` over the model's parameters (``flats``, views
    of ``param.data``): both roles, connected to the other hosts. Collective in a job of
    more than one host: every rank builds its sides in the same order."""
    import torch.distributed as dist

    servers = cfg.servers or world
    merged = by_priority = schedule == "p3"
    keys = plan_keys(tensors, schedule, servers, cfg.slice_elements, cfg.big_bound)
    wire: Wire | None = None

    def send(dst: int, kind: int, key: int, step: int, payload: Any) -> None:
        # only remote messages come here: a host's own are handed over (Worker.local_server)
        assert wire is not None
        wire.send(dst, kind, key, step, payload)

    worker = Worker(rank, keys, flats, merged, by_priority, send, trace)
    server: Server | None = None
    if rank < servers:
        # the shard's values of its keys are the local worker's parameter slices: the same
        # numbers on every host after every update, so a local value needs no copy
        values = {k.id: worker.views[k.id] for k in keys if k.server == rank}
        server = Server(rank, keys, values, world, cfg.lr, merged, by_priority, send, trace)
        server.local_worker, worker.local_server = worker.receive, server.receive
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
        total = cfg.warmup_steps + cfg.steps
        # a server sends its keys' values from its own tensors: the same ones every step
        steady = frozenset({VALUE}) if server is not None else frozenset()
        wire = Wire(
            rank, expect, total, deliver, into, cfg.slice_elements, lend, cfg.sockbuf, steady
        )
        if server is not None:
            server.borrowed = wire.lent_keys(PUSH)
        wire.start()
        dist.barrier()
    return Side(keys, worker, server, wire)


def schedules_of(cfg: P3Config) -> list[str]:
    """The schedules a run uses: its own, and ``baseline`` first when it alternates."""
    return ["baseline", cfg.schedule] if cfg.alternate else [cfg.schedule]


def schedule_at(cfg: P3Config, step: int) -> str:
    """The schedule step ``step`` runs under (lab.bench.alternation: warm-up steps switch
    every step, timed steps every ``alternate``, starting with ``baseline``)."""
    if not cfg.alternate:
        return cfg.schedule
    on = alternation.phase(step, cfg.warmup_steps, cfg.alternate) == alternation.ON
    return cfg.schedule if on else "baseline"


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
    flats = [p.data.view(-1) for p in params]
    total = cfg.warmup_steps + cfg.steps
    trace = Trace(range(max(total - cfg.trace_steps, 0), total))

    profiles = None
    if cfg.profile:  # from here on: the parameter server's threads and the training loop
        from lab.bench.profiling import ThreadProfiles

        profiles = ThreadProfiles()
        profiles.start()
    sides = {s: build_side(s, cfg, rank, world, tensors, flats, trace) for s in schedules_of(cfg)}
    side = sides[schedule_at(cfg, 0)]

    def check() -> None:
        for each in sides.values():
            each.check()

    state = {"step": 0}
    layer_of = {id(m): i for i, m in enumerate(models.layers(model))}

    def before_layer(module: Any, _inputs: Any) -> None:
        step, layer = state["step"], layer_of[id(module)]
        trace.layer(step, layer, "wait_start")
        side.worker.wait_layer(layer, step, check)
        trace.layer(step, layer, "wait_end")

    def grad_hook(index: int) -> Any:
        def hook(p: Any) -> None:
            step = state["step"]
            trace.layer(step, tensors[index].layer, "backward_end")
            side.worker.gradient_ready(index, p.grad, step)

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
    sockets = [b for each in sides.values() if each.wire for b in each.wire.socket_buffers]
    emit(
        "header", rank=rank, world_size=world, model=cfg.model, params=n_params,
        backend=f"p3-{cfg.schedule}", engine="torch + TCP", torch=torch.__version__,
        schedule=cfg.schedule, servers=cfg.servers or world, keys=len(sides[cfg.schedule].keys),
        slice_elements=cfg.slice_elements, batch_size=cfg.batch_size, image_size=size,
        warmup_steps=cfg.warmup_steps, steps=cfg.steps, lr=cfg.lr, sockbuf=cfg.sockbuf,
        socket_buffers=sockets, alternate=cfg.alternate,
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
        nxt = sides[schedule_at(cfg, step)]
        if nxt is not side:
            # a switch of schedule: the last one's values of the step before all in, the
            # next one's layers hold them (the parameters are the same tensors)
            side.worker.wait_all(step, check)
            nxt.worker.hold(step)
            side = nxt
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
    side.worker.wait_all(total, check)
    end, cpu_end, switches_end = time.time(), time.process_time(), _context_switches()
    trace.mark(total - 1, "end")
    _step_record(rank, cfg, total - 1, computed - starts[-1], losses[-1])
    ends = [*starts[1:], computed]
    rates = [cfg.batch_size / (b - a) for a, b in zip(starts, ends, strict=True)]
    timed = rates[cfg.warmup_steps :]
    timed_s = end - starts[cfg.warmup_steps]
    wire_bytes = 0
    if world > 1:
        # once every worker has all its values, every server has counted what it sent (a
        # server can still be answering the other worker when this one is done)
        dist.barrier()
        wire_bytes = sum(
            n
            for each in sides.values()
            if each.wire is not None
            for st, n in each.wire.sent_bytes.items()
            if st >= cfg.warmup_steps
        )
    # per schedule, when the run alternates
    phases = _phases(cfg, starts, cpu_starts, switches) if cfg.alternate else {}
    emit("summary", rank=rank, world_size=world, img_per_sec=round(sum(timed) / len(timed), 3),
         steps=len(timed), unit="img/sec per rank", schedule=cfg.schedule,
         timed_seconds=round(timed_s, 6), drain_seconds=round(end - computed, 6),
         wire_bytes_sent=wire_bytes,
         cpu_seconds=round(cpu_end - cpu_starts[cfg.warmup_steps], 6),
         voluntary_switches=switches_end[0] - switches[cfg.warmup_steps][0],
         involuntary_switches=switches_end[1] - switches[cfg.warmup_steps][1],
         wire_bytes_per_s=round(wire_bytes / timed_s, 1),
         **({"phases": phases} if phases else {}))  # fmt: skip
    _emit_trace(rank, cfg, trace, {s: each.keys for s, each in sides.items()}, tensors)
    if cfg.dump:
        Path(cfg.dump).mkdir(parents=True, exist_ok=True)
        torch.save([p.detach().clone() for p in params], Path(cfg.dump) / f"rank{rank}.pt")
    for each in sides.values():
        each.close()
    if world > 1:
        dist.destroy_process_group()
    if profiles is not None:
        profiles.dump(Path(cfg.profile) / f"rank{rank}.prof")
    return 0


def _phases(
    cfg: P3Config,
    starts: Sequence[float],
    cpu_starts: Sequence[float],
    switches: Sequence[tuple[int, int]],
) -> dict[str, dict[str, Any]]:
    """Per schedule of an alternating run, over its timed steps but the last of each block
    (whose interval holds the wait for all its values before the other schedule starts,
    where a steady step overlaps it with the next forward pass) and the run's last step:
    steps, seconds, images per second, CPU seconds and context switches of the process."""
    out: dict[str, dict[str, Any]] = {}
    for step in range(cfg.warmup_steps, len(starts) - 1):
        schedule = schedule_at(cfg, step)
        if schedule_at(cfg, step + 1) != schedule:
            continue
        ph = out.setdefault(schedule, dict.fromkeys(
            ("steps", "seconds", "cpu_seconds", "voluntary_switches", "involuntary_switches"), 0
        ))  # fmt: skip
        ph["steps"] += 1
        ph["seconds"] += starts[step + 1] - starts[step]
        ph["cpu_seconds"] += cpu_starts[step + 1] - cpu_starts[step]
        ph["voluntary_switches"] += switches[step + 1][0] - switches[step][0]
        ph["involuntary_switches"] += switches[step + 1][1] - switches[step][1]
    for ph in out.values():
        ph["img_per_sec"] = round(cfg.batch_size * ph["steps"] / ph["seconds"], 3)
        ph["seconds"], ph["cpu_seconds"] = round(ph["seconds"], 6), round(ph["cpu_seconds"], 6)
    return out


def _context_switches() -> tuple[int, int]:
    """This process's context switches so far, all its threads: (voluntary, involuntary).
    Each message a thread waits for costs a switch on the rank's core, beside the compute."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw, usage.ru_nivcsw


def _step_record(rank: int, cfg: P3Config, step: int, seconds: float, loss: float) -> None:
    emit("step", rank=rank, step=step, samples=cfg.batch_size, seconds=round(seconds, 6),
         warmup=step < cfg.warmup_steps, loss=round(loss, 6),
         schedule=schedule_at(cfg, step))  # fmt: skip


def _emit_trace(
    rank: int, cfg: P3Config, trace: Trace, keys: Mapping[str, Sequence[Any]], tensors: Any
) -> None:
    """The traced steps' records; ``keys``: each schedule's plan (a step's slices are keys
    of the schedule it ran under)."""
    for step in sorted(trace.marks):
        schedule = schedule_at(cfg, step)
        t0 = trace.marks[step]["start"]
        marks = {k: round(v - t0, 6) for k, v in trace.marks[step].items()}
        emit("event", name="iteration", rank=rank, step=step, t0=t0, schedule=schedule, **marks)
        for (s, layer), times in sorted(trace.layers.items()):
            if s == step:
                rel = {k: round(v - t0, 6) for k, v in times.items()}
                emit("event", name="layer", rank=rank, step=step, layer=layer,
                     schedule=schedule, **rel)  # fmt: skip
        for (s, key), times in sorted(trace.slices.items()):
            if s == step:
                k = keys[schedule][key]
                rel = {w: round(v - t0, 6) for w, v in times.items()}
                emit("event", name="slice", rank=rank, step=step, key=key, layer=k.layer,
                     tensor=tensors[k.tensor].name, server=k.server, elements=k.numel,
                     schedule=schedule, **rel)  # fmt: skip


if __name__ == "__main__":
    exit_now(main())
