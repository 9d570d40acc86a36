"""Real runs of ``python -m lab.bench.synthetic`` on each engine this node has."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab.metrics.records import parse_record

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SMALL = ["--model", "tiny_cnn", "--batch-size", "16", "--warmup-steps", "2", "--steps", "4"]
TIMEOUT = 180


def bench(*args: str) -> list[str]:
    return [sys.executable, "-m", "lab.bench.synthetic", *args]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "RANK", "WORLD_SIZE")}
    return {**env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT), **extra}


def records(text: str) -> list[dict]:
    return [r for r in map(parse_record, text.splitlines()) if r is not None]


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def consecutive_free_ports(n: int, tries: int = 50) -> int:
    """The first of ``n`` consecutive ports free on 127.0.0.1 (mwms worker i listens on
    base + i); a base from the OS whose neighbour was taken made a rank fail to start
    its gRPC server."""
    for _ in range(tries):
        socks: list[socket.socket] = []
        try:
            first = socket.socket()
            socks.append(first)
            first.bind(("127.0.0.1", 0))
            base = first.getsockname()[1]
            for i in range(1, n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports in {tries} tries")


def start_all(
    cmds: list[tuple[list[str], dict[str, str]]], tmp_path: Path
) -> list[tuple[int, str]]:
    """Start processes together, wait for all (bounded), return (exit code, output) each."""
    procs = []
    for i, (argv, env) in enumerate(cmds):
        log = open(tmp_path / f"p{i}.log", "w+")  # noqa: SIM115 - closed below
        procs.append(
            (subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log)
        )
    out = []
    try:
        for proc, log in procs:
            proc.wait(timeout=TIMEOUT)
            log.seek(0)
            out.append((proc.returncode, log.read()))
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            log.close()
    return out


def check_steps(recs: list[dict], rank: int, warmup: int, steps: int) -> None:
    mine = [r for r in recs if r["kind"] == "step" and r["rank"] == rank]
    assert len(mine) >= warmup + steps
    assert [r["warmup"] for r in mine[: warmup + 1]] == [True] * warmup + [False]
    assert all(r["samples"] == 16 and r["seconds"] > 0 for r in mine)
    assert all(isinstance(r["loss"], float) for r in mine)


class MarkAfterFirstStep(threading.Thread):
    """What the launcher of an emulated cluster does (lab.cluster.emulation.startup): once
    a step record is in ``log``, ``delay`` s later (a late read), create the shares mark."""

    def __init__(self, log: Path, mark: Path, delay: float) -> None:
        super().__init__(daemon=True)
        self.log, self.mark, self.delay = log, mark, delay
        self.marked_at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            text = self.log.read_text() if self.log.exists() else ""
            if any(r["kind"] == "step" for r in records(text)):
                time.sleep(self.delay)
                self.marked_at = time.time()
                self.mark.write_text(f"{self.marked_at}\n")
                return


def test_single_tiny_cnn_prints_every_record_kind(tmp_path):
    """Every record kind, and the wait for an emulated host's share: the launcher marks it
    1 s after the first record; no timed step starts before."""
    mark, log = tmp_path / "shares", tmp_path / "out.log"
    marker = MarkAfterFirstStep(log, mark, 1.0)
    marker.start()
    env = clean_env(DISTLAB_SHARES_MARK=str(mark))
    with open(log, "w") as out:
        proc = subprocess.run(bench(*SMALL), cwd=ROOT, env=env, stdout=out,
                              stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)  # fmt: skip
    marker.stop.set()
    marker.join(timeout=5)
    assert proc.returncode == 0, proc.stderr[-2000:]
    stdout = log.read_text()
    recs = records(stdout)
    kinds = [r["kind"] for r in recs]
    assert kinds[0] == "header" and kinds[-1] == "summary" and kinds.count("step") == 6
    head = recs[0]
    assert head["model"] == "tiny_cnn" and head["backend"] == "single" and head["params"] > 0
    assert head["world_size"] == 1 and head["device"] in ("CPU", "GPU") and head["tf"]
    assert head["versions"]["tensorflow"] and head["host"]  # where the rank ran
    check_steps(recs, 0, 2, 4)
    summary = recs[-1]
    assert summary["img_per_sec"] > 0 and summary["total"] == summary["img_per_sec"]
    assert summary["steps"] == 4
    assert len(re.findall(r"^Iter #\d+: [\d.]+ img/sec per (CPU|GPU)$", stdout, re.M)) == 4
    assert re.search(r"^Img/sec per (CPU|GPU): [\d.]+ \+-[\d.]+$", stdout, re.M)
    assert re.search(r"^Total img/sec on 1 (CPU|GPU)\(s\): [\d.]+ \+-[\d.]+$", stdout, re.M)
    # between the last warm-up and the first timed step: warm-up garbage is collected and
    # frozen, and the host's share waited for
    at = kinds.index("event")
    assert recs[at]["name"] == "gc_frozen" and recs[at]["collected"] >= 0
    wait = recs[at + 1]
    assert wait["name"] == "shares_wait" and wait["applied"] and wait["waited_s"] > 0.5
    assert [r["warmup"] for r in (recs[at - 1], recs[at + 2])] == [True, False]
    assert marker.marked_at is not None
    timed = [r for r in recs if r["kind"] == "step" and not r["warmup"]]
    assert len(timed) == 4 and all(r["time"] - r["seconds"] >= marker.marked_at for r in timed)


def test_mwms_two_workers_with_variance_monitor(tmp_path):
    base = consecutive_free_ports(2)
    cmds = [
        (
            bench(
                *SMALL,
                "--backend",
                "mwms",
                "--monitor",
                "variance",
                "--interval",
                "2",
                "--port-base",
                str(base),
            ),
            clean_env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1"),
        )
        for r in range(2)
    ]
    results = start_all(cmds, tmp_path)
    values = []
    for rank, (code, text) in enumerate(results):
        assert code == 0, text[-2000:]
        recs = records(text)
        check_steps(recs, rank, 2, 4)
        metrics = [r for r in recs if r["kind"] == "metric"]
        assert [m["step"] for m in metrics] == [0, 2, 4]  # every 2nd step
        assert all(m["name"] == "variance" and m["value"] > 0 for m in metrics)
        assert text.count("Variance: ") == 3
        values.append([m["value"] for m in metrics])
    assert values[0] == pytest.approx(values[1], rel=1e-5)  # all ranks see the same variance


def test_parameter_servers_one_ps_two_workers_and_chief(tmp_path):
    """Every task ends on its own; the chief reports each worker's steps, and where hosts
    start at full speed it schedules the timed steps only once the shares mark is there
    (made here 1 s after its first step record, as a late launcher would)."""
    ports = free_ports(4)
    cluster = {
        "chief": [f"127.0.0.1:{ports[0]}"],
        "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"],
        "ps": [f"127.0.0.1:{ports[3]}"],
    }
    tasks = [("ps", 0), ("worker", 0), ("worker", 1), ("chief", 0)]
    cmds = [
        (
            bench(*SMALL, "--backend", "ps", "--ps-wait", "120"),
            clean_env(
                TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": role, "index": i}}),
                LAB_PS_ROLE=role,
                LAB_PS_INDEX=str(i),
                DISTLAB_SHARES_MARK=str(tmp_path / "shares"),
            ),
        )
        for role, i in tasks
    ]
    marker = MarkAfterFirstStep(tmp_path / "p3.log", tmp_path / "shares", 1.0)
    marker.start()
    results = start_all(cmds, tmp_path)  # every process must end on its own, with 0
    marker.stop.set()
    marker.join(timeout=5)
    assert [code for code, _ in results] == [0, 0, 0, 0], [t[-1500:] for _, t in results]
    chief = records(results[3][1])
    # only the chief reports steps; a server task says, once, that it serves
    for (role, i), (_, text) in zip(tasks[:3], results[:3], strict=True):
        assert [(r["kind"], r["event"], r["role"], r["index"]) for r in records(text)] == [
            ("event", "serving", role, i)
        ]
    heads = [r for r in chief if r["kind"] == "header"]
    assert sorted(h["rank"] for h in heads) == [0, 1]
    assert all(h["world_size"] == 2 and h["backend"] == "ps" for h in heads)
    steps = [r for r in chief if r["kind"] == "step"]
    assert len(steps) == 2 * (2 + 4)
    # the warm-up's 2 x 2 steps ran before the mark, the rest after it
    assert marker.marked_at is not None
    [wait] = [r for r in chief if r.get("name") == "shares_wait"]
    assert wait["applied"] and wait["reporter"] == "chief"
    head = [r for r in steps if r["global_step"] <= 4]
    rest = [r for r in steps if r["global_step"] > 4]
    assert len(head) == 4 and all(r["ended_at"] < marker.marked_at for r in head)
    assert len(rest) == 8 and all(r["ended_at"] - r["seconds"] >= marker.marked_at for r in rest)
    # the chief froze its garbage once, after scheduling and before it read any step
    frozen = [i for i, r in enumerate(chief) if r.get("name") == "gc_frozen"]
    assert len(frozen) == 1 and chief[frozen[0]]["reporter"] == "chief"
    assert frozen[0] < chief.index(steps[0])
    for rank in (0, 1):
        mine = [r for r in steps if r["rank"] == rank]
        assert mine and all(r["worker"] == rank for r in mine)
        assert [r["step"] for r in mine] == list(range(len(mine)))
    summary = chief[-1]
    assert summary["kind"] == "summary" and summary["world_size"] == 2 and summary["total"] > 0
    assert re.search(r"^Total img/sec on 2 (CPU|GPU)\(s\): ", results[3][1], re.M)


@pytest.mark.skipif(
    importlib.util.find_spec("horovod") is None or not (BIN / "horovodrun").exists(),
    reason="Horovod is not installed here (HOROVOD_WITH_TENSORFLOW=1 pip install horovod)",
)
def test_horovod_two_ranks_with_noise_scale(tmp_path):
    argv = [
        str(BIN / "horovodrun"),
        "--gloo",
        "-np",
        "2",
        "-H",
        "localhost:2",
        *bench(*SMALL, "--backend", "horovod", "--monitor", "noise-scale"),
    ]
    proc = subprocess.run(
        argv, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    recs = records(text)
    heads = [r for r in recs if r["kind"] == "header"]
    assert sorted(h["rank"] for h in heads) == [0, 1]
    assert all(h["world_size"] == 2 and h["horovod"] and h["controller"] == "gloo" for h in heads)
    for rank in (0, 1):
        check_steps(recs, rank, 2, 4)
        metrics = [r for r in recs if r["kind"] == "metric" and r["rank"] == rank]
        assert len(metrics) == 6 and all(m["name"] == "noise_scale" for m in metrics)
    assert len(re.findall(r"Gradient Noise Scale: [-+.\deE]+", text)) == 12
    assert len([r for r in recs if r["kind"] == "summary"]) == 2
    assert re.search(r"Total img/sec on 2 (CPU|GPU)\(s\): ", text)


@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="Horovod is not installed")
def test_horovod_monitor_needs_two_ranks():
    proc = subprocess.run(
        bench(*SMALL, "--backend", "horovod", "--monitor", "variance"),
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    assert "at least 2 ranks" in proc.stderr
