"""Emulated hosts start at full speed; their CPU shares apply from the job's first step."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from lab.bench.shares_wait import MARK_ENV
from lab.cluster import emulation, launch
from lab.cluster.emulation.cgroups import GUARANTEE
from lab.cluster.emulation.startup import StartupShares, check_startup
from lab.cluster.inventory import Host, cluster_from_dict
from lab.cluster.launchers.base import Lines, PerRankLauncher, ProcessSpec
from lab.cluster.output import RunOutput
from lab.cluster.processes import Proc
from lab.errors import ParameterError
from lab.metrics.records import format_record, parse_record

WHY = emulation.missing()
needs_root = pytest.mark.skipif(WHY is not None, reason=WHY or "")
PROBE = str(Path(__file__).parents[1] / "bin" / "spin_then_record.py")


def test_startup_setting_is_checked() -> None:
    assert check_startup(None) == "full" and check_startup("share") == "share"
    with pytest.raises(ParameterError, match=r"emulated\.startup"):
        check_startup("fast")


def test_the_gate_acts_on_the_read_itself_not_behind_the_observer_lanes(tmp_path: Path) -> None:
    """The shares apply while the reader takes the read that holds the first step record,
    though no observer lane ever runs (a launcher process too busy to switch threads), and
    the manifest's summary says how long the record took to be read and applied."""
    gate = StartupShares({"hosts": {}})
    output = RunOutput(tmp_path, PerRankLauncher(), [gate], [0])
    output.feed.put = lambda blocks: None  # the lanes never get a block
    proc = Proc(ProcessSpec(("x",), {}, (0,), Host("localhost")), ["x"], {}, None)
    gate.on_start(str(tmp_path), [0], None)
    printed = time.time() - 0.25
    header = format_record("header", rank=0, time=printed - 1)
    output.take(proc, "stdout", f"starting\n{header}\n")
    assert gate.summary()["why"] == "never"  # a header is not a step
    step = format_record("step", rank=0, step=0, samples=8, seconds=0.1, time=printed)
    output.take(proc, "stdout", f"noise\n{step}\nmore\n")
    shares = gate.summary()
    assert shares["why"] == "first step" and shares["epoch"] is not None
    assert 0.25 <= shares["read_lag_s"] < 5 and 0 <= shares["apply_lag_s"] < 1
    output.close()
    assert (tmp_path / "rank-0.log").read_text().count("\n") == 5  # and every line logged


def test_the_gate_marks_the_shares_applied_for_the_ranks_waiting_on_them(tmp_path: Path) -> None:
    """A stale mark is gone when the run starts; the mark is there once the shares are."""
    mark = tmp_path / "cluster.shares"
    mark.write_text("stale\n")
    gate = StartupShares({"hosts": {}, "shares_mark": str(mark)})
    gate.on_start(str(tmp_path), [0], None)
    assert not mark.exists()
    gate.on_read([Lines(0, "stdout", format_record("header", rank=0) + "\n")])
    assert not mark.exists()  # a header is not a step
    gate.on_read([Lines(0, "stdout", format_record("step", step=0, seconds=0.1) + "\n")])
    assert float(mark.read_text()) == gate.summary()["epoch"]
    gate.on_end("succeeded", 0, {0: 0})


def _weight(driver_version: int, group: Path) -> int:
    """A group's weight in ordinary processes, read back from the kernel."""
    if driver_version == 1:
        return int((group / "cpu.shares").read_text()) // 1024
    return int((group / "cpu.weight").read_text()) // 100


