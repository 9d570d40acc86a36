"""How busy each emulated host was during a window of a run: CPU as a fraction of its
share, how often it hit its quota, and its link's use as a fraction of its bandwidth (from
the samples lab.cluster.emulation.monitor writes into the run directory). The file's name
and its reader live here, below the writer, so that reading a run needs no cluster code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.errors import NothingMeasured

HOSTS_FILE = "hostload.jsonl"  # hosts.jsonl is lab.cluster.emulation.hoststats's


def read_hosts(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(each host's share, link and veth; the samples) of a run; empty without a file."""
    path = Path(run_dir) / HOSTS_FILE
    if not path.is_file():
        return {}, []
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    head = lines[0].get("hosts", {}) if lines and lines[0].get("kind") == "hosts" else {}
    return head, [x for x in lines if "host" in x]


def utilisation(run_dir: str | Path, start: float, end: float) -> Any:
    """One row per host over [start, end] (epoch seconds): ``cpu`` (cores used),
    ``cpu_util`` (of its share), ``throttled`` (fraction of quota periods it ran out of
    CPU), ``sent_mbit``/``received_mbit`` (Mbit/s) and ``link_util`` (the busier direction,
    of its bandwidth). Shares or bandwidths that are not set give NaN utilisations."""
    import pandas as pd

    head, samples = read_hosts(run_dir)
    if not samples:
        raise NothingMeasured(f"{run_dir}: no host samples (not an emulated run?)")
    df = pd.DataFrame(samples)
    rows = []
    for host, g in df.groupby("host"):
        g = g.sort_values("time")
        inside = g[(g["time"] >= start) & (g["time"] <= end)]
        if len(inside) < 2:
            continue
        a, b = inside.iloc[0], inside.iloc[-1]
        dt = float(b["time"] - a["time"])
        info = head.get(host, {})
        cpu = (b["cpu_seconds"] - a["cpu_seconds"]) / dt
        periods = (b["periods"] or 0) - (a["periods"] or 0)
        throttled = ((b["throttled"] or 0) - (a["throttled"] or 0)) / periods if periods else None
        sent = (b["rx_bytes"] - a["rx_bytes"]) * 8 / dt / 1e6  # bridge side: rx = from host
        received = (b["tx_bytes"] - a["tx_bytes"]) * 8 / dt / 1e6
        share, bandwidth = info.get("cpu"), info.get("bandwidth")
        rows.append(
            {
                "host": host,
                "cpu": cpu,
                "cpu_share": share,
                "cpu_util": cpu / share if share else float("nan"),
                "throttled": throttled,
                "sent_mbit": sent,
                "received_mbit": received,
                "bandwidth_mbit": bandwidth / 1e6 if bandwidth else None,
                "link_util": max(sent, received) * 1e6 / bandwidth if bandwidth else float("nan"),
            }
        )
    if not rows:
        raise NothingMeasured(f"{run_dir}: fewer than two host samples in the window")
    return pd.DataFrame(rows)


def outside_load(run_dir: str | Path, start: float, end: float) -> float:
    """Cores the machine spent outside the run's hosts over [start, end] (epoch seconds),
    averaged over the samples lab.cluster.emulation.hoststats wrote to ``hosts.jsonl``;
    NaN where there are none (not an emulated run, or no sample in the window)."""
    import json
    import math

    path = Path(run_dir) / "hosts.jsonl"
    values = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            t, v = rec.get("time"), rec.get("outside_cores")
            if rec.get("host") is None and isinstance(v, int | float) and start <= t <= end:
                values.append(float(v))
    return math.fsum(values) / len(values) if values else math.nan
