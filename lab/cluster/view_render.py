"""How the run views draw a run: status line, log panes, throughput plot, static summary.

Pure functions of a Snapshot, so the widget view, the progress line and the saved
notebook say the same thing, and tests can check the text without a browser.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.cluster.noise import classify
from lab.cluster.view_hosts import HostTimeline, host_traces, hosts_html
from lab.cluster.view_state import Snapshot

PLOTLY_MIME = "application/vnd.plotly.v1+json"
PLOT_HEIGHT = 300
PLOT_PLACEHOLDER = {
    "text/html": f'<div style="height:{PLOT_HEIGHT}px"></div>',
    "text/plain": "(throughput plot)",
}
_STATE_COLOURS = {"running": "#1f77b4", "succeeded": "#2ca02c", "finished": "#2ca02c"}


def run_name(run_dir: str) -> str:
    return Path(run_dir).name or str(run_dir)


def rank_label(rank: int | None) -> str:
    return f"rank {rank}" if rank is not None else "other"


def status_text(snap: Snapshot) -> str:
    """One line: state, elapsed time, each rank's last throughput, lines seen."""
    parts = [f"[run {run_name(snap.run_dir)}] {snap.state} {snap.elapsed:.1f}s"]
    parts += [f"r{r} {snap.rates[r]:.1f}/s" for r in sorted(snap.rates)]
    parts.append(f"lines {snap.lines}")
    failed = {r: c for r, c in snap.rank_exit_codes.items() if c not in (0, None)}
    if failed:
        parts.append("exit " + " ".join(f"r{r}={c}" for r, c in sorted(failed.items())))
    return "  ".join(parts)


def status_html(snap: Snapshot) -> str:
    """The status line as HTML, the state coloured (red for anything but success)."""
    colour = _STATE_COLOURS.get(snap.state, "#d62728")
    rates = " · ".join(f"r{r} {snap.rates[r]:.1f} samples/s" for r in sorted(snap.rates))
    codes = ""
    if snap.rank_exit_codes:
        codes = " · exit codes " + " ".join(
            f"r{r}={c}" for r, c in sorted(snap.rank_exit_codes.items())
        )
    return (
        f'<div class="distlab-status"><b style="color:{colour}">{html.escape(snap.state)}</b>'
        f" · {snap.elapsed:.1f} s · {snap.lines} lines"
        f"{' · ' + rates if rates else ''}{html.escape(codes)}"
        f" · <code>{html.escape(str(snap.run_dir))}</code></div>"
    )


_LINE_STYLES = {
    "error": "color:#b22",  # stderr that is not known start-up noise: seen at once
    "info": "color:#999",  # TF/absl start-up notices (lab.cluster.noise): out of the way
    "record": "color:#888",  # a record: kept, quieter than the rank's own words
}


def _log_line(stream: str, text: str) -> str:
    style = _LINE_STYLES.get(classify(stream, text))
    if style is None:
        return html.escape(text)
    return f'<span style="{style}">{html.escape(text)}</span>'


def log_html(entries: Sequence[tuple[str, str]], height: str = "18em") -> str:
    """A rank's last lines as a scrolling <pre>; errors in red, start-up noise and records
    in grey (lab.cluster.noise).

    The column-reverse box keeps the newest line in view without any script.
    """
    body = "\n".join(_log_line(s, t) for s, t in entries)
    return (
        f'<div style="display:flex;flex-direction:column-reverse;max-height:{height};'
        f'overflow:auto"><pre class="distlab-log" style="flex:none;margin:0;font-size:12px;'
        f'line-height:1.3">{body}</pre></div>'
    )


def plot_bundle(snap: Snapshot, hosts: HostTimeline | None = None) -> dict[str, Any]:
    """A plotly figure (raw mimebundle) of each rank's throughput over the run; with
    ``hosts`` (an emulated run), each host's throttled share of periods and the machine's
    outside load on a second axis, so a slow stretch can be told from a throttled one."""
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"rank {r}",
            "x": [round(t, 3) for t, _ in pts],
            "y": [round(v, 3) for _, v in pts],
        }
        for r, pts in sorted(snap.series.items())
    ]
    title = "throughput per rank" if data else "throughput per rank (none reported yet)"
    bands = host_traces(hosts)
    fig = {
        "data": data + bands,
        "layout": {
            "title": {"text": title},
            "xaxis": {"title": {"text": "elapsed (s)"}},
            "yaxis": {"title": {"text": "samples/s"}, "rangemode": "tozero"},
            "height": PLOT_HEIGHT,
            "margin": {"l": 60, "r": 60 if bands else 20, "t": 40, "b": 40},
            **({"yaxis2": _THROTTLE_AXIS} if bands else {}),
        },
        "config": {"displaylogo": False},
    }
    plain = f"<throughput plot of run {run_name(snap.run_dir)}: {len(data)} ranks>"
    if bands:
        plain = plain[:-1] + f", throttling of {len(hosts.totals) if hosts else 0} hosts>"
    return {PLOTLY_MIME: fig, "text/plain": plain}


_THROTTLE_AXIS = {
    "title": {"text": "% of periods throttled"},
    "overlaying": "y",
    "side": "right",
    "range": [0, 100],
    "showgrid": False,
}


def summary_html(snap: Snapshot, tail: int = 20, hosts: HostTimeline | None = None) -> str:
    """A static record of the run for readers without widget state: status, the hosts'
    throttling (emulated runs) and log tails."""
    parts = [status_html(snap)]
    if hosts is not None:
        parts.append(hosts_html(hosts))
    for rank in sorted(snap.logs, key=lambda r: (r is None, r or 0)):
        lines = snap.logs[rank][-tail:]
        parts.append(
            f"<details><summary>{rank_label(rank)}: last {len(lines)} lines</summary>"
            f"{log_html(lines)}</details>"
        )
    return "\n".join(parts)
