"""Engines that start their own ranks (mpirun) on emulated clusters: each rank must land in
its host's network namespace and cgroup, reached over the sshd the emulation starts in each
host, and nothing of the run may be left behind. Plus the exact command lines (pure) and
horovodrun's refusal to run there."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from lab.cluster import emulation, launch
from lab.cluster.emulation import netns, state
from lab.cluster.inventory import Cluster, Host, allocate
from lab.cluster.launchers.base import Job, find_program
from lab.cluster.launchers.horovod import HorovodLauncher
from lab.cluster.launchers.mpi import MpiLauncher
from lab.errors import LaunchError
from lab.metrics.records import parse_record

WHY = emulation.missing()
needs_root = pytest.mark.skipif(WHY is not None, reason=WHY or "")
RANK_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
MPIRUN = Path(sys.executable).parent / "mpirun"
needs_mpirun = pytest.mark.skipif(
    not (MPIRUN.is_file() or shutil.which("mpirun")), reason="mpirun is not installed"
)
needs_sshd = pytest.mark.skipif(
    not (shutil.which("ssh") and Path("/usr/sbin/sshd").is_file()),
    reason="needs OpenSSH client and server (apt-get install openssh-server)",
)

# Each rank reports where it runs: its namespace (by name, as `ip netns identify` finds it
# through /run/netns, and by inode), its cgroups, its host's variables, and whether an sshd
# listens on its host.
PROBE = r"""
import json, os, socket, subprocess, sys
ip = sys.argv[1]
ns = subprocess.run([ip, "netns", "identify", str(os.getpid())],
                    capture_output=True, text=True, timeout=10).stdout.strip()
addr = os.environ.get("DISTLAB_HOST_ADDRESS", "")
try:
    socket.create_connection((addr, 22), timeout=2).close()
    sshd = "open"
except OSError:
    sshd = "closed"
