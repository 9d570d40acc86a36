"""Turn one line of a rank's output into normalised records, whatever printed it.

The lab's own ranks print ``@lab {...}`` records; the papers' unmodified scripts print
text (Horovod's and KungFu's synthetic benchmarks, MXNet's Speedometer, TensorFlow's
step counter). Each foreign format is one regex and one converter in a small ordered
registry, so a new format is one ``register_format`` call. Launcher tags in front of a
line (kungfu-run's ``[127.0.0.1.10000::stdout]``, ``mpirun --tag-output``'s
``[1,0]<stdout>:``, horovodrun's ``[0]<stdout>:``) and ANSI colour codes are removed
first; the tag also tells the rank when the caller does not.

Every record has the keys of ``SCHEMA`` (None where the format does not say) plus any
extra fields the format carries (``error``, ``epoch``, ``device``, ``warmup`` ...).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lab.metrics import tags
from lab.metrics.records import PREFIX, parse_record
from lab.metrics.tags import strip_ansi

log = logging.getLogger(__name__)

SCHEMA = ("kind", "rank", "step", "samples", "seconds", "throughput", "name", "value", "source")
# kungfu-run's default -port-range: its i-th local worker gets port 10000 + i. The lab's
# launcher gives each job its own range and attributes lines by position in its -H list
# (lab.cluster.launchers.kungfu.peer_ranks); a port outside this range says no local rank.
KUNGFU_BASE_PORT, KUNGFU_END_PORT = 10000, 11000

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan"

Converter = Callable[[re.Match[str], dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True)
class LineFormat:
    """One foreign (or the lab's own) line format.

    Args:
        name: what the format is, for logs and tests.
        pattern: matched with ``search`` against the line after tags are removed.
        convert: builds the records from the match and the line's context (``text``,
            ``tag_rank``, ``host``, ``port``, ``stream``, ``tagged_by``).
    """

    name: str
    pattern: re.Pattern[str]
    convert: Converter


FORMATS: list[LineFormat] = []


def register_format(
    name: str, pattern: str, *, before: str | None = None
) -> Callable[[Converter], Converter]:
    """Decorator: add a converter for ``pattern``; formats are tried in order, first wins.

    Args:
        name: the format's name.
        pattern: a regular expression (searched, so anchor it with ``^`` if needed).
        before: insert ahead of the format with this name instead of at the end.
    """

    def deco(fn: Converter) -> Converter:
        fmt = LineFormat(name, re.compile(pattern), fn)
        names = [f.name for f in FORMATS]
        if name in names:
            FORMATS[names.index(name)] = fmt
        elif before is not None and before in names:
            FORMATS.insert(names.index(before), fmt)
        else:
            FORMATS.append(fmt)
        return fn

    return deco


def _f(text: str | None) -> float | None:
    return None if text is None else float(text)


def _throughput_source(ctx: dict[str, Any], device: str) -> str:
    """Horovod prints 'per GPU'/'per CPU'; KungFu's scripts 'per /gpu:0' under kungfu-run."""
    if ctx.get("tagged_by") == "kungfu" or device.startswith("/"):
        return "kungfu"
    return "horovod"


@register_format("lab", re.escape(PREFIX))
def _lab(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    rec = parse_record(ctx["text"])
    if rec is None:
        return []
    rec.setdefault("source", "lab")
    return [rec]


@register_format(
    "kungfu-result", rf"^RESULT: (?P<value>{_NUM}) \+-(?P<error>{_NUM})\s*(?P<attrs>\{{.*\}})?\s*$"
)
def _result(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    attrs: dict[str, Any] = {}
    if m["attrs"]:
        try:
            attrs = json.loads(m["attrs"])
        except json.JSONDecodeError:
            log.debug("RESULT line with unreadable attributes: %s", m["attrs"])
    framework = str(attrs.get("framework") or "kungfu")
    rec: dict[str, Any] = {
        "kind": "summary",
        "name": "result",
        "throughput": float(m["value"]),
        "error": float(m["error"]),
        "source": framework if framework in ("kungfu", "horovod") else "kungfu",
        "attrs": attrs,
    }
    if "np" in attrs:
        rec["np"] = attrs["np"]
    return [rec]


@register_format(
    "img-sec-warmup",
    rf"^Warmup Step #(?P<step>\d+): (?P<tp>{_NUM}) img/sec per (?P<device>\S+), "
    rf"took (?P<sec>{_NUM})s\s*$",
)
def _warmup_step(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "step",
            "step": int(m["step"]),
            "throughput": float(m["tp"]),
            "seconds": float(m["sec"]),
            "device": m["device"],
            "warmup": True,
            "source": _throughput_source(ctx, m["device"]),
        }
    ]


@register_format(
    "img-sec-iter",
    rf"^(?:Cluster response )?Iter #(?P<step>\d+): (?P<tp>{_NUM}) img/sec per (?P<device>\S+)\s*$",
)
def _iter(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "step",
            "step": int(m["step"]),
            "throughput": float(m["tp"]),
            "device": m["device"],
            "source": _throughput_source(ctx, m["device"]),
        }
    ]


