"""Each emulated host's CPU use and throttling land in its run directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lab.cluster import emulation, launch
from lab.cluster.emulation import hoststats
from lab.cluster.inventory import cluster_from_dict
from tests.cluster.test_emulation import leftovers

WHY = emulation.missing()
needs_root = pytest.mark.skipif(WHY is not None, reason=WHY or "")


def test_read_group_parses_v1_and_v2_files(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.stat").write_text(
        "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
        "nr_periods 40\nnr_throttled 30\nthrottled_usec 1200000\n"
    )
    assert hoststats.read_group(v2) == {
        "cpu_s": 2.5, "nr_periods": 40, "nr_throttled": 30, "throttled_s": 1.2,
    }  # fmt: skip
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 300000000\n")
    (v1 / "cpuacct.usage").write_text("750000000\n")
    assert hoststats.read_group(v1) == {
        "cpu_s": 0.75, "nr_periods": 10, "nr_throttled": 4, "throttled_s": 0.3,
    }  # fmt: skip


def test_machine_figures_are_read() -> None:
    m = hoststats.read_machine()
    assert m["load1"] >= 0 and m["busy_s"] > 0


@needs_root
@pytest.mark.root
@pytest.mark.timeout(90)
def test_throttled_host_run_directory_holds_its_throttling(tmp_path: Path) -> None:
    """A rank spinning on a 0.2-core host is throttled in most periods; the idle host
    beside it is not, and the run directory says so."""
    # capped from the first instruction (by default a host starts at full speed)
    emulated = {"hosts": 2, "cpu": 0.2, "overrides": {"h2": {"cpu": 1}}, "startup": "share"}
    cluster = cluster_from_dict({"name": "throttled", "emulated": emulated}, "throttled")
    argv = [sys.executable, "-m", "lab.bench.spin", "--seconds", "2", "--report", "0.5"]
    result = launch(argv, np=1, cluster=cluster, experiment="hoststats", view=None,
                    results_root=tmp_path, timeout=60)  # fmt: skip
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    tag = manifest["cluster"]["hosts"][0]["namespace"].split("-")[1]
    hosts = manifest["hosts_cpu"]["hosts"]
    h1, h2 = hosts["h1"], hosts["h2"]
    assert h1["cpu"] == 0.2 and h1["nr_throttled"] > 0 and h1["throttled_s"] > 0
    assert h1["throttled_fraction"] > 0.5
    assert 0.2 < h1["cpu_s"] < 1.0  # 0.2 core for about 2 s (plus start-up)
    assert 0.3 < h1["used_share"] < 1.1
    assert h2["nr_throttled"] == 0 and h2["cpu_s"] < 0.2
    machine = manifest["hosts_cpu"]["machine"]
    assert machine["cpus"] >= 1 and machine["busy_cores"] > 0
    lines = [json.loads(x) for x in (result.run_dir / "hosts.jsonl").read_text().splitlines()]
    h1_lines = [x for x in lines if x["host"] == "h1"]
    assert len(h1_lines) >= 3 and h1_lines[0]["time"] >= manifest["started"]["epoch"] - 1
    assert h1_lines[-1]["nr_throttled"] >= h1_lines[0]["nr_throttled"]
    assert any(x["host"] is None and "outside_cores" in x for x in lines)
    assert leftovers(tag) == {}