print("probe " + json.dumps({
    "rank": int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "-1"))),
    "pid": os.getpid(),
    "netns": ns,
    "netns_inode": os.stat("/proc/self/ns/net").st_ino,
    "cgroup": open("/proc/self/cgroup").read(),
    "host": os.environ.get("DISTLAB_HOST"),
    "hostname": socket.gethostname(),
    "sshd": sshd,
    "path": os.environ.get("PATH"),
}), flush=True)
"""


def profile(tmp_path: Path, cpu: float = 0.4, hosts: int = 2) -> str:
    """A 2-host emulated profile (no sshd asked for: the launcher must ask for it)."""
    path = tmp_path / "emulated-test.yaml"
    path.write_text(
        f"name: emulated-test\nemulated:\n  hosts: {hosts}\n  slots: 1\n  cpu: {cpu}\n"
        "  link: {bandwidth: 1gbit}\n"
    )
    return str(path)


def probes(run_dir: Path) -> dict[int, dict]:
    found = {}
    for log in run_dir.glob("rank-*.log"):
        for line in log.read_text().splitlines():
            if line.startswith("probe "):
                rec = json.loads(line[len("probe ") :])
                found[rec["rank"]] = rec
    return found


def tag_of(run_dir: Path) -> str:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    first = manifest["cluster"]["hosts"][0]["namespace"]
    return first.split("-")[1]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (an sshd's config path names
    its cluster's tag)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def assert_nothing_left(tag: str, pids: list[int]) -> None:
    """No namespace, link, cgroup, record, key directory, sshd or rank of cluster ``tag``."""
    links = json.loads(netns.run(["ip", "-j", "link", "show"]) or "[]")
    groups = [*Path("/sys/fs/cgroup").glob(f"*/{state.cgroup_dir(tag)}")]
    groups += [*Path("/sys/fs/cgroup").glob(f"*/*/{state.cgroup_dir(tag)}")]
    assert [n for n in netns.list_netns() if tag in n] == []
    assert [x["ifname"] for x in links if tag in x["ifname"]] == []
    assert groups == []
    assert list(state.state_dir().glob(f"{tag}*")) == []
    assert processes_naming(f"distlab/emulation/{tag}") == []
    assert [p for p in pids if alive(p)] == []


# ---------------------------------------------------------------- command lines (pure)

H1 = Host("h1", address="10.231.7.1", namespace="distlab-abc123-h1")
H2 = Host("h2", address="10.231.7.2", namespace="distlab-abc123-h2")
SSH_OPTS = ["-F", "/dev/null", "-i", "/k/client_key", "-o", "IdentitiesOnly=yes",
            "-o", "UserKnownHostsFile=/k/hosts", "-o", "StrictHostKeyChecking=yes"]  # fmt: skip


def emulated_job(np: int = 2, **options: object) -> Job:
    cluster = Cluster(
        "emulated-test", (H1, H2), emulated={"hosts": 2}, extra={"ssh_options": SSH_OPTS}
    )
    return Job(command=("python", "x.py"), np=np, cluster=cluster, env={"A": "1"}, options=options)


def test_mpirun_on_emulated_hosts_uses_addresses_sshd_prefix_and_forwards_paths(monkeypatch):
    monkeypatch.setenv("PATH", "/venv/bin:/usr/bin")
    monkeypatch.setenv("PYTHONPATH", "/repo")
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    job = emulated_job(flavor="openmpi")
    (spec,) = MpiLauncher(program="/opt/ompi/bin/mpirun-under-test", as_root=True).build(
        job, allocate(job.cluster, 2)
    )
    assert list(spec.argv) == [
        "/opt/ompi/bin/mpirun-under-test", "--allow-run-as-root", "-np", "2",
        "-H", "10.231.7.1:1,10.231.7.2:1", "--bind-to", "none", "--map-by", "slot",
        "--tag-output", "--prtemca", "plm_ssh_agent", "ssh " + shlex.join(SSH_OPTS),
        "--prefix", "/opt/ompi", "-x", "PATH", "-x", "PYTHONPATH",
        "-x", "PYTHONUNBUFFERED=1", "-x", "A=1", "python", "x.py",
    ]  # fmt: skip
    assert spec.host.namespace is None and spec.host.is_local  # mpirun runs on this machine


def test_mpich_is_refused_on_emulated_clusters():
    with pytest.raises(LaunchError, match="MPICH is not supported"):
        MpiLauncher(program=sys.executable).check(emulated_job(flavor="mpich"))


def test_horovodrun_is_refused_on_emulated_clusters_naming_the_alternative(tmp_path):
    with pytest.raises(LaunchError, match=r"rendezvous.*launcher='mpi'"):
        HorovodLauncher().check(emulated_job())
    # Through launch(), before anything is created (no root needed to get this far).
    with pytest.raises(LaunchError, match="launcher='mpi'"):
        launch(["python", "-c", "pass"], np=2, launcher="horovod", cluster=profile(tmp_path),
               results_root=tmp_path, view=None)  # fmt: skip
    assert not (tmp_path / "runs").exists()


def test_horovodrun_gets_the_labs_ssh():
    """horovodrun's own ssh turns host-key checking off; it runs the run's ``ssh`` (first on
    its PATH) instead, which checks keys (here: against the emulation's own known_hosts)."""
    job = emulated_job(ssh_bin="/r/run-1/bin")
    (spec,) = HorovodLauncher().build(job, allocate(job.cluster, 2))
    assert spec.env["PATH"].startswith("/r/run-1/bin" + os.pathsep)
    assert spec.argv[spec.argv.index("-H") + 1] == "10.231.7.1:1,10.231.7.2:1"


# ---------------------------------------------------------------- real runs (root)


@needs_root
@needs_sshd
@pytest.mark.root
@pytest.mark.timeout(120)
def test_horovodrun_to_a_host_whose_key_is_not_known_is_refused_before_any_rank(
    tmp_path, monkeypatch
):
    """The emulated hosts' key is taken out of the emulation's known_hosts once its sshds
    are up: horovodrun's probe (through the run's ssh) fails on host-key verification, and
    no rank ever starts. (horovod runs are refused on emulated clusters for Gloo's
    rendezvous, which is beside the point here: that refusal is lifted for this test.)"""
    if find_program("horovodrun") is None:
        pytest.skip("no horovodrun")
    from lab.cluster.emulation import sshd
    from lab.cluster.launchers import horovod

    monkeypatch.setattr(horovod, "refuse_emulated", lambda job: None)

    real_start = sshd.start

    def start_then_forget_keys(*args, **kwargs):
        options = real_start(*args, **kwargs)
        known = next(o for o in options if o.startswith("UserKnownHostsFile="))
        Path(known.partition("=")[2]).write_text("")
        return options

    monkeypatch.setattr(sshd, "start", start_then_forget_keys)
    marker = tmp_path / "a-rank-ran"
    result = launch(
        [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"], np=2,
        launcher="horovod", cluster=profile(tmp_path), results_root=tmp_path, view=None,
        timeout=90, check=False,
    )  # fmt: skip
    said = (result.run_dir / "launcher.log").read_text()
    assert not result.ok and result.state.value == "failed"
    assert "Host key verification failed" in said, said[-2000:]
    assert not marker.exists()
    wrapper = (result.run_dir / "bin" / "ssh").read_text()
    assert "StrictHostKeyChecking=yes" in wrapper
    assert_nothing_left(tag_of(result.run_dir), [])


@needs_root
@needs_mpirun
@needs_sshd
@pytest.mark.root
@pytest.mark.timeout(90)
def test_mpirun_ranks_run_in_their_hosts_and_leave_nothing(tmp_path):
    ip = shutil.which("ip") or "ip"
    result = launch(
        [sys.executable, "-c", PROBE, ip], np=2, launcher="mpi", cluster=profile(tmp_path),
        env=RANK_ENV, results_root=tmp_path, view=None, timeout=60,
    )  # fmt: skip
    assert result.ok
    tag, got = tag_of(result.run_dir), probes(result.run_dir)
    assert sorted(got) == [0, 1], got
    own_inode = os.stat("/proc/self/ns/net").st_ino
    for rank, rec in got.items():
        host = f"h{rank + 1}"
        assert rec["netns"] == state.netns_name(tag, host)
        assert rec["host"] == host and rec["sshd"] == "open"  # variables from sshd's SetEnv
        assert rec["hostname"] == host  # its own UTS namespace, as OpenMPI needs
        assert f"{state.cgroup_dir(tag)}/{host}" in rec["cgroup"]
        assert rec["path"] == os.environ["PATH"]  # forwarded with -x
    assert len({own_inode, got[0]["netns_inode"], got[1]["netns_inode"]}) == 3
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    (mpirun,) = [p["argv"] for p in manifest["processes"] if p["role"] == "launcher"]
    assert "plm_ssh_agent" in mpirun and "--prefix" in mpirun
    assert_nothing_left(tag, [r["pid"] for r in got.values()])


@needs_root
@pytest.mark.root
@pytest.mark.timeout(60)
def test_per_rank_launcher_runs_without_sshd(tmp_path):
    """Only launchers that reach hosts over SSH pay for an sshd."""
    ip = shutil.which("ip") or "ip"
    result = launch(
        [sys.executable, "-c", PROBE, ip], np=2, launcher="local", cluster=profile(tmp_path),
        env=RANK_ENV, results_root=tmp_path, view=None, timeout=45,
    )  # fmt: skip
    got = probes(result.run_dir)
    tag = tag_of(result.run_dir)
    assert [(r, got[r]["netns"], got[r]["sshd"]) for r in sorted(got)] == [
        (0, state.netns_name(tag, "h1"), "closed"),
        (1, state.netns_name(tag, "h2"), "closed"),
    ]
    assert_nothing_left(tag, [r["pid"] for r in got.values()])


@needs_root
@needs_mpirun
@needs_sshd
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_horovod_allreduce_over_emulated_hosts_through_mpirun(tmp_path):
    pytest.importorskip("horovod.tensorflow")
    command = [
        sys.executable, "-m", "lab.bench.synthetic", "--backend", "horovod",
        "--model", "tiny_cnn", "--steps", "3", "--warmup-steps", "1", "--image-size", "32",
    ]  # fmt: skip
    result = launch(
        command, np=2, launcher="mpi", cluster=profile(tmp_path, cpu=0.9),
        env={**RANK_ENV, "TF_USE_LEGACY_KERAS": "1"}, results_root=tmp_path, view=None,
        timeout=150, check=False,
    )  # fmt: skip
    logs = {p.name: p.read_text() for p in result.run_dir.glob("*.log")}
    assert result.ok, {k: v[-1500:] for k, v in logs.items()}
    records = [
        r
        for p in result.run_dir.glob("rank-*.log")
        for r in map(parse_record, p.read_text().splitlines())
        if r
    ]
    headers = {r["rank"]: r for r in records if r["kind"] == "header"}
    summaries = {r["rank"]: r for r in records if r["kind"] == "summary"}
    steps = [(r["rank"], r["step"]) for r in records if r["kind"] == "step"]
    assert sorted(headers) == sorted(summaries) == [0, 1]
    assert all(h["world_size"] == 2 and h["backend"] == "horovod" for h in headers.values())
    assert [headers[r]["host"] for r in (0, 1)] == ["h1", "h2"]  # one rank per emulated host
    assert sorted(steps) == [(r, s) for r in (0, 1) for s in range(4)]
    print("horovod over emulated hosts:", {r: s["img_per_sec"] for r, s in summaries.items()},
          "img/s per rank;", {r: h.get("controller") for r, h in headers.items()})  # fmt: skip
    assert_nothing_left(tag_of(result.run_dir), [h["pid"] for h in headers.values()])
