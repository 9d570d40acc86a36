"""When each emulated host was throttled, for the run views: read from the run directory.

``lab.cluster.emulation.hoststats`` appends one line per host (cumulative CPU seconds,
quota periods, throttled periods, seconds throttled since the run started) and one for the
machine (cores busy with work outside the hosts) to ``hosts.jsonl`` every half second. A
slow stretch of steps means something else when the host ran out of its quota in most
periods, or when the machine was busy with other work, so the views draw both beside the
throughput: per host the fraction of periods throttled in each sampling interval (a band
on the host's own timeline), the run's totals in a table, and the outside load.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOSTS_FILE = "hosts.jsonl"  # lab.cluster.emulation.hoststats.FILE_NAME (kept import-free)
THROTTLED = 0.5  # an interval counts as throttled when most of its periods were


@dataclass(frozen=True)
class HostTotals:
    """One host's figures over the run so far (the last cumulative sample)."""

    host: str
    cpu_s: float
    nr_periods: int
    nr_throttled: int
    throttled_s: float
    ranks: tuple[int, ...] = ()

    @property
    def throttled_fraction(self) -> float:
        return self.nr_throttled / self.nr_periods if self.nr_periods else 0.0


@dataclass(frozen=True)
class HostTimeline:
    """Per host, (start, end, fraction of periods throttled) for each sampling interval
    (seconds since the run started); the totals; the machine's outside load over time."""

    intervals: Mapping[str, tuple[tuple[float, float, float], ...]]
    totals: Mapping[str, HostTotals]
    outside: tuple[tuple[float, float], ...] = ()
    load1_max: float | None = None

    def throttled_spans(self, host: str, above: float = THROTTLED) -> list[tuple[float, float]]:
        """The stretches of the run in which ``host`` was throttled in more than ``above``
        of its periods, adjacent intervals merged."""
        spans: list[tuple[float, float]] = []
        for t0, t1, frac in self.intervals.get(host, ()):
            if frac <= above:
                continue
            if spans and abs(spans[-1][1] - t0) < 1e-9:
                spans[-1] = (spans[-1][0], t1)
            else:
                spans.append((t0, t1))
        return spans


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    for raw in text.splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:  # the sampler may be writing this very line
            continue
        if isinstance(rec, dict) and "t" in rec:
            out.append(rec)
    return out


def _host_ranks(run_dir: Path) -> dict[str, tuple[int, ...]]:
    """Which ranks ran on each host, from the manifest's slots (empty without one)."""
    try:
        slots = json.loads((run_dir / "manifest.json").read_text()).get("slots") or []
    except (OSError, ValueError, AttributeError):
        return {}
    out: dict[str, list[int]] = {}
    for s in slots:
        if isinstance(s, dict) and "host" in s and isinstance(s.get("rank"), int):
            out.setdefault(str(s["host"]), []).append(s["rank"])
    return {h: tuple(sorted(r)) for h, r in out.items()}


def read_timeline(run_dir: str | Path) -> HostTimeline | None:
    """The hosts' throttling so far, or None when the run has no host samples (a run that
    is not on emulated hosts, or one whose first sample is not written yet)."""
    run_dir = Path(run_dir)
    recs = _lines(run_dir / HOSTS_FILE)
    if not recs:
        return None
    ranks = _host_ranks(run_dir)
    prev: dict[str, tuple[float, float, float]] = {}
    intervals: dict[str, list[tuple[float, float, float]]] = {}
    totals: dict[str, HostTotals] = {}
    outside: list[tuple[float, float]] = []
    loads: list[float] = []
    for rec in recs:
        t, host = float(rec["t"]), rec.get("host")
        if host is None:
            if isinstance(rec.get("outside_cores"), int | float):
                outside.append((t, float(rec["outside_cores"])))
            if isinstance(rec.get("load1"), int | float) and rec["load1"] == rec["load1"]:
                loads.append(float(rec["load1"]))
            continue
        host = str(host)
        periods, throttled = _num(rec.get("nr_periods")), _num(rec.get("nr_throttled"))
        t0, p0, n0 = prev.get(host, (0.0, 0.0, 0.0))
        dp = periods - p0
        intervals.setdefault(host, []).append((t0, t, (throttled - n0) / dp if dp > 0 else 0.0))
        prev[host] = (t, periods, throttled)
        totals[host] = HostTotals(
            host=host,
            cpu_s=_num(rec.get("cpu_s")),
            nr_periods=int(periods),
            nr_throttled=int(throttled),
            throttled_s=_num(rec.get("throttled_s")),
            ranks=ranks.get(host, ()),
        )
    return HostTimeline(
        intervals={h: tuple(v) for h, v in intervals.items()},
        totals=totals,
        outside=tuple(outside),
        load1_max=max(loads) if loads else None,
    )


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and value == value else 0.0


