"""The tags launchers put in front of their ranks' lines, in one place: the launchers use
them to tell which rank printed a line, the parsers to read logs of upstream scripts.

- kungfu-run: ``[127.0.0.1.10000::stdout] text`` (often coloured with ANSI escapes);
- OpenMPI ``--tag-output``: ``[job,rank]<stdout|stderr|stddiag>: text``;
- MPICH ``-prepend-rank``: ``[rank] text``;
- horovodrun (Gloo): ``[rank]<stdout|stderr>:text``.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_ESC = r"(?:\x1b\[[0-9;]*m)*"
KUNGFU_TAG = re.compile(
    rf"^{_ESC}\[{_ESC}(?P<host>[^\]\s\x1b]+)\.(?P<port>\d+){_ESC}::{_ESC}"
    rf"(?P<stream>stdout|stderr){_ESC}\]{_ESC} ?(?P<text>.*)$",
    re.DOTALL,
)
OPENMPI_TAG = re.compile(
    r"^\[(?P<job>\d+),(?P<rank>\d+)\]<(?P<stream>stdout|stderr|stddiag)>: ?(?P<text>.*)$",
    re.DOTALL,
)
# The same tag over a block of lines (each ended by \n), every line matched, tagged or
# not: (tag, rank, stream, text), tag and rank empty for an untagged line.
OPENMPI_LINES = re.compile(r"^(\[\d+,(\d+)\]<(stdout|stderr|stddiag)>: ?)?(.*)\n", re.MULTILINE)
MPICH_TAG = re.compile(r"^\[(?P<rank>\d+)\] (?P<text>.*)$", re.DOTALL)
HOROVODRUN_TAG = re.compile(
    r"^\[(?P<rank>\d+)\]<(?P<stream>stdout|stderr)>:(?P<text>.*)$", re.DOTALL
)


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour and cursor sequences."""
    return ANSI.sub("", text)


def parse_kungfu_tag(text: str) -> tuple[str, int, str, str] | None:
    """(host, port, stream, text) from a kungfu-run line, coloured or not; None if untagged."""
    m = KUNGFU_TAG.match(text)
    return None if m is None else (m["host"], int(m["port"]), m["stream"], m["text"])


def parse_openmpi_tag(text: str) -> tuple[int, str, str] | None:
    """(rank, stream, text) from an OpenMPI ``--tag-output`` line (stddiag counts as
    stderr), or None."""
    m = OPENMPI_TAG.match(text)
    if m is None:
        return None
    return int(m["rank"]), "stdout" if m["stream"] == "stdout" else "stderr", m["text"]


def parse_mpich_tag(text: str) -> tuple[int, str] | None:
    """(rank, text) from an MPICH ``-prepend-rank`` line, or None."""
    m = MPICH_TAG.match(text)
    if m is None:
        return None
    rank = int(m["rank"])
    return rank, m["text"].removesuffix(f"[{rank}] ")


def parse_gloo_tag(text: str) -> tuple[int, str, str] | None:
    """(rank, stream, text) from a line horovodrun's Gloo launcher prefixed, or None."""
    m = HOROVODRUN_TAG.match(text)
    return None if m is None else (int(m["rank"]), m["stream"], m["text"])
