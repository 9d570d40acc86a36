"""Emulated clusters: real namespaces, veths, bridge, tc and cgroups (root tests), plus the
pure parts (profile parsing) and the refusal to run without root."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.bench import allreduce as allreduce_bench
from lab.bench import spin as spin_bench
from lab.cluster import emulation
from lab.cluster.emulation import cgroups, lifecycle, netns, shaping, spec, state
from lab.cluster.inventory import Cluster, Host, load_profile, resolve_cluster
from lab.errors import LaunchError, ParameterError
from lab.metrics.records import parse_record

REPO = Path(__file__).resolve().parents[2]
WHY = emulation.missing()
needs_root = pytest.mark.skipif(WHY is not None, reason=WHY or "")
RANK_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("1gbit", 1e9),
        ("100mbit", 1e8),
        ("10Gbit", 1e10),
        ("500kbit", 5e5),
        ("1e9", 1e9),
        ("125mbps", 1e9),
    ],
)
def test_parse_rate(text: str, bits: float) -> None:
    assert spec.parse_rate(text) == pytest.approx(bits)


@pytest.mark.parametrize(("text", "secs"), [("1ms", 1e-3), ("500us", 5e-4), ("0", 0.0), (2, 2e-3)])
def test_parse_time(text: object, secs: float) -> None:
    assert spec.parse_time(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["fast", "-1mbit", "0"])
def test_bad_rate_names_parameter(bad: str) -> None:
    with pytest.raises(ParameterError, match=r"h1\.link\.bandwidth"):
        spec.host_specs({"hosts": 1, "link": {"bandwidth": bad}}, ["h1"])


def test_overrides_apply_per_host() -> None:
    em = {
        "hosts": 2,
        "cpu": 0.4,
        "link": {"bandwidth": "1gbit", "latency": "1ms"},
        "overrides": {"h2": {"cpu": 0.2, "link": {"bandwidth": "100mbit"}}},
    }
    h1, h2 = spec.host_specs(em, ["h1", "h2"])
    assert (h1.cpu, h1.bandwidth, h1.latency) == (0.4, 1e9, 1e-3)
    assert (h2.cpu, h2.bandwidth, h2.latency) == (0.2, 1e8, 1e-3)
    with pytest.raises(ParameterError, match="overrides"):
        spec.host_specs({**em, "overrides": {"h9": {"cpu": 1}}}, ["h1", "h2"])
    # a 10-ms period cannot hold a quota under the kernel's 1 ms: said, not silently raised
    with pytest.raises(ParameterError, match=r"h2\.cpu.*>= 0\.1"):
        spec.host_specs({**em, "overrides": {"h2": {"cpu": 0.05}}}, ["h1", "h2"])


@pytest.mark.parametrize("name", ["emulated-2", "emulated-4"])
def test_shipped_profiles(name: str) -> None:
    n = int(name.split("-")[1])
    for cluster in (
        resolve_cluster(cluster=name),
        load_profile(REPO / f"env/clusters/{name}.yaml"),
    ):
        assert [h.name for h in cluster.hosts] == [f"h{i + 1}" for i in range(n)]
        assert cluster.emulated is not None and not cluster.is_local
        specs = spec.host_specs(cluster.emulated, [h.name for h in cluster.hosts])
        assert {(s.cpu, s.bandwidth, s.latency) for s in specs} == {(0.4, 1e9, 1e-3)}


def test_plain_hosts_pass_through() -> None:
    argv = ["python", "-c", "pass"]
    assert emulation.wrap_argv(Host("localhost"), argv) == argv
    with pytest.raises(LaunchError, match="not made by"):
        emulation.wrap_argv(Host("h1", namespace="distlab-000000-h1"), argv)


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/python3").exists(), reason="needs root to su"
)
def test_without_root_says_so() -> None:
    """A real unprivileged process is refused with the reason, before anything is made."""
    code = (
        "from lab.cluster.emulation import missing, prepare\n"
        "from lab.cluster.inventory import cluster_from_dict\n"
        "print(missing())\n"
        "c = cluster_from_dict({'emulated': {'hosts': 2}}, 'x')\n"
        "try:\n    prepare(c).__enter__()\nexcept Exception as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run(
        ["su", "nobody", "-s", "/bin/sh", "-c", f"/usr/bin/python3 -c {shlex.quote(code)}"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": "/tmp"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.stdout.splitlines() == [
        "emulated clusters need root (network namespaces, tc and cgroups)",
        "LaunchError emulated clusters need root (network namespaces, tc and cgroups)",
    ], out.stderr


def test_spin_emits_steps_and_summary() -> None:
    out = subprocess.run(
        spin_bench.Config(seconds=0.4, report=0.1).command(sys.executable),
        cwd=REPO,
        env={**os.environ, **RANK_ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )
    recs = [r for r in map(parse_record, out.stdout.splitlines()) if r]
    steps = [r for r in recs if r["kind"] == "step"]
    summary = [r for r in recs if r["kind"] == "summary"]
    assert out.returncode == 0, out.stderr
    assert len(steps) >= 2 and len(summary) == 1
    assert sum(s["samples"] for s in steps) == summary[0]["samples"] > 0
    # the steps' CPU is the whole run's but for the last step record's own printing, which
    # the summary counts (0.4 ms of 0.4 s once under load: 1e-3 was too tight)
    total = summary[0]["cpu_seconds"]
    assert total - 0.005 <= sum(s["cpu_seconds"] for s in steps) <= total + 1e-5  # rounding


# ---------------------------------------------------------------- real kernel objects


def with_emulated(cluster: Cluster, **changes: object) -> Cluster:
    return dataclasses.replace(cluster, emulated={**(cluster.emulated or {}), **changes})


def leftovers(tag: str) -> dict[str, list[str]]:
    """Every kernel object and record carrying ``tag`` that still exists."""
    links = json.loads(netns.run(["ip", "-j", "link", "show"]) or "[]")
    groups = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{state.cgroup_dir(tag)}")]
    groups += [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/*/{state.cgroup_dir(tag)}")]
    found = {
        "netns": [n for n in netns.list_netns() if tag in n],
        "links": [link["ifname"] for link in links if tag in link["ifname"]],
        "cgroups": groups,
        "records": [str(p) for p in state.state_dir().glob(f"{tag}.*")],
    }
    return {k: v for k, v in found.items() if v}


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_exec(pid: int, comm: str, timeout: float = 30) -> None:
    """Wait until a wrapped process has exec'd ``comm`` (so it is in its cgroup and netns)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} did not exec {comm!r} within {timeout} s")


