"""Synchronous training that survives resizes: ``python -m lab.bench.elastic`` under
``horovodrun --min-np/--max-np --host-discovery-script`` (Horovod Elastic).

The dynamic-scaling experiment of KungFu (OSDI'20, Fig 7) asks how long a running
synchronous job takes to grow and to shrink. KungFu resizes through its config server;
here the engine is Horovod Elastic: the workload trains the synthetic workload's model
(tf-keras, random data) inside ``hvd.elastic.run`` with a ``TensorFlowKerasState``
committed every ``--commit-every`` steps. When the discovery script's output changes,
Horovod interrupts the workers at their next commit, re-forms the ring (spawning new
workers, which first import TensorFlow and build the model) and calls the reset
callbacks.

Records (lab.metrics.records): a ``header`` per worker process; one ``step`` record per
step with ``size`` (hvd.size() during the step), the global ``step`` (kept across
resizes) and the wall ``time``; an ``event`` {"name": "resize", "old_size", "new_size",
"time"} from every surviving worker after each reset; a ``summary`` with the throughput
per size. The driver (lab.cluster.elastic_hosts) prints an ``event`` {"name":
"discovery", "slots", "time"} when it rewrites the hosts file; ``resize_latencies``
joins the two: latency = first step at the new size − time the change was written.
Published reference (KungFu osdi20 artifact README, 2 VMs): 1→2 took 20.39 s, 2→1 40 ms.

The run ends after ``--steps`` steps, ``--duration`` seconds after the first worker
started, or once ``--stop-file`` exists, whichever comes first; the workers agree on it
with a max-all-reduce every step.

horovodrun needs ``--network-interfaces`` (e.g. ``lo`` on one machine) in elastic mode:
without it, it waits for two hosts to find a common interface. A slot change on one host
(``localhost:1`` → ``localhost:2`` → ``localhost:1``) is a resize; no host aliases are
needed. A new worker's optimizer variables are created before the state is made, so its
broadcast list matches the running workers'.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from lab.bench.config import flag
from lab.bench.flags import TrainingConfig
from lab.errors import ParameterError, require_at_least
from lab.metrics.records import emit

BACKEND = "horovod-elastic"
IMPLEMENTATION = "Horovod Elastic (TensorFlowKerasState)"


def resize_latencies(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each requested resize with its latency, from one run's records (any order).

    A request is a ``discovery`` event whose slot count differs from the size in effect
    (one written before the first step is the job's starting hosts, not a request);
    it is served by the first ``step`` record at that size after the request. Returns one
    dict per request: old_size, new_size, requested (wall time), first_step (wall time of
    the end of the first step at the new size, or None if none came), reset (time of the
    first ``resize`` event to new_size after the request, or None), latency (first_step −
    requested, or None).
    """
    recs = sorted(records, key=lambda r: float(r.get("time", 0.0)))
    steps = [r for r in recs if r.get("kind") == "step" and "size" in r]
    resets = [r for r in recs if r.get("kind") == "event" and r.get("name") == "resize"]
    asks = [r for r in recs if r.get("kind") == "event" and r.get("name") == "discovery"]
    out: list[dict[str, Any]] = []
    for ask in asks:
        t, want = float(ask["time"]), int(ask["slots"])
        before = [s for s in steps if float(s["time"]) <= t]
        current = int(before[-1]["size"]) if before else None
        if current is None and not out:
            continue  # before any step: the job's starting hosts, not a resize
        if current is None:
            current = out[-1]["new_size"]
        if current == want:
            continue
        first = next((s for s in steps if float(s["time"]) > t and int(s["size"]) == want), None)
        reset = next(
            (e for e in resets if float(e["time"]) > t and int(e["new_size"]) == want), None
        )
        first_t = None if first is None else float(first["time"])
        out.append(
            {
                "old_size": current,
                "new_size": want,
                "requested": t,
                "first_step": first_t,
                "reset": None if reset is None else float(reset["time"]),
                "latency": None if first_t is None else first_t - t,
            }
        )
    return out


def throughput_by_size(records: Iterable[dict[str, Any]]) -> dict[int, float]:
    """Mean samples/s of the whole job at each size, from the step records of rank 0."""
    sums: dict[int, list[float]] = {}
    for r in records:
        timed = r.get("kind") == "step" and r.get("rank") == 0 and not r.get("warmup")
        if timed and float(r.get("seconds", 0)) > 0:
            n = int(r["size"])
            sums.setdefault(n, []).append(n * float(r["samples"]) / float(r["seconds"]))
    return {n: sum(v) / len(v) for n, v in sorted(sums.items())}


