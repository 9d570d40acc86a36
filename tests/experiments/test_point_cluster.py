"""A point's cluster is read once: pinning, the ranks' interpreter and launch share one
Cluster (a profile read three times could differ between reads, and costs three parses)."""

from __future__ import annotations

from typing import Any

import pytest

import lab.cluster
from lab.cluster import inventory
from lab.cluster.inventory import Cluster
from lab.experiments.points import run_point


def test_run_point_reads_its_profile_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[Any] = []
    load = inventory.load_profile

    def counting(name: Any) -> Cluster:
        reads.append(name)
        return load(name)

    launched: dict[str, Any] = {}
    monkeypatch.setattr(inventory, "load_profile", counting)
    monkeypatch.setattr(lab.cluster, "launch", lambda argv, **kw: launched.update(kw, argv=argv))
    run_point({"system": "single", "model": "tiny_cnn"}, "t/point", cluster="local", view=None)
    assert reads == ["local"]
    assert isinstance(launched["cluster"], Cluster) and launched["cluster"].name == "local"
    assert launched["params"]["cluster"] == "local" and launched["params"]["pin_cpus"] is True
    assert "lab.cluster.affinity" in launched["argv"]