def run_in(host: Host, argv: list[str], timeout: float = 60, **env: str) -> str:
    done = subprocess.run(
        emulation.wrap_argv(host, argv),
        cwd=REPO,
        env={**os.environ, **RANK_ENV, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def records_of(out: str, kind: str) -> list[dict]:
    return [r for r in map(parse_record, out.splitlines()) if r and r["kind"] == kind]


@needs_root
@pytest.mark.root
@pytest.mark.timeout(60)
def test_hosts_get_namespace_cgroup_and_shaped_links() -> None:
    cluster = with_emulated(
        load_profile("emulated-2"), overrides={"h2": {"cpu": 0.2, "link": {"bandwidth": "100mbit"}}}
    )
    with emulation.prepare(cluster) as up:
        info = up.extra["emulation"]
        h1, h2 = up.hosts
        assert h1.namespace in netns.list_netns() and h2.namespace in netns.list_netns()
        assert h1.reach_address.startswith(info["subnet"].rsplit(".", 1)[0] + ".")
        group = Path(info["hosts"]["h2"]["cgroup"])
        if (group / "cpu.cfs_quota_us").exists():  # 0.2 of a core in 10-ms periods
            assert (group / "cpu.cfs_quota_us").read_text().strip() == "2000"
            assert (group / "cpu.cfs_period_us").read_text().strip() == "10000"
        else:
            assert (group / "cpu.max").read_text().split() == ["2000", "10000"]
        assert "rate 100Mbit" in shaping.show(info["hosts"]["h2"]["veth"])
        assert "rate 100Mbit" in shaping.show(netns.HOST_IFNAME, h2.namespace)
        assert "rate 1Gbit" in shaping.show(netns.HOST_IFNAME, h1.namespace)
        # A rank and its children run in the host's cgroup and see only the host's network.
        out = run_in(h2, ["sh", "-c", "cat /proc/self/cgroup; ip -4 -o addr show"])
        assert f"{state.cgroup_dir(info['tag'])}/h2" in out
        addrs = {line.split()[3] for line in out.splitlines() if " inet " in line}
        assert addrs == {"127.0.0.1/8", f"{h2.address}/24"}
        # h2 reaches h1 over the bridge.
        server = subprocess.Popen(
            emulation.wrap_argv(h1, [sys.executable, "-c", ECHO_SERVER, h1.reach_address]),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "listening"
            got = run_in(h2, [sys.executable, "-c", ECHO_CLIENT, h1.reach_address])
            assert got.strip() == f"from {h2.address}"
        finally:
            server.kill()
            server.wait(timeout=10)
    assert leftovers(info["tag"]) == {}


ECHO_SERVER = """
import socket, sys
s = socket.create_server((sys.argv[1], 29517)); print("listening", flush=True)
c, addr = s.accept(); c.sendall(f"from {addr[0]}".encode()); c.close()
"""
ECHO_CLIENT = """
import socket, sys
print(socket.create_connection((sys.argv[1], 29517), timeout=10).recv(100).decode())
"""


def spin(hosts: tuple[Host, ...], seconds: float) -> list[dict]:
    """Run lab.bench.spin on each host at once; each rank's summary record."""
    argv = spin_bench.Config(seconds=seconds).command(sys.executable)
    procs = [
        subprocess.Popen(
            emulation.wrap_argv(h, argv),
            cwd=REPO,
            env={**os.environ, **RANK_ENV},
            stdout=subprocess.PIPE,
            text=True,
        )
        for h in hosts
    ]
    summaries = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        summaries.extend(records_of(out, "summary"))
    assert len(summaries) == len(hosts)
    return summaries


@needs_root
@pytest.mark.root
@pytest.mark.timeout(120)
def test_compute_bound_job_scales_with_hosts() -> None:
    """Four hosts reach >= 3x one host's throughput (issue's criterion), and no host gets
    more than its quota. 0.2 core per host keeps all four (0.8 core) well within a 2-core
    machine that is also running other work; 1- and 4-host runs alternate, so that drifts
    in the machine's speed (other tenants on the cores) hit both alike."""
    quota = 0.2
    cluster = with_emulated(load_profile("emulated-4"), cpu=quota)
    one, four = [], []
    with emulation.prepare(cluster) as up:
        for _ in range(2):
            for n, into in ((1, one), (4, four)):
                ranks = spin(up.hosts[:n], 2.0)
                assert all(r["cpu_share"] <= 1.1 * quota for r in ranks), ranks
                into.append(sum(r["throughput"] for r in ranks))
    ratio = statistics.mean(four) / statistics.mean(one)
    print(f"spin: 1 host {one} /s, 4 hosts {four} /s, ratio {ratio:.2f}")
    assert ratio >= 3.0


@needs_root
@pytest.mark.root
@pytest.mark.timeout(180)
def test_allreduce_over_100mbit_is_near_ring_bound() -> None:
    """16 MiB allreduce between 2 hosts on 100 Mbit/s links: within 30% of
    2(N-1)/N * bytes / bandwidth (issue's criterion)."""
    pytest.importorskip("torch")
    nbytes, bandwidth, n = 16 * 2**20, 100e6, 2
    cluster = with_emulated(load_profile("emulated-2"), link={"bandwidth": "100mbit"})
    with emulation.prepare(cluster) as up:
        env = {
            **os.environ,
            **RANK_ENV,
            "WORLD_SIZE": str(n),
            "MASTER_ADDR": up.hosts[0].reach_address,
            "MASTER_PORT": "29518",
        }
        argv = allreduce_bench.Config(bytes=nbytes, repeats=3).command(sys.executable)
        procs = [
            subprocess.Popen(
                emulation.wrap_argv(h, argv),
                cwd=REPO,
                env={**env, "RANK": str(r)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for r, h in enumerate(up.hosts)
        ]
        outs = [p.communicate(timeout=150) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-2000:]
    measured = statistics.median(
        r["value"] for r in records_of(outs[0][0], "metric") if r["name"] == "allreduce_seconds"
    )
    bound = 2 * (n - 1) / n * nbytes * 8 / bandwidth
    print(f"allreduce 16 MiB @100Mbit: {measured:.3f} s, ring bound {bound:.3f} s")
    assert abs(measured / bound - 1) <= 0.30


@needs_root
@pytest.mark.root
@pytest.mark.timeout(60)
def test_failed_run_removes_everything_and_ends_its_processes() -> None:
    with (
        pytest.raises(RuntimeError, match="rank blew up"),
        emulation.prepare(load_profile("emulated-2")) as up,
    ):
        tag = up.extra["emulation"]["tag"]
        sleeper = subprocess.Popen(emulation.wrap_argv(up.hosts[1], ["sleep", "300"]))
        wait_for_exec(sleeper.pid, "sleep")
        raise RuntimeError("rank blew up")
    assert sleeper.wait(timeout=10) == -signal.SIGKILL
    assert leftovers(tag) == {}


@needs_root
@pytest.mark.root
@pytest.mark.timeout(60)
def test_pinned_subnet_in_use_fails_clearly() -> None:
    with emulation.prepare(load_profile("emulated-2")) as up:
        taken = up.extra["emulation"]["subnet"]
        again = with_emulated(load_profile("emulated-2"), subnet=taken)
        with pytest.raises(LaunchError, match=f"subnet {taken} is already in use"):
            emulation.prepare(again).__enter__()
        assert len(netns.list_netns()) >= 2
    assert leftovers(up.extra["emulation"]["tag"]) == {}


@needs_root
@pytest.mark.root
@pytest.mark.timeout(60)
def test_a_tag_in_use_is_never_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second cluster with a live cluster's tag would remove that cluster's hosts when it
    failed: a drawn tag that any namespace, link, cgroup or record carries is drawn again."""
    with emulation.prepare(load_profile("emulated-2")) as up:
        taken = up.extra["emulation"]["tag"]
        draws = iter([taken, "0f0f0f"])
        monkeypatch.setattr(state, "new_tag", lambda: next(draws))
        assert lifecycle._free_tag(cgroups.detect()) == "0f0f0f"
    assert leftovers(taken) == {}


HOLDER = """
import pathlib, subprocess, sys, time
from lab.bench import allreduce as allreduce_bench
from lab.bench import spin as spin_bench
from lab.cluster import emulation
from lab.cluster.inventory import load_profile
with emulation.prepare(load_profile("emulated-2")) as up:
    rank = subprocess.Popen(emulation.wrap_argv(up.hosts[0], ["sleep", "300"]))
    while pathlib.Path(f"/proc/{rank.pid}/comm").read_text().strip() != "sleep":
        time.sleep(0.05)
    print(up.extra["emulation"]["tag"], rank.pid, flush=True)
    time.sleep(300)
"""


@needs_root
@pytest.mark.root
@pytest.mark.timeout(90)
def test_kill9_of_lab_and_keeper_leaves_stale_objects_that_the_next_start_removes() -> None:
    """The keeper removes a killed lab's cluster (tests/cluster/test_emulation_kill9.py);
    with the keeper killed first, the next start does."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    decoy_ns, decoy_cg = "distlab-decoy0-h1", None
    try:
        assert holder.stdout is not None
        tag, rank_pid = holder.stdout.readline().split()
        rec = next(r for r in state.records() if r.tag == tag)
        assert rec.keeper_pid is not None and rec.keeper_alive()
        os.kill(rec.keeper_pid, signal.SIGKILL)
        while rec.keeper_alive():
            time.sleep(0.05)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        stale = leftovers(tag)
        assert set(stale) == {"netns", "links", "cgroups", "records"} and alive(int(rank_pid))
        # Objects named like the lab's but in no record are someone else's: never touched.
        netns.run(["ip", "netns", "add", decoy_ns])
        decoy_cg = Path(stale["cgroups"][0]).parent / "distlab-decoy0"
        decoy_cg.mkdir()
        with emulation.prepare(load_profile("emulated-2")) as up:
            assert leftovers(tag) == {}
            assert not alive(int(rank_pid))
            assert decoy_ns in netns.list_netns() and decoy_cg.is_dir()
        assert leftovers(up.extra["emulation"]["tag"]) == {}
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
        with contextlib.suppress(LaunchError):
            netns.delete_netns(decoy_ns)
        if decoy_cg is not None and decoy_cg.is_dir():
            decoy_cg.rmdir()
        emulation.cleanup_stale()


@needs_root
@pytest.mark.root
@pytest.mark.timeout(90)
def test_sshd_lets_ssh_and_mpirun_reach_hosts_by_address() -> None:
    if not (shutil.which("ssh") and Path("/usr/sbin/sshd").is_file()):
        pytest.skip("needs OpenSSH client and server (apt-get install openssh-server)")
    privsep = Path("/run/sshd")
    if privsep.is_dir() and not any(privsep.iterdir()):
        privsep.rmdir()  # as on a fresh container, where no sshd service ever ran
    cluster = with_emulated(load_profile("emulated-2"), sshd=True)
    with emulation.prepare(cluster) as up:
        assert privsep.is_dir(), "starting emulated sshd creates its privsep directory"
        tag, opts = up.extra["emulation"]["tag"], up.extra["ssh_options"]
        servers = [p.pid for p in lifecycle._SERVERS[tag]]
        for host in up.hosts:
            out = subprocess.run(
                ["ssh", *opts, "-o", "BatchMode=yes", host.reach_address,
                 "cat /proc/self/cgroup; ip -4 -o addr show eth0"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            assert f"{state.cgroup_dir(tag)}/{host.name}" in out.stdout
            assert f"inet {host.address}/24" in out.stdout
        mpirun = shutil.which("mpirun") or str(Path(sys.executable).parent / "mpirun")
        if Path(mpirun).is_file():
            agent = "ssh " + shlex.join(opts)
            out = subprocess.run(
                [mpirun, "--allow-run-as-root", "-H", up.host_string(), "-np", "2",
                 "--prtemca", "plm_ssh_agent", agent, "--prefix", str(Path(mpirun).parents[1]),
                 "ip", "-4", "-o", "addr", "show", "eth0"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            assert {f"{h.address}/24" for h in up.hosts} <= set(out.stdout.split())
    assert not any(alive(pid) for pid in servers)
    assert leftovers(tag) == {} and not (state.state_dir() / tag).exists()