@needs_root
@pytest.mark.root
@pytest.mark.timeout(120)
def test_hosts_start_with_an_uncapped_hosts_weight_and_get_theirs_back_with_the_share(
    tmp_path: Path,
) -> None:
    """Without its quota a capped host's high weight would take the machine from the
    launcher reading its lines; during start-up it counts as its slots."""
    profile = {"name": "w", "emulated": {"hosts": 2, "slots": 2, "cpu": 0.25}}
    with emulation.prepare(cluster_from_dict(profile, "w")) as up:
        info = up.extra["emulation"]
        version, parent = info["cgroup_version"], Path(info["cgroup"])
        groups = [Path(h["cgroup"]) for h in info["hosts"].values()]
        assert [h["weight"] for h in info["hosts"].values()] == [2 * GUARANTEE] * 2
        gate = StartupShares(info)
        gate.on_start(str(tmp_path), [0, 1, 2, 3], None)
        assert [_weight(version, g) for g in groups] == [2, 2]
        assert _weight(version, parent) == 4
        gate.on_read([Lines(0, "stdout", format_record("step", step=0, seconds=0.1) + "\n")])
        assert [_weight(version, g) for g in groups] == [2 * GUARANTEE] * 2
        assert _weight(version, parent) == 4 * GUARANTEE
        # the ranks are told where the mark the gate just made is
        mark = Path(info["shares_mark"])
        assert mark.exists()
        assert {emulation.host_env(h)[MARK_ENV] for h in up.hosts} == {str(mark)}
    assert not mark.exists()  # removed with the cluster


@needs_root
@pytest.mark.root
@pytest.mark.timeout(60)
def test_hosts_that_keep_their_share_from_the_start_name_no_mark() -> None:
    profile = {"name": "s", "emulated": {"hosts": 1, "cpu": 0.5, "startup": "share"}}
    with emulation.prepare(cluster_from_dict(profile, "s")) as up:
        assert "shares_mark" not in up.extra["emulation"]
        assert MARK_ENV not in emulation.host_env(up.hosts[0])


def _throttling(startup: str | None, tmp_path: Path) -> tuple[list[int], list[int], dict]:
    """nr_throttled of the host's samples before and after the rank's record."""
    emulated = {"hosts": 1, "cpu": 0.25, **({"startup": startup} if startup else {})}
    cluster = cluster_from_dict({"name": "startup", "emulated": emulated}, "startup")
    result = launch([sys.executable, PROBE, "1.5"], np=1, cluster=cluster, view=None,
                    experiment="startup", results_root=tmp_path, timeout=60)  # fmt: skip
    log = (result.run_dir / "rank-0.log").read_text()
    records = [r for r in map(parse_record, log.splitlines()) if r and r["kind"] == "step"]
    record_at = records[0]["time"]
    samples = [json.loads(x) for x in (result.run_dir / "hosts.jsonl").read_text().splitlines()]
    h1 = [s for s in samples if s.get("host") == "h1"]
    before = [s["nr_throttled"] for s in h1 if s["time"] < record_at - 0.2]
    after = [s["nr_throttled"] for s in h1 if s["time"] > record_at + 0.5]
    return before, after, json.loads((result.run_dir / "manifest.json").read_text())


@needs_root
@pytest.mark.root
@pytest.mark.timeout(120)
def test_shares_apply_at_the_first_record(tmp_path: Path) -> None:
    """A rank spinning on a 0.25-core host is never throttled before its first step record
    (its header does not count) and is throttled after it."""
    before, after, manifest = _throttling(None, tmp_path)
    assert before and set(before) == {0}
    assert after and after[-1] > 3
    shares = manifest["cpu_shares"]
    assert shares["why"] == "first step" and 1.0 <= shares["after_s"] < 30
    # the wall clock steps are read against (lab.metrics.shares): after the run began
    started = manifest["started"]["epoch"]
    assert started + shares["after_s"] - 1 <= shares["epoch"] <= started + shares["after_s"] + 1


@needs_root
@pytest.mark.root
@pytest.mark.timeout(120)
def test_startup_share_keeps_the_cap_from_the_start(tmp_path: Path) -> None:
    before, _, manifest = _throttling("share", tmp_path)
    assert before and before[-1] > 3  # throttled while it started
    assert "cpu_shares" not in manifest
