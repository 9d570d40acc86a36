"""Two jobs of one engine at once on this machine both succeed, each listening only on its
own free ports; a local Horovod or KungFu job's listeners are all on the loopback address
(KungFu's peers, runners, config server and metrics servers through the lab's build,
env/kungfu-patches/apply.py), a parameter-server job's on its own ports in a namespace
that has only lo (TF's gRPC servers bind every interface); an elastic KungFu job resizes
1 -> 2 -> 1 with every listener it opens on the loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kungfu_crosscheck as crosscheck
import pytest

from lab.bench.elastic import resize_latencies
from lab.cluster import launch
from lab.cluster.launchers.base import find_program
from lab.cluster.launchers.kungfu import MONITORING_PORT_OFFSET
from lab.cluster.ports import HIGH, LOW

pytestmark = pytest.mark.slow
TINY = ["--model", "tiny_cnn", "--batch-size", "8", "--image-size", "32", "--threads", "1"]
STEPS = ["--steps", "2", "--warmup-steps", "1"]
ENGINES = {
    "kungfu": (["--backend", "kungfu-sync"], "kungfu", "kungfu-run"),
    "ps": (["--backend", "ps"], "ps", None),
    "horovod": (["--backend", "horovod"], "horovod", "horovodrun"),
    "mwms": (["--backend", "mwms"], "local", None),
    "torchrun": ([], "torchrun", "torchrun"),  # with TORCH_DDP as its job
    "mpi": (["--backend", "single"], "mpi", "mpirun"),  # two ranks of their own
}
# torch.distributed's store under torchrun, DDP over gloo
TORCH_DDP = (
    ["-m", "lab.bench.torch_synthetic", "--backend", "torch-ddp", "--model", "small_cnn",
     "--batch-size", "4", *STEPS],
    {},
)  # fmt: skip


def needs(engine: str) -> None:
    _, _, program = ENGINES[engine]
    if program and find_program(program) is None:
        pytest.skip(f"{program} is not installed here")
    if engine == "horovod" and importlib.util.find_spec("horovod") is None:
        pytest.skip("Horovod is not built here")


# A KungFu job that starts everything KungFu can listen with: kungfu-run in watch mode on
# its runner port, the builtin config server, peers with metrics servers (port + 10000),
# and a peer a resize adds.
RESIZE = ["--steps", "6", "--warmup-steps", "1", "--schedule", "2:2,4:1"]
ELASTIC = (
    ["-m", "lab.bench.kungfu_elastic", *TINY, *RESIZE],
    {"elastic": True, "max_np": 2, "monitoring": True},
)


def run(
    engine: str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    job: tuple[list[str], dict[str, Any]] | None = None,
    np: int | None = None,
) -> Any:
    """Run a tiny two-rank job of ``engine`` (``job``: other arguments after ``python``
    and launcher options, starting at one rank unless ``np`` says)."""
    backend, launcher, _ = ENGINES[engine]
    argv, options = job or (["-m", "lab.bench.synthetic", *backend, *TINY, *STEPS], {})
    return launch(
        ["python", *argv],
        np=np or (1 if job else 2),
        launcher=launcher,
        hosts="localhost:2",
        env=env or {},
        options=options,
        timeout=240,
        results_root=tmp_path,
        view=None,
    )


def marked_pids(mark: str) -> set[int]:
    """The processes whose environment carries ``mark`` (every process of one run)."""
    pids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if mark.encode() in (d / "environ").read_bytes():
                    pids.add(int(d.name))
            except OSError:
                continue
    return pids


PRIVATE = "private "  # marks an address seen in a job's own network namespace


def listeners(pids: set[int]) -> set[str]:
    """Local addresses of the TCP listeners ``ss -ltnp`` shows for ``pids``: in this
    machine's namespace as ``ip:port``; in a private namespace of the job's (lab.cluster.
    loopback_ns) as ``private ip:port``, and only if that namespace has no interface but
    lo (else as ``wide ip:port``)."""
    by_ns: dict[str, set[int]] = {}
    for pid in pids:
        try:
            by_ns.setdefault(os.readlink(f"/proc/{pid}/ns/net"), set()).add(pid)
        except OSError:
            continue
    found = set()
    for ns, members in by_ns.items():
        enter: list[str] = []
        mark = ""
        if ns != os.readlink("/proc/self/ns/net"):
            enter = ["nsenter", f"--net=/proc/{min(members)}/ns/net", "--"]
            links = subprocess.run(
                [*enter, "ip", "-j", "link", "show"], capture_output=True, text=True, timeout=10
            ).stdout
            if not links:
                continue  # the process ended meanwhile
            only_lo = [x["ifname"] for x in json.loads(links)] == ["lo"]
            mark = PRIVATE if only_lo else "wide "
        out = subprocess.run(
            [*enter, "ss", "-ltnpH"], capture_output=True, text=True, timeout=10
        ).stdout
        for line in out.splitlines():
            owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
            if owners & members:
                found.add(mark + line.split()[3])
    return found


def run_watched(
    engine: str,
    tmp_path: Path,
    job: tuple[list[str], dict[str, Any]] | None = None,
    np: int | None = None,
) -> tuple[Any, set[str]]:
    """Run a tiny job of ``engine``; return its result and every listening address
    (``ip:port``) its processes held while it ran."""
    needs(engine)
    mark = f"LAB_PORTS_TEST={uuid.uuid4().hex}"
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(listeners(marked_pids(mark)))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run(engine, tmp_path, env=dict([mark.split("=")]), job=job, np=np)
    finally:
        done.set()
        watcher.join(timeout=30)
    assert result.ok, result.reason
    assert seen, "no listener of the run was seen"
    return result, seen


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def job_ports(run_dir: Path, engine: str) -> set[int]:
    """The ports the launcher gave the job, read back from its manifest."""
    processes = json.loads((run_dir / "manifest.json").read_text())["processes"]
    if engine == "kungfu":
        argv = processes[0]["argv"]
        begin, end = map(int, argv[argv.index("-port-range") + 1].split("-"))
        return {int(argv[argv.index("-port") + 1]), *range(begin, end + 1)}
    cluster = json.loads(processes[0]["env"]["TF_CONFIG"])["cluster"]
    return {port_of(a) for addresses in cluster.values() for a in addresses}


@pytest.mark.parametrize("engine", ["kungfu", "ps", "horovod"])
def test_two_jobs_at_once_succeed_each_on_its_own_ports(engine, tmp_path, probe):
    """Two jobs started together: both succeed, each listens only on the block of free
    ports its launcher picked (KungFu, PS), the blocks do not meet, and a KungFu or
    Horovod job listens on the loopback only. A PS job's servers bind every interface
    (TF's GrpcServer takes no address), so the job runs in a network namespace of its own
    whose only interface is lo (lab.cluster.loopback_ns): nothing of it listens in this
    machine's namespace."""
    with ThreadPoolExecutor(2) as pool:
        watched = list(pool.map(lambda i: run_watched(engine, tmp_path / str(i)), range(2)))
    blocks = []
    for result, seen in watched:
        if engine != "horovod":
            ports = job_ports(result.run_dir, engine)
            assert all(LOW <= p < HIGH for p in ports)
            assert {port_of(a) for a in seen} <= ports, seen
            blocks.append(ports)
        wide = {a for a in seen if not a.startswith(("127.0.0.1:", PRIVATE))}
        assert wide == set(), seen
        private = {a for a in seen if a.startswith(PRIVATE)}
        if engine == "ps":  # TF's servers bind every interface: here that is lo alone
            assert private == seen, seen
            manifest = json.loads((result.run_dir / "manifest.json").read_text())
            assert manifest["network"]["private"] is True, manifest.get("network")
        else:
            assert private == set(), seen
        probe.assert_nothing_left(result.run_dir)
    if blocks:
        assert not blocks[0] & blocks[1], blocks


@pytest.mark.parametrize("engine", ["mwms", "torchrun", "mpi"])
def test_a_local_job_of_an_engine_that_binds_every_interface_listens_on_lo_alone(
    engine, tmp_path, probe
):
    """TF MultiWorkerMirroredStrategy's gRPC servers (the local launcher), torchrun's
    rendezvous store and prterun's out-of-band listeners (mpirun) bind every interface: a
    job on this machine alone runs in a namespace of its own with only lo, so nothing of it
    listens in this machine's namespace."""
    job = TORCH_DDP if engine == "torchrun" else None
    result, seen = run_watched(engine, tmp_path, job=job, np=2)
    assert {a for a in seen if not a.startswith(PRIVATE)} == set(), seen
    network = json.loads((result.run_dir / "manifest.json").read_text())["network"]
    assert network["private"] is True, network
    probe.assert_nothing_left(result.run_dir)


def test_an_elastic_kungfu_job_resizes_with_its_listeners_on_loopback(tmp_path, probe):
    """A KungFu job resizes 1 -> 2 -> 1 at the steps its schedule names (rank 0 sees both
    resizes, rank 1 detaches, the global step survives both, each resize has a latency);
    its watch-mode runner, builtin config server, metrics servers and the peer the
    resize adds each listen on 127.0.0.1, and each one of them was seen."""
    result, seen = run_watched("kungfu", tmp_path, job=ELASTIC)
    recs = sorted(crosscheck.run_records(result.run_dir), key=lambda r: r["time"])
    resizes = [(r["old_size"], r["new_size"]) for r in recs if r.get("name") == "resize"]
    assert resizes == [(1, 2), (2, 1)]  # seen by rank 0; rank 1 starts in the grown cluster
    assert [r["rank"] for r in recs if r.get("name") == "detached"] == [1]
    sizes = [r["size"] for r in recs if r["kind"] == "step"]
    assert sizes[0] == 1 and 2 in sizes and sizes[-1] == 1
    steps0 = [r["step"] for r in recs if r["kind"] == "step" and r["rank"] == 0]
    assert steps0 == list(range(7))  # the global step survives both resizes
    latencies = resize_latencies(recs)
    assert [(x["old_size"], x["new_size"]) for x in latencies] == [(1, 2), (2, 1)]
    assert all(x["latency"] is not None and x["latency"] > 0 for x in latencies)
    assert {a for a in seen if not a.startswith("127.0.0.1:")} == set()
    argv = json.loads((result.run_dir / "manifest.json").read_text())["processes"][0]["argv"]
    runner, config = (int(argv[argv.index(f) + 1]) for f in ("-port", "-builtin-config-port"))
    begin = int(argv[argv.index("-port-range") + 1].split("-")[0])
    peers = {begin, begin + 1}  # the starting peer and the one the resize added
    want = {runner, config, *peers, *(p + MONITORING_PORT_OFFSET for p in peers)}
    assert {port_of(a) for a in seen} == want, seen
    probe.assert_nothing_left(result.run_dir)