@register_format(
    "img-sec-mean", rf"^Img/sec per (?P<device>\S+): (?P<tp>{_NUM}) \+-(?P<error>{_NUM})\s*$"
)
def _img_sec_mean(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "summary",
            "name": "per_device",
            "throughput": float(m["tp"]),
            "error": float(m["error"]),
            "device": m["device"],
            "source": _throughput_source(ctx, m["device"]),
        }
    ]


@register_format(
    "img-sec-total",
    rf"^Total img/sec on (?P<np>\d+) (?P<device>\S+?)\(s\): "
    rf"(?P<tp>{_NUM}) \+-(?P<error>{_NUM})\s*$",
)
def _img_sec_total(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "summary",
            "name": "total",
            "throughput": float(m["tp"]),
            "error": float(m["error"]),
            "np": int(m["np"]),
            "device": m["device"],
            "source": "horovod",
        }
    ]


@register_format("kungfu-noise-scale", rf"^Gradient Noise Scale: (?P<v>{_NUM})\s*$")
def _noise_scale(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "metric",
            "name": "gradient_noise_scale",
            "value": float(m["v"]),
            "source": "kungfu",
        }
    ]


@register_format("kungfu-variance", rf"^Variance: (?P<v>{_NUM})\s*$")
def _variance(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"kind": "metric", "name": "gradient_variance", "value": float(m["v"]), "source": "kungfu"}
    ]


_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")


def go_duration(text: str) -> float:
    """Seconds in a Go duration string such as ``20.39s``, ``40.12ms`` or ``1m56.57s``."""
    parts = _GO_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


@register_format(
    "kungfu-resize", r"^resize (?P<a>\d+) -> (?P<b>\d+) took (?P<dur>[0-9.hmsuµn]+)\s*$"
)
def _resize(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        seconds = go_duration(m["dur"])
    except ValueError:
        return []
    return [
        {
            "kind": "metric",
            "name": "resize_seconds",
            "value": seconds,
            "seconds": seconds,
            "from_size": int(m["a"]),
            "to_size": int(m["b"]),
            "source": "kungfu",
        }
    ]


_MX_PAIR = re.compile(rf"([A-Za-z_][\w\-./]*)=({_NUM})")


@register_format(
    "mxnet-speedometer",
    rf"(?:Epoch|Iter)\[(?P<epoch>\d+)\]\s+Batch\s+\[(?:(?P<first>\d+)-)?(?P<batch>\d+)\]\s+"
    rf"Speed: (?P<tp>{_NUM}) samples/sec(?P<rest>.*)$",
)
def _speedometer(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    step, epoch = int(m["batch"]), int(m["epoch"])
    out: list[dict[str, Any]] = [
        {
            "kind": "step",
            "step": step,
            "epoch": epoch,
            "throughput": float(m["tp"]),
            "source": "mxnet",
        }
    ]
    for name, value in _MX_PAIR.findall(m["rest"]):
        out.append(
            {
                "kind": "metric",
                "name": name,
                "value": float(value),
                "step": step,
                "epoch": epoch,
                "source": "mxnet",
            }
        )
    return out


@register_format("tf-global-step-sec", rf"(?:^|[\s:\]])global_step/sec: (?P<v>{_NUM})\s*$")
def _global_step_sec(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "metric",
            "name": "global_step/sec",
            "value": float(m["v"]),
            "source": "tensorflow",
        }
    ]


@register_format("tf-examples-sec", rf"(?:^|[\s:\]])examples/sec: (?P<v>{_NUM})\s*$")
def _examples_sec(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"kind": "step", "throughput": float(m["v"]), "source": "tensorflow"}]


