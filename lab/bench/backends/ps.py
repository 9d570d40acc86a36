"""Asynchronous SGD on TensorFlow's parameter-server runtime (ParameterServerStrategy).

Every process reads its part from TF_CONFIG (set by the ``ps`` launcher; the task type may
also come from LAB_PS_ROLE / LAB_PS_INDEX):

- ``ps`` and ``worker`` tasks start a ``tf.distribute.Server`` and serve until the chief
  is gone. The chief's gRPC server listens on its TF_CONFIG address for the whole run, so
  each server task polls that address: it waits (at most ``--ps-wait`` seconds) for the
  chief to answer, then exits 0 once the chief's host refuses connections (the chief
  ended). No shared filesystem and no extra channel is needed, and every process ends on
  its own after the chief ends. Without a planned replacement, no answer counts as an end
  too: a server task (a 0.1-core PS behind a 30 Mbit/s link) once got no answer within the
  probe's 1 s just as the chief ended, waited 60 s, and failed the run. (The cause was not
  found: a bulk TCP flow on such a link delayed a connect by at most 0.1 s here.)
  Where a chief's replacement is planned (``--chief-grace`` seconds, with a
  ``--checkpoint-dir`` to resume from), a silent chief port does not tell an end from a
  replacement starting up: a server starved of CPU once missed the revoked chief's
  one-second outage, saw only the replacement's refusals while it imported TensorFlow, and
  left. So the chief that ends normally writes an end mark (``chief-ended`` in the
  checkpoint directory, holding the job's token) before it exits, and a server leaves on a
  refusal only once that mark is there; otherwise it waits up to ``chief_grace`` s for the
  chief to answer again and fails if none does.
- the ``chief`` builds the model under ``strategy.scope()`` (variables live on the ps
  tasks), schedules ``(warmup + steps) × workers`` steps through a ClusterCoordinator, and
  reports. Closures go to whichever worker is free, so a fast worker runs more steps.
  With ``--checkpoint-dir`` it resumes from the newest checkpoint there and, with
  ``--checkpoint-every K``, writes one every K global steps (lab.bench.backends.checkpoints).
  A step whose worker died after running it (its result unreadable) is reported as a
  ``result_lost`` event: its update reached the servers. With two or more servers the large
  variables are split over them (``MinSizePartitioner``).

Records: only the chief prints step records (a server task prints one ``serving`` event
once it is up, which lab.cluster.fault_injector waits for). Each ``step`` record describes
one step of one worker: ``rank`` and ``worker`` are that worker's index (from
``tf.distribute.coordinator.experimental_get_current_worker_index``), ``step`` counts that
worker's steps, and ``seconds`` is measured on the worker's clock between the ends of its
consecutive steps (the first: start to end), so it includes the pull/push of variables
and the dispatch gap; ``global_step`` counts the job's steps (from a restored checkpoint's
step on) and ``ended_at`` is the step's end in epoch seconds, for timelines. ``world_size``
is the number of workers; a header is printed for
each worker rank, all with ``reporter: "chief"``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from lab.bench.backends import checkpoints, common
from lab.bench.models import build_model, count_params
from lab.bench.shares_wait import shares_pending, wait_for_shares
from lab.errors import ParameterError
from lab.metrics.records import emit, exit_now

if TYPE_CHECKING:
    from lab.bench.synthetic import Config

ROLES = ("chief", "worker", "ps")
POLL_SECONDS = 0.5
SHARD_BYTES = 64 << 10  # variables larger than this are split over the servers
# consecutive unanswered connects before a server task decides the chief ended; with no
# replacement planned one refusal is an end (three cost ~1.5 s of every ps run's teardown)
MISSES_TO_EXIT = 3
ENDED_MARK = "chief-ended"  # in the checkpoint directory: the chief ended normally


def read_tf_config() -> tuple[dict[str, Any], str, int]:
    """(cluster spec dict, task type, task index) from TF_CONFIG and LAB_PS_ROLE/INDEX."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ParameterError(
            "TF_CONFIG", raw, "a JSON cluster spec; start ps runs with the ps launcher"
        )
    try:
        conf = json.loads(raw)
        cluster = dict(conf["cluster"])
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ParameterError(
            "TF_CONFIG", raw, 'JSON like {"cluster": {...}, "task": {...}}'
        ) from None
    task = conf.get("task") or {}
    role = task.get("type") or os.environ.get("LAB_PS_ROLE", "")
    index = int(task.get("index", os.environ.get("LAB_PS_INDEX", "0")))
    if role not in ROLES:
        raise ParameterError("task type", role, ", ".join(ROLES))
    for job in ("chief", "worker", "ps"):
        if not cluster.get(job):
            raise ParameterError(
                f"TF_CONFIG cluster.{job}", cluster.get(job), "a non-empty address list"
            )
    return cluster, role, index


