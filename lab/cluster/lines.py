"""Bytes from a rank's pipe in, complete lines out (the reader threads' one job)."""

from __future__ import annotations

import codecs
import re

MAX_LINE_CHARS = 1 << 20  # a "line" longer than this is cut, so memory stays bounded
_BREAK = re.compile(r"(\r\n|\r|\n)")


class LineSplitter:
    """Bytes in, complete lines out: incremental UTF-8, breaks on ``\\n``, ``\\r`` and
    ``\\r\\n`` (also when split across reads)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._after_cr = False

    def feed(self, data: bytes, final: bool = False) -> list[str]:
        text = self._decoder.decode(data, final)
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        if text:
            self._after_cr = text.endswith("\r")
        parts = _BREAK.split(self._pending + text)
        self._pending = parts[-1]
        lines = parts[0:-1:2]
        if len(self._pending) > MAX_LINE_CHARS or (final and self._pending):
            lines.append(self._pending)
            self._pending = ""
        return lines