@register_format(
    "tf-loss",
    rf"(?:^|[\s:\]])loss = (?P<loss>{_NUM}), step = (?P<step>\d+)(?: \((?P<sec>{_NUM}) sec\))?\s*$",
)
def _tf_loss(m: re.Match[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
    rec = {"kind": "metric", "name": "loss", "value": float(m["loss"]), "step": int(m["step"])}
    rec["seconds"] = _f(m["sec"])
    rec["source"] = "tensorflow"
    return [rec]


def split_tag(text: str) -> tuple[str, dict[str, Any]]:
    """Remove launcher tags in front of a line; return the rest and what the tags said.

    The returned context has ``tag_rank`` (a rank, or None), and for kungfu-run ``host``,
    ``port`` and ``local_rank`` (port − 10000 for a port in kungfu-run's default range
    10000-11000: the worker's index on its host, which is its rank when all workers share
    one host; None for other ports, whose rank only the launcher's -H list tells).
    """
    ctx: dict[str, Any] = {"tag_rank": None, "tagged_by": None}
    while True:
        if m := tags.KUNGFU_TAG.match(text):
            port = int(m["port"])
            in_default = KUNGFU_BASE_PORT <= port <= KUNGFU_END_PORT
            local = port - KUNGFU_BASE_PORT if in_default else None
            ctx.update(
                host=m["host"], port=port, stream=m["stream"], local_rank=local, tagged_by="kungfu"
            )
            ctx["tag_rank"] = local
        elif m := tags.OPENMPI_TAG.match(text):
            stream = "stdout" if m["stream"] == "stdout" else "stderr"
            ctx.update(tag_rank=int(m["rank"]), stream=stream, tagged_by="mpirun")
        elif m := tags.HOROVODRUN_TAG.match(text):
            ctx.update(tag_rank=int(m["rank"]), stream=m["stream"], tagged_by="horovodrun")
        else:
            return text, ctx
        text = m["text"].removeprefix(" ") if m.re is tags.HOROVODRUN_TAG else m["text"]


def _normalise(rec: dict[str, Any], rank: int | None, ctx: dict[str, Any]) -> dict[str, Any]:
    out = {k: rec.get(k) for k in SCHEMA}
    out.update({k: v for k, v in rec.items() if k not in SCHEMA})
    if out["rank"] is None:  # a record's own rank wins: a ps chief reports its workers' steps
        out["rank"] = rank if rank is not None else ctx.get("tag_rank")
    for key in ("host", "port", "local_rank"):
        if key in ctx and key not in out:
            out[key] = ctx[key]
    samples, seconds = out["samples"], out["seconds"]
    if out["throughput"] is None and out["kind"] == "step" and samples and seconds:
        with contextlib.suppress(TypeError, ValueError, ZeroDivisionError):
            out["throughput"] = float(samples) / float(seconds)
    return out


def parse_line(text: str, rank: int | None = None) -> list[dict[str, Any]]:
    """The records in one line of output (an empty list for ordinary output).

    Args:
        text: one line, with or without its newline, tags and colour codes.
        rank: the rank that printed it, when the caller knows (e.g. from the log's
            name); used for records without a ``rank`` field of their own (a record may
            describe another rank: the ps chief reports each worker's steps), else the
            launcher tag decides.
    """
    line = strip_ansi(text).rstrip("\r\n")
    body, ctx = split_tag(line.strip())
    body = body.strip()
    ctx["text"] = body
    if not body:
        return []
    for fmt in FORMATS:
        m = fmt.pattern.search(body)
        if m is None:
            continue
        try:
            recs = fmt.convert(m, ctx)
        except (ValueError, TypeError) as exc:  # a converter must not break a whole log
            log.debug("format %s could not convert %r: %s", fmt.name, body, exc)
            continue
        if recs:
            return [_normalise(r, rank, ctx) for r in recs]
    return []


def parse_lines(lines: Iterable[str], rank: int | None = None) -> list[dict[str, Any]]:
    """All records in ``lines``, in order; see ``parse_line``."""
    out: list[dict[str, Any]] = []
    for line in lines:
        out.extend(parse_line(line, rank=rank))
    return out
