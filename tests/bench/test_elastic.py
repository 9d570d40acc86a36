"""Dynamic scaling: the hosts-file plumbing (pure) and the latency arithmetic. Real
Horovod Elastic and KungFu runs that grow 1→2 and shrink 2→1 on a timed schedule are the
Fig 7 notebook's, checked by the notebook test (tests/experiments/notebook_checks.py);
KungFu's on a step schedule is in tests/cluster/test_ports_real.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.bench.elastic import resize_latencies, throughput_by_size
from lab.cluster.elastic_hosts import (
    Change,
    format_hosts,
    parse_hosts,
    parse_schedule,
    run_schedule,
    write_discovery_script,
    write_hosts,
)
from lab.errors import ParameterError

REPO = Path(__file__).resolve().parents[2]
HOROVODRUN = Path(sys.executable).parent / "horovodrun"


# ------------------------------------------------------------------ hosts plumbing


def test_parse_schedule_bare_slots_and_named_hosts() -> None:
    got = parse_schedule("0:1, 20:2,40:h1:2+h2:1,60:stop", default_host="localhost")
    assert got == [
        Change(0.0, (("localhost", 1),)),
        Change(20.0, (("localhost", 2),)),
        Change(40.0, (("h1", 2), ("h2", 1))),
        Change(60.0, stop=True),
    ]
    assert [c.slots for c in got] == [1, 2, 3, 0]


@pytest.mark.parametrize("bad", ["", "x:1", "10", "0:1,0:2", "5:1,2:2", "0:h1:two", "-1:1"])
def test_parse_schedule_rejects_bad_entries(bad: str) -> None:
    with pytest.raises(ParameterError) as err:
        parse_schedule(bad)
    assert err.value.name == "schedule" or err.value.name == "hosts"


def test_parse_hosts_drops_empty_hosts() -> None:
    assert parse_hosts("0") == ()
    assert parse_hosts("a:0+b:2") == (("b", 2),)
    assert format_hosts({"a": 2, "b": 0, "127.0.0.1": 1}) == "a:2\n127.0.0.1:1\n"


def test_discovery_script_prints_the_current_file(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    script = write_discovery_script(tmp_path / "discover.sh", hosts)
    for slots in (1, 2, 4):
        write_hosts(hosts, {"localhost": slots})
        out = subprocess.run([str(script)], capture_output=True, text=True, timeout=10, check=True)
        assert out.stdout == f"localhost:{slots}\n"
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write leaves no temp file


def test_run_schedule_writes_in_order_and_reports_times(tmp_path: Path) -> None:
    hosts, stop_file = tmp_path / "hosts", tmp_path / "stop"
    seen: list[tuple[Change, float, str]] = []

    def on_write(change: Change, t: float) -> None:
        seen.append((change, t, "" if change.stop else hosts.read_text()))

    changes = parse_schedule("0:1,0.1:2,0.2:1,0.3:stop")
    begin = time.time()
    done = run_schedule(hosts, changes, stop_file, on_write=on_write)
    assert [c for c, _ in done] == changes
    assert [text for _, _, text in seen] == ["localhost:1\n", "localhost:2\n", "localhost:1\n", ""]
    times = [t for _, t, _ in seen]
    assert times == sorted(times) and times[0] >= begin
    assert stop_file.exists()


def test_run_schedule_needs_a_stop_file_for_a_stop_entry(tmp_path: Path) -> None:
    with pytest.raises(ParameterError):
        run_schedule(tmp_path / "hosts", parse_schedule("0:1,1:stop"), None)


def test_cli_rejects_a_bad_schedule(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "lab.cluster.elastic_hosts", "--hosts-file", str(tmp_path / "h")]
    out = subprocess.run(
        [*argv, "--schedule", "10"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert out.returncode == 2 and "schedule" in out.stderr


# ------------------------------------------------------------------ latency arithmetic


def _step(t: float, size: int, rank: int = 0) -> dict:
    return {"kind": "step", "rank": rank, "time": t, "size": size, "samples": 32}


def test_resize_latencies_pair_each_request_with_the_first_step_at_its_size() -> None:
    recs = [
        {"kind": "event", "name": "discovery", "slots": 1, "time": 0.0},
        *[_step(t, 1) for t in (5.0, 6.0, 7.0)],
        {"kind": "event", "name": "discovery", "slots": 2, "time": 7.5},
        _step(8.0, 1),  # still the old size: the resize is not done yet
        {"kind": "event", "name": "resize", "old_size": 1, "new_size": 2, "time": 20.0},
        *[_step(t, 2) for t in (21.0, 21.5)],
        {"kind": "event", "name": "discovery", "slots": 1, "time": 22.0},
        _step(22.25, 1),
    ]
    got = resize_latencies(reversed(recs))  # order does not matter
    assert [(r["old_size"], r["new_size"]) for r in got] == [(1, 2), (2, 1)]
    assert got[0]["latency"] == pytest.approx(13.5) and got[0]["reset"] == 20.0
    assert got[1]["latency"] == pytest.approx(0.25) and got[1]["reset"] is None


def test_resize_latency_is_none_when_the_size_never_came() -> None:
    recs = [_step(1.0, 1), {"kind": "event", "name": "discovery", "slots": 4, "time": 2.0}]
    (only,) = resize_latencies(recs)
    assert only["new_size"] == 4 and only["latency"] is None


def test_throughput_by_size_counts_the_whole_job() -> None:
    recs = [
        {"kind": "step", "rank": 0, "size": 1, "samples": 32, "seconds": 0.5, "warmup": False},
        {"kind": "step", "rank": 0, "size": 2, "samples": 32, "seconds": 1.0, "warmup": False},
        {"kind": "step", "rank": 1, "size": 2, "samples": 32, "seconds": 9.0, "warmup": False},
        {"kind": "step", "rank": 0, "size": 2, "samples": 32, "seconds": 9.0, "warmup": True},
    ]
    assert throughput_by_size(recs) == {1: 64.0, 2: 64.0}


def test_workload_rejects_bad_flags_before_importing_tensorflow() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lab.bench.elastic", "--commit-every", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert out.returncode == 2 and "commit-every" in out.stderr