def _probe(address: str, timeout: float = 1.0) -> str:
    """``"up"``; ``"refused"`` (the host is there, nothing listens: the chief ended or is
    starting); or ``"gone"`` (no answer at all: its host vanished, e.g. revoked)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return "up"
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "gone"


def job_token() -> str:
    """What tells this job's end mark from another's in a shared checkpoint directory: the
    launcher's ``LAB_PS_JOB``, else a digest of the cluster spec."""
    token = os.environ.get("LAB_PS_JOB", "")
    if token:
        return token
    cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
    return hashlib.sha256(json.dumps(cluster, sort_keys=True).encode()).hexdigest()[:16]


def mark_ended(checkpoint_dir: str, token: str) -> None:
    """Say, where the servers look, that the chief ended normally (not revoked)."""
    path = Path(checkpoint_dir) / ENDED_MARK
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{ENDED_MARK}.{os.getpid()}.partial")
    partial.write_text(token)
    partial.replace(path)  # whole or absent: a server never reads half a token


def ended_normally(checkpoint_dir: str, token: str) -> bool:
    """Whether this job's chief left its end mark in ``checkpoint_dir``."""
    try:
        return (Path(checkpoint_dir) / ENDED_MARK).read_text() == token
    except OSError:
        return False


def watch_chief(
    address: str, wait: float, grace: float = 0.0, ended: Callable[[], bool] | None = None
) -> int:
    """Block while the chief runs; 0 once it has come and gone, 1 if it never came.

    Without a ``grace`` (no replacement planned), a refusal ends the task at once, and so
    do ``MISSES_TO_EXIT`` probes without an answer. With one, only ``ended()`` (the chief's
    end mark) tells an end; a chief that does not answer — revoked, or its replacement
    starting — is waited for up to ``grace`` seconds, and the task ends with 1 if none
    answers by then.
    """
    deadline = time.monotonic() + wait
    while _probe(address) != "up":
        if time.monotonic() > deadline:
            print(
                f"chief {address} did not appear within {wait:.0f} s", file=sys.stderr, flush=True
            )
            return 1
        time.sleep(POLL_SECONDS)
    misses, lost_since = 0, None
    while True:
        time.sleep(POLL_SECONDS)
        state = _probe(address)
        if state == "up":
            if lost_since is not None:
                print(f"chief {address} is back", file=sys.stderr, flush=True)
            misses, lost_since = 0, None
            continue
        if grace > 0:
            if ended is not None and ended():
                return 0
            if lost_since is None:
                lost_since = time.monotonic()
                print(f"chief {address} {state}; waiting {grace:.0f} s for it or its "
                      "replacement", file=sys.stderr, flush=True)  # fmt: skip
            elif time.monotonic() - lost_since > grace:
                return 1
            continue
        if state == "refused":
            return 0  # its host answers and nothing listens: the chief has ended
        misses += 1
        if misses >= MISSES_TO_EXIT:
            return 0


def serve(tf: Any, cfg: Config, cluster: dict[str, Any], role: str, index: int) -> int:
    """A ps or worker task: serve the cluster until the chief has ended."""
    server = tf.distribute.Server(
        tf.train.ClusterSpec(cluster), job_name=role, task_index=index, protocol="grpc", start=True
    )
    print(f"{role} {index} serving at {server.target}", file=sys.stderr, flush=True)
    emit("event", event="serving", role=role, index=index)  # up: a replacement's share returns
    token = job_token()
    code = watch_chief(cluster["chief"][0], cfg.ps_wait, cfg.chief_grace,
                       lambda: ended_normally(cfg.checkpoint_dir, token))  # fmt: skip
    print(f"{role} {index}: chief ended, exiting", file=sys.stderr, flush=True)
    return code


def run(cfg: Config) -> NoReturn:
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")  # as TF's PS guide asks
    cluster, role, index = read_tf_config()
    tf = common.setup_tensorflow(cfg.threads)
    if role != "chief":
        exit_now(serve(tf, cfg, cluster, role, index))
    try:
        train(tf, cfg, cluster)
    except Exception:  # the coordinator's threads would keep a failed chief alive
        traceback.print_exc()
        exit_now(1)