@dataclasses.dataclass(frozen=True)
class Config(TrainingConfig):
    """The synthetic workload's training settings, and when the elastic run ends."""

    MODULE = "lab.bench.elastic"
    DESCRIPTION = (
        "Synthetic training under Horovod Elastic, reporting every resize; run it with "
        "horovodrun --min-np/--max-np --host-discovery-script."
    )
    BACKEND = "horovod-elastic"

    batch_size: int = flag(32, "per-worker batch size")
    warmup_steps: int = flag(2, "steps run before timing counts")
    steps: int = flag(1_000_000, "global steps (across resizes)")
    duration: float = flag(
        0.0, "stop this many seconds after the first worker started (0: only --steps)"
    )
    stop_file: str = flag(
        "",
        "stop once this file exists (on any worker's host); lab.cluster.elastic_hosts "
        "writes it for a 'SECONDS:stop' entry",
    )
    commit_every: int = flag(1, "commit the state every K steps")

    def checked(self) -> Config:
        cfg = super().checked()
        require_at_least(("commit_every", cfg.commit_every, 1))
        if not cfg.duration >= 0:
            raise ParameterError("duration", cfg.duration, "seconds >= 0")
        return cfg


def run(cfg: Config) -> int:
    """Train under Horovod Elastic until the steps or the duration run out, or the stop
    file appears."""
    from lab.bench.backends import common
    from lab.bench.backends.horovod import import_horovod
    from lab.bench.models import build_model, count_params

    tf = common.setup_tensorflow(cfg.threads)
    hvd = import_horovod()
    hvd.init()
    common.pin_gpu(tf, hvd.local_rank())
    common.seed_everything(cfg)
    model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
    opt = common.make_optimizer(cfg)
    # Create the optimizer's variables now: a new worker must broadcast the same list as
    # the workers that have already trained, or the state sync hangs.
    opt.build(model.trainable_variables)
    images, labels = common.make_data(tf, cfg, hvd.rank())
    started = time.time()

    @common.step_function(tf)
    def train_step() -> Any:
        with tf.GradientTape() as tape:
            loss = common.mean_loss(tf, labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    extra = {**common.versions(tf), "implementation": IMPLEMENTATION}
    rep = common.Reporter(cfg, hvd.rank(), hvd.size(), common.device_name(tf), extra=extra)
    duration, commit_every, stop_file = cfg.duration, cfg.commit_every, cfg.stop_file
    rep.header(count_params(model), size=hvd.size(), duration=duration, commit_every=commit_every)
    total = cfg.warmup_steps + cfg.steps
    state = hvd.elastic.TensorFlowKerasState(model, opt, step=0, deadline=started + duration)
    sizes = {"current": hvd.size()}
    rates: dict[int, list[float]] = {}

    def on_reset() -> None:
        old, new = sizes["current"], hvd.size()
        sizes["current"] = new
        rep.rank, rep.world_size, rep.root = hvd.rank(), new, hvd.rank() == 0
        emit("event", name="resize", rank=hvd.rank(), old_size=old, new_size=new, step=state.step)

    state.register_reset_callbacks([on_reset])

    def finished(step: int) -> bool:
        late = 1.0 if duration > 0 and time.time() >= state.deadline else 0.0
        if stop_file and os.path.exists(stop_file):
            late = 1.0
        late = float(hvd.allreduce(tf.constant(late), op=hvd.Max, name="elastic_deadline"))
        return step >= total or late > 0

    @hvd.elastic.run
    def train(state: Any) -> None:
        while not finished(state.step):
            start = time.perf_counter()
            loss = float(train_step())
            size = hvd.size()
            state.step += 1
            try:
                if state.step % commit_every == 0:
                    state.commit()  # raises HostsUpdatedInterrupt when a resize is due
            finally:  # the step happened either way: report it
                seconds = time.perf_counter() - start
                rep.step(state.step - 1, seconds, loss, size=size)
                if state.step - 1 >= cfg.warmup_steps:
                    rates.setdefault(size, []).append(cfg.batch_size / seconds)

    try:
        train(state)
    finally:
        per_size = {str(n): round(sum(v) / len(v), 3) for n, v in sorted(rates.items())}
        rep.summary(img_per_sec_by_size=per_size, final_size=hvd.size())
    hvd.shutdown()
    return 0


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """The checked flags; a bad one prints what is allowed and exits with 2."""
    return Config.main_config(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
