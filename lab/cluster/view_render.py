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
_STATE_COLOURS = {
    "running": "#1f77b4",
    "succeeded": "#2ca02c",
    "finished": "#2ca02c",
    "queued": "#888",  # waiting for a scheduler: neither trouble nor progress
}
_STOPPED_COLOUR = "#b26b00"  # a stop a person asked for: not an error, not a success
_STATE_WORDS = {"timed_out": "timed out", "starting": "starting"}
_TRACE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def run_name(run_dir: str) -> str:
    return Path(run_dir).name or str(run_dir) or "not started"


def rank_label(rank: int | None) -> str:
    return f"rank {rank}" if rank is not None else "other"


def state_words(state: object) -> str:
    """A run state as a person reads it: ``RunState.TIMED_OUT`` and ``"timed_out"`` both
    give "timed out"."""
    value = str(getattr(state, "value", state))
    return _STATE_WORDS.get(value, value.replace("_", " "))


def _headline(snap: Snapshot) -> str:
    """What the run is doing or how it ended, reason first when it did not succeed."""
    state = state_words(snap.state)
    if snap.state == "queued":
        return snap.pending or state
    if snap.state == "running" and snap.stopping:
        return f"stopping ({snap.stopping})"
    if snap.state == "cancelled":
        return f"{snap.reason or snap.stopping or 'cancelled'} (cancelled)"
    if snap.state not in ("running", "succeeded", "starting") and snap.reason:
        return f"{state}: {snap.reason}"
    return state


def status_text(snap: Snapshot) -> str:
    """One line: state (and why, when it did not succeed), elapsed time, each rank's last
    throughput, lines seen, the exit codes of ranks that failed."""
    parts = [f"[run {run_name(snap.run_dir)}] {_headline(snap)} {snap.elapsed:.1f}s"]
    parts += [f"r{r} {snap.rates[r]:.1f}/s" for r in sorted(snap.rates)]
    parts.append(f"lines {snap.lines}")
    failed = {r: c for r, c in snap.rank_exit_codes.items() if c not in (0, None)}
    if failed:
        parts.append("exit " + " ".join(f"r{r}={c}" for r, c in sorted(failed.items())))
    return "  ".join(parts)