def train(tf: Any, cfg: Config, cluster: dict[str, Any]) -> NoReturn:
    """The chief: build, schedule every worker's steps, report as they finish, and end
    the process."""
    workers = len(cluster["worker"])
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    partitioner = None
    if len(cluster["ps"]) > 1:  # spread the large variables over every server
        partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=SHARD_BYTES, max_shards=len(cluster["ps"])
        )
    strategy = tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    common.seed_everything(cfg)
    with strategy.scope():
        model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
        opt = common.make_optimizer(cfg)
    ckpt = tf.train.Checkpoint(model=model, optimizer=opt) if cfg.checkpoint_dir else None
    first = checkpoints.restore(ckpt, cfg.checkpoint_dir, reporter="chief") if ckpt else 0

    def dataset_fn(_: Any = None) -> Any:
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        images, labels = common.make_data(tf, cfg, worker)  # made once, on the worker
        return tf.data.Dataset.from_tensors((images, labels)).repeat()

    @common.step_function(tf)
    def per_worker_dataset() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))

    @common.step_function(tf)
    def step_fn(it: Any) -> Any:
        def replica_fn(images: Any, labels: Any) -> Any:
            start = tf.timestamp()
            with tf.control_dependencies([start]):
                with tf.GradientTape() as tape:
                    loss = common.mean_loss(tf, labels, model(images, training=True))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            with tf.control_dependencies([loss, *grads]):
                end = tf.timestamp()
            return loss, start, end

        images, labels = next(it)
        loss, start, end = strategy.run(replica_fn, args=(images, labels))
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        return loss, worker, start, end

    versions = common.versions(tf)
    rep = common.Reporter(cfg, 0, workers, common.device_name(tf), iter_lines=False, extra=versions)
    for w in range(workers):
        rep.rank = w
        rep.header(count_params(model), worker=w, reporter="chief", ps_tasks=len(cluster["ps"]))

    total = (cfg.warmup_steps + cfg.steps) * workers - first
    # Where hosts start at full speed, the warm-up steps go first and the rest once the
    # hosts' shares apply (lab.bench.shares_wait): scheduled together, a small CNN's steps
    # all ran before the launcher read the first record, and the run timed nothing.
    head = min(total, max(cfg.warmup_steps, 1) * workers) if shares_pending() else total
    pending = [coordinator.schedule(step_fn, args=(iterator,)) for _ in range(head)]
    # traced and scheduled: what survives is kept out of later collections, which would
    # otherwise stop the chief's dispatch threads (they need the GIL) in a timed step
    common.freeze_garbage(0, reporter="chief")
    done: dict[int, int] = {}
    last_end: dict[int, float] = {}
    # A worker runs its closures in order, so fetching in order keeps per-worker order.
    lost = (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)
    every = cfg.checkpoint_every if ckpt is not None else 0

    def report(remotes: list[Any], first_step: int) -> None:
        for global_step, remote in enumerate(remotes, first_step):
            try:
                loss, worker, start, end = remote.fetch()
            except lost as e:  # the step ran, but its worker died before its result was read
                emit("event", event="result_lost", step=global_step, error=type(e).__name__)
                continue
            w = int(worker)
            k = done.get(w, 0)
            seconds = float(end) - last_end.get(w, float(start))
            last_end[w], done[w] = float(end), k + 1
            rep.step(k, seconds, float(loss), rank=w, worker=w, reporter="chief",
                     global_step=global_step, ended_at=round(float(end), 6))  # fmt: skip
            if every and global_step % every == 0:
                checkpoints.write(ckpt, cfg.checkpoint_dir, global_step, reporter="chief")

    report(pending, first + 1)
    if head < total:
        wait_for_shares(0, reporter="chief")
        last_end.clear()  # a worker's next step is timed from its own start, not the wait
        rest = [coordinator.schedule(step_fn, args=(iterator,)) for _ in range(total - head)]
        report(rest, first + 1 + head)
    coordinator.join()
    rep.rank = 0
    rep.summary(steps_per_worker={str(w): n for w, n in sorted(done.items())}, reporter="chief")
    if cfg.chief_grace > 0:  # the servers wait out a silent chief unless told it ended
        mark_ended(cfg.checkpoint_dir, job_token())
    # Exit here, not by returning: freeing this frame's tf.functions makes each one's
    # __del__ ask every remote worker to drop it, which held the chief 10-60 s after its
    # summary (seen in py-spy: Context.remove_function).
    exit_now(0)
