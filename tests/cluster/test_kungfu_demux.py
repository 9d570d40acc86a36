"""kungfu-run output demultiplexed per rank: the artifact README's lines, the ANSI-coloured
prefixes kungfu-run really writes, and KungFu's peer numbering over several hosts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster.inventory import Cluster, Host, allocate
from lab.cluster.launchers import get_launcher
from lab.cluster.launchers.base import Job, Line, find_program
from lab.cluster.launchers.kungfu import KungFuLauncher, peer_ranks
from lab.metrics.tags import parse_kungfu_tag

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]
ESC = "\x1b"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def specs_for(hosts: tuple[Host, ...], np: int, **options):
    job = Job(command=("python3", "x.py"), np=np, cluster=Cluster("t", hosts), options=options)
    return KungFuLauncher(program="kungfu-run").build(job, allocate(job.cluster, np))


@pytest.fixture(scope="module")
def one_host_spec():
    """The recorded output's job: kungfu-run's default ports, 10000 upward."""
    (spec,) = specs_for((Host("localhost", slots=4),), 4, port_range="10000-11000")
    return spec


def test_a_job_on_its_own_ports_is_demultiplexed_by_position():
    """A job's free block (here from 24001) numbers peers from its start, host by host."""
    hosts = (Host("a", slots=2, address="10.0.0.1"), Host("b", slots=2, address="10.0.0.2"))
    first, second = specs_for(hosts, 4, port_range="24001-24002")
    launcher = KungFuLauncher()
    assert launcher.demux(second, "stdout", "[10.0.0.2.24002::stderr] x") == Line(3, "stderr", "x")
    assert launcher.demux(first, "stdout", "[10.0.0.1.24001::stdout] y") == Line(0, "stdout", "y")
    assert launcher.demux(first, "stdout", "[10.0.0.1.10000::stdout] z").rank is None
    (free,) = specs_for((Host("localhost", slots=2),), 2)  # no option: a free block
    begin = int(free.argv[free.argv.index("-port-range") + 1].split("-")[0])
    line = launcher.demux(free, "stdout", f"[127.0.0.1.{begin + 1}::stdout] w")
    assert line == Line(1, "stdout", "w")


def test_recorded_output_every_line_goes_to_its_rank(one_host_spec):
    lines = (DATA / "kungfu_run_output.txt").read_text().splitlines()
    assert len(lines) == 40
    launcher = KungFuLauncher()
    for raw in lines:
        plain = ANSI.sub("", raw)
        port, stream, body = re.match(r"^\[127\.0\.0\.1\.(\d+)::(\w+)\] (.*)$", plain).groups()
        line = launcher.demux(one_host_spec, "stdout", raw)
        assert line == Line(int(port) - 10000, stream, body), repr(raw)
        assert ESC not in line.text


def test_output_of_the_kungfu_built_here_goes_to_its_ranks(one_host_spec):
    """kungfu-run of KungFu b1e1768 as make setup builds it (-q, 2 peers, echo_rank.py):
    stdout then stderr as captured; its own ``[I]`` lines belong to no rank."""
    launcher = KungFuLauncher()
    lines = (DATA / "kungfu_run_b1e1768.txt").read_text().splitlines()
    ranks = []
    for raw in lines:
        line = launcher.demux(one_host_spec, "stdout", raw)
        if raw.startswith("[I]"):
            assert line == Line(None, "stdout", raw)
            continue
        assert line.rank in (0, 1) and ESC not in line.text
        assert line.text.startswith(("rank=", "  "))
        ranks.append((line.rank, line.stream))
    assert sorted(set(ranks)) == [(0, "stderr"), (0, "stdout"), (1, "stderr"), (1, "stdout")]
    assert len(ranks) == 8


