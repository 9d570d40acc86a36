"""Emulated hosts start at full speed; their CPU shares apply from the job's first step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lab.cluster import emulation, launch
from lab.cluster.emulation.startup import check_startup
from lab.cluster.inventory import cluster_from_dict
from lab.errors import ParameterError
from lab.metrics.records import parse_record

WHY = emulation.missing()
needs_root = pytest.mark.skipif(WHY is not None, reason=WHY or "")
PROBE = str(Path(__file__).parents[1] / "bin" / "spin_then_record.py")


def test_startup_setting_is_checked() -> None:
    assert check_startup(None) == "full" and check_startup("share") == "share"
    with pytest.raises(ParameterError, match=r"emulated\.startup"):
        check_startup("fast")


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