def _host_label(t: HostTotals) -> str:
    ranks = ",".join(map(str, t.ranks))
    return f"{t.host} (rank {ranks})" if ranks else t.host


def mean_outside(timeline: HostTimeline) -> float | None:
    """Cores busy with work outside the hosts, averaged over the samples."""
    vals = [v for _, v in timeline.outside]
    return sum(vals) / len(vals) if vals else None


def hosts_text(timeline: HostTimeline | None) -> str:
    """One line for the progress line: each host's throttled share of periods and time,
    then the outside load."""
    if timeline is None:
        return ""
    parts = [
        f"{t.host} throttled {t.throttled_fraction:.0%} ({t.throttled_s:.1f} s)"
        for t in sorted(timeline.totals.values(), key=lambda t: t.host)
    ]
    load = mean_outside(timeline)
    if load is not None:
        parts.append(f"outside load {load:.2f} cores")
    return "  ".join(parts)


def hosts_html(timeline: HostTimeline | None) -> str:
    """A table: per host its ranks, CPU seconds, periods throttled (share), seconds
    throttled and when; below it the machine's outside load."""
    if timeline is None:
        return ""
    rows = []
    for t in sorted(timeline.totals.values(), key=lambda t: t.host):
        spans = timeline.throttled_spans(t.host)
        when = ", ".join(f"{a:.1f}–{b:.1f} s" for a, b in spans[:4])
        if len(spans) > 4:
            when += f" … ({len(spans)} stretches)"
        colour = "#d62728" if t.throttled_fraction > THROTTLED else "inherit"
        rows.append(
            f"<tr><td>{html.escape(_host_label(t))}</td><td>{t.cpu_s:.2f}</td>"
            f"<td>{t.nr_throttled}/{t.nr_periods}</td>"
            f'<td style="color:{colour}">{t.throttled_fraction:.0%}</td>'
            f"<td>{t.throttled_s:.2f}</td><td>{html.escape(when or '—')}</td></tr>"
        )
    load = mean_outside(timeline)
    peak = max((v for _, v in timeline.outside), default=None)
    machine = (
        f"outside load: {load:.2f} cores on average, {peak:.2f} at most"
        + (f"; load average up to {timeline.load1_max:.2f}" if timeline.load1_max else "")
        if load is not None and peak is not None
        else ""
    )
    head = (
        "<tr><th>host</th><th>CPU s</th><th>periods throttled</th><th>share</th>"
        "<th title=\"the kernel's throttled time: summed over CPUs, so it can exceed the "
        "run's seconds\">s throttled</th>"
        f"<th>throttled (&gt;{THROTTLED:.0%} of periods)</th></tr>"
    )
    table = f'<table class="distlab-hosts" style="font-size:12px">{head}{"".join(rows)}</table>'
    if not machine:
        return table
    return table + f'<div class="distlab-machine" style="font-size:12px">{machine}</div>'


def host_traces(timeline: HostTimeline | None) -> list[dict[str, Any]]:
    """Plotly traces on a second y axis (% of periods): each host's throttled share per
    sampling interval as a filled step band, and the outside load as % of the machine."""
    if timeline is None:
        return []
    traces: list[dict[str, Any]] = []
    for host in sorted(timeline.intervals):
        xs: list[float] = []
        ys: list[float] = []
        for t0, t1, frac in timeline.intervals[host]:
            xs += [round(t0, 3), round(t1, 3)]
            ys += [round(100 * frac, 1)] * 2
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{host} throttled %",
                "x": xs,
                "y": ys,
                "yaxis": "y2",
                "fill": "tozeroy",
                "opacity": 0.3,
                "line": {"width": 1, "dash": "dot"},
            }
        )
    if timeline.outside:
        cpus = os.cpu_count() or 1
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "outside load % of machine",
                "x": [round(t, 3) for t, _ in timeline.outside],
                "y": [round(100 * v / cpus, 1) for _, v in timeline.outside],
                "yaxis": "y2",
                "line": {"width": 1, "color": "#7f7f7f"},
            }
        )
    return traces
