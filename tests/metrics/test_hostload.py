"""Emulated hosts' use over a window of a run, read back from the files the run kept."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lab.errors import NothingMeasured
from lab.metrics import hostload


def test_utilisation_from_host_samples(tmp_path: Path) -> None:
    head = {"kind": "hosts", "hosts": {"h1": {"cpu": 0.5, "bandwidth": 8e6, "veth": "v",
                                              "cgroup": "g"}}}  # fmt: skip
    samples = [
        {"time": 10.0 + i, "host": "h1", "cpu_seconds": 0.4 * i, "periods": 10 * i,
         "throttled": 5 * i, "rx_bytes": 500_000 * i, "tx_bytes": 100_000 * i}
        for i in range(5)
    ]  # fmt: skip
    lines = [json.dumps(head), *map(json.dumps, samples)]
    (tmp_path / "hostload.jsonl").write_text("\n".join(lines) + "\n")
    use = hostload.utilisation(tmp_path, 10.5, 14.0).iloc[0]
    assert use["cpu"] == pytest.approx(0.4) and use["cpu_util"] == pytest.approx(0.8)
    assert use["throttled"] == pytest.approx(0.5)
    assert use["sent_mbit"] == pytest.approx(4.0) and use["received_mbit"] == pytest.approx(0.8)
    assert use["link_util"] == pytest.approx(0.5)
    with pytest.raises(NothingMeasured):
        hostload.utilisation(tmp_path / "nothing", 0, 1)


def test_outside_load_is_the_machine_rows_mean_in_the_window(tmp_path) -> None:
    lines = [{"t": 0.5 * i, "time": 100.0 + 0.5 * i, "host": None, "outside_cores": 0.1 * i}
             for i in range(10)]  # fmt: skip
    lines += [{"t": 1.0, "time": 101.0, "host": "h1", "cpu_s": 3.0}]
    (tmp_path / "hosts.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    assert hostload.outside_load(tmp_path, 101.0, 102.0) == pytest.approx(0.3)
    assert math.isnan(hostload.outside_load(tmp_path, 200.0, 201.0))
    assert math.isnan(hostload.outside_load(tmp_path / "none", 0.0, 1.0))