def status_html(snap: Snapshot) -> str:
    """The status line as HTML: the state in words, coloured (a stop a person asked for in
    amber, anything else that is not success in red), its reason first; after a stop, the
    ranks' exit codes (the signal that ended them) folded under it."""
    stopped = snap.state == "cancelled" or (snap.state == "running" and snap.stopping)
    colour = _STOPPED_COLOUR if stopped else _STATE_COLOURS.get(snap.state, "#d62728")
    rates = " · ".join(f"r{r} {snap.rates[r]:.1f} samples/s" for r in sorted(snap.rates))
    codes = " ".join(f"r{r}={c}" for r, c in sorted(snap.rank_exit_codes.items()))
    codes = codes if any(c not in (0, None) for c in snap.rank_exit_codes.values()) else ""
    shown = f" · exit codes {html.escape(codes)}" if codes and not stopped else ""
    folded = (
        f'<details class="distlab-after-stop" style="display:inline-block;margin-left:0.5em">'
        f'<summary style="color:#888">what ending it caused</summary>'
        f'<span style="color:#888">exit codes {html.escape(codes)}</span></details>'
        if codes and stopped
        else ""
    )
    return (
        f'<div class="distlab-status"><b style="color:{colour}">{html.escape(_headline(snap))}'
        f"</b> · {snap.elapsed:.1f} s · {snap.lines} lines"
        f"{' · ' + rates if rates else ''}{shown}"
        f"{' · <code>' + html.escape(str(snap.run_dir)) + '</code>' if snap.run_dir else ''}"
        f"{folded}</div>"
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


def log_html(
    entries: Sequence[tuple[str, str]],
    height: str = "18em",
    after: Sequence[tuple[str, str]] = (),
) -> str:
    """A rank's last lines as a scrolling <pre>; errors in red, start-up noise and records
    in grey (lab.cluster.noise). ``after``: the lines that came after Stop was pressed,
    folded under one grey line, so the engine's reaction to being ended (a traceback, a
    non-zero exit) does not read as the reason the run ended.

    The column-reverse box keeps the newest line in view without any script.
    """
    body = "\n".join(_log_line(s, t) for s, t in entries)
    if after:
        folded = "\n".join(_log_line(s, t) for s, t in after)
        body += (
            f'\n<details class="distlab-after-stop"><summary style="color:#888">'
            f"after the stop: {len(after)} line{'s' if len(after) != 1 else ''} "
            f"(how the processes reacted to being ended)</summary>{folded}</details>"
        )
    return (
        f'<div style="display:flex;flex-direction:column-reverse;max-height:{height};'
        f'overflow:auto"><pre class="distlab-log" style="flex:none;margin:0;font-size:12px;'
        f'line-height:1.3">{body}</pre></div>'
    )


def sparkline_svg(snap: Snapshot, width: int = 480, height: int = 110) -> str:
    """A compact throughput plot (inline SVG, one line per rank), for views that sit inside
    another widget (the controls', a sweep's) where a plotly output cannot be redrawn."""
    series = {r: pts for r, pts in sorted(snap.series.items()) if pts}
    top = max((v for pts in series.values() for _, v in pts), default=0.0)
    end = max((t for pts in series.values() for t, _ in pts), default=0.0)
    left, right, up, down = 8, 8, 26, 16
    top *= 1.1  # the highest point sits below the heading
    w, h = width - left - right, height - up - down
    lines, keys = [], []
    for i, (rank, pts) in enumerate(series.items()):
        colour = _TRACE_COLOURS[i % len(_TRACE_COLOURS)]
        xy = " ".join(
            f"{left + (t / end if end else 0) * w:.1f},{up + h - (v / top if top else 0) * h:.1f}"
            for t, v in pts
        )
        lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{xy}"/>')
        keys.append(f'<tspan fill="{colour}">rank {rank}</tspan>')
    head = (
        f"throughput per rank, up to {top / 1.1:,.0f} samples/s"
        if series
        else "throughput per rank (none reported yet)"
    )
    return (
        f'<svg class="distlab-spark" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg" style="font:11px sans-serif">'
        f'<text x="{left}" y="12" fill="#555">{html.escape(head)}</text>'
        f'<line x1="{left}" y1="{up + h}" x2="{left + w}" y2="{up + h}" stroke="#ccc"/>'
        f"{''.join(lines)}"
        f'<text x="{left}" y="{height - 3}" fill="#888">0 s</text>'
        f'<text x="{left + w}" y="{height - 3}" fill="#888" text-anchor="end">{end:.1f} s</text>'
        f'<text x="{left + w}" y="12" text-anchor="end">{" ".join(keys)}</text></svg>'
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


def summary_html(
    snap: Snapshot, tail: int = 20, hosts: HostTimeline | None = None, plot: bool = False
) -> str:
    """A static record of the run for readers without widget state: status, the hosts'
    throttling (emulated runs), the compact throughput plot (``plot``) and log tails."""
    parts = [status_html(snap)]
    if hosts is not None:
        parts.append(hosts_html(hosts))
    if plot:
        parts.append(sparkline_svg(snap))
    for rank in sorted(set(snap.logs) | set(snap.after_stop), key=lambda r: (r is None, r or 0)):
        lines = snap.logs.get(rank, ())[-tail:]
        after = snap.after_stop.get(rank, ())[-tail:]
        parts.append(
            f"<details><summary>{rank_label(rank)}: last {len(lines)} lines</summary>"
            f"{log_html(lines, after=after)}</details>"
        )
    return "\n".join(parts)