def test_recorded_output_has_the_coloured_prefixes():
    text = (DATA / "kungfu_run_output.txt").read_text()
    assert f"[{ESC}[1;32m127.0.0.1.10000{ESC}[m::stdout] Iter #2: 48.7 img/sec" in text
    assert f"[{ESC}[1;36m127.0.0.1.10003{ESC}[m::{ESC}[1;35mstderr{ESC}[m] Variance:" in text


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[127.0.0.1.10002::stdout] Iter #2: 48.8 img/sec per /gpu:0",
         Line(2, "stdout", "Iter #2: 48.8 img/sec per /gpu:0")),
        (f"[{ESC}[1;33m127.0.0.1.10002{ESC}[m::{ESC}[1;35mstderr{ESC}[m] Variance: 0.0001",
         Line(2, "stderr", "Variance: 0.0001")),
        (f"{ESC}[1;32m[127.0.0.1.10000::stdout]{ESC}[m text", Line(0, "stdout", "text")),
        ("[127.0.0.1.10001::stdout]   indented", Line(1, "stdout", "  indented")),
        ("[127.0.0.1.10001::stdout] ", Line(1, "stdout", "")),
        (f"[127.0.0.1.10001::stdout] {ESC}[31mred body{ESC}[0m",
         Line(1, "stdout", f"{ESC}[31mred body{ESC}[0m")),
        ("[127.0.0.1.10004::stdout] port outside the job", None),
        ("[10.0.0.1.10000::stdout] host outside the job", None),
        ("[I] kungfu-run's own log line", None),
        ("Traceback (most recent call last):", None),
    ],
)  # fmt: skip
def test_demux_table(one_host_spec, text, expected):
    line = KungFuLauncher().demux(one_host_spec, "stderr", text)
    assert line == (expected or Line(None, "stderr", text))


def test_peer_numbering_follows_host_order_and_port_range():
    assert peer_ranks("10.0.0.1:2,10.0.0.2:3", 10000) == {
        ("10.0.0.1", 10000): 0,
        ("10.0.0.1", 10001): 1,
        ("10.0.0.2", 10000): 2,
        ("10.0.0.2", 10001): 3,
        ("10.0.0.2", 10002): 4,
    }


def test_two_hosts_each_launcher_owns_its_peers():
    hosts = (Host("a", slots=2, address="10.0.0.1"), Host("b", slots=2, address="10.0.0.2"))
    first, second = specs_for(hosts, 4, port_range="20000-20999")
    launcher = KungFuLauncher()
    text = f"[{ESC}[1;34m10.0.0.2.20001{ESC}[m::stdout] step 3"
    assert launcher.demux(second, "stdout", text) == Line(3, "stdout", "step 3")
    assert launcher.demux(first, "stdout", text).rank is None  # not a peer that host started
    assert launcher.demux(first, "stdout", "[10.0.0.1.20000::stdout] s").rank == 0


def test_parse_tag_without_launcher():
    assert parse_kungfu_tag(f"[{ESC}[1;32m127.0.0.1.10000{ESC}[m::stdout] x") == (
        "127.0.0.1",
        10000,
        "stdout",
        "x",
    )
    assert parse_kungfu_tag("[127.0.0.1:10000::stdout] x") is None


@pytest.mark.skipif(find_program("kungfu-run") is None, reason="KungFu is not installed here")
def test_kungfu_run_real_run_demuxes_every_line():
    job = Job(
        command=(sys.executable, str(REPO / "tests" / "bin" / "echo_rank.py")),
        np=2,
        cluster=Cluster("local", (Host("localhost", slots=2),)),
    )
    launcher = get_launcher("kungfu")
    launcher.check(job)
    (spec,) = launcher.build(job, allocate(job.cluster, 2))
    done = subprocess.run(
        list(spec.argv), env={**os.environ, **spec.env}, capture_output=True, text=True,
        timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ranks = set()
    for stream, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        for raw in text.splitlines():
            line = launcher.demux(spec, stream, raw)
            if "stdout line=" in raw or " stderr" in ANSI.sub("", raw).split("]", 1)[-1]:
                assert line.rank in (0, 1), raw
                ranks.add(line.rank)
    assert ranks == {0, 1}
