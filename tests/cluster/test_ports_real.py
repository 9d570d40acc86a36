"""Two jobs of one engine at once on this machine both succeed (each takes its own free
ports); a local Horovod or KungFu job's listeners are all on the loopback address (KungFu's
peers, runners, config server and metrics servers through the lab's build,
env/kungfu-patches/apply.py), a parameter-server job's (TF's gRPC servers bind every
interface) only on the job's own ports."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

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
}


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
) -> Any:
    """Run a tiny two-rank job of ``engine`` (``job``: other arguments after ``python``
    and launcher options, starting at one rank)."""
    backend, launcher, _ = ENGINES[engine]
    argv, options = job or (["-m", "lab.bench.synthetic", *backend, *TINY, *STEPS], {})
    return launch(
        ["python", *argv],
        np=1 if job else 2,
        launcher=launcher,
        hosts="localhost:2",
        env=env or {},
        options=options,
        timeout=240,
        results_root=tmp_path,
        view=None,
    )


@pytest.mark.parametrize("engine", ["kungfu", "ps", "horovod"])
def test_two_jobs_at_once_both_succeed(engine, tmp_path, probe):
    needs(engine)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda i: run(engine, tmp_path / str(i)), range(2)))
    assert [r.ok for r in results] == [True, True], [r.reason for r in results]
    for r in results:
        probe.assert_nothing_left(r.run_dir)


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


def listeners(pids: set[int]) -> set[str]:
    """Local addresses of the TCP listeners ``ss -ltnp`` shows for ``pids``."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=10).stdout
    found = set()
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            found.add(line.split()[3])
    return found


def run_watched(
    engine: str, tmp_path: Path, job: tuple[list[str], dict[str, Any]] | None = None
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
        result = run(engine, tmp_path, env=dict([mark.split("=")]), job=job)
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


def test_a_local_horovod_jobs_listeners_are_all_on_loopback(tmp_path, probe):
    result, seen = run_watched("horovod", tmp_path)
    assert {a for a in seen if not a.startswith("127.0.0.1:")} == set()
    probe.assert_nothing_left(result.run_dir)


@pytest.mark.parametrize("engine", ["kungfu", "ps"])
def test_kungfu_and_ps_jobs_listen_only_on_their_own_free_ports(engine, tmp_path, probe):
    """The ports are the job's own block (TF's gRPC servers bind every interface, which
    the lab cannot change; there the ports are what the lab chooses)."""
    result, seen = run_watched(engine, tmp_path)
    ports = job_ports(result.run_dir, engine)
    assert all(LOW <= p < HIGH for p in ports)
    assert {port_of(a) for a in seen} <= ports, seen
    probe.assert_nothing_left(result.run_dir)


TF_BINDS_ALL = pytest.mark.xfail(
    strict=True,
    reason="TF's GrpcServer binds 0.0.0.0:port for every task of a parameter-server job, "
    "with no option to name an address (README 'What the lab trusts')",
)


@pytest.mark.parametrize("engine", ["kungfu", pytest.param("ps", marks=TF_BINDS_ALL)])
def test_kungfu_and_ps_jobs_listeners_on_loopback(engine, tmp_path, probe):
    result, seen = run_watched(engine, tmp_path)
    assert {a for a in seen if not a.startswith("127.0.0.1:")} == set()
    probe.assert_nothing_left(result.run_dir)


def test_an_elastic_kungfu_jobs_listeners_are_all_on_loopback(tmp_path, probe):
    """Watch-mode runners, the builtin config server, the metrics servers and a peer a
    resize adds each listen on 127.0.0.1 too, and each one of them was seen."""
    result, seen = run_watched("kungfu", tmp_path, job=ELASTIC)
    assert {a for a in seen if not a.startswith("127.0.0.1:")} == set()
    argv = json.loads((result.run_dir / "manifest.json").read_text())["processes"][0]["argv"]
    runner, config = (int(argv[argv.index(f) + 1]) for f in ("-port", "-builtin-config-port"))
    begin = int(argv[argv.index("-port-range") + 1].split("-")[0])
    peers = {begin, begin + 1}  # the starting peer and the one the resize added
    want = {runner, config, *peers, *(p + MONITORING_PORT_OFFSET for p in peers)}
    assert {port_of(a) for a in seen} == want, seen
    probe.assert_nothing_left(result.run_dir)
