"""Bytes from a rank's pipe in, complete lines out (the reader threads' one job).

A reader hands over whatever one ``read`` returned, up to a few hundred KiB, and gets
back every line completed by it as *one* string, each line ended by ``\\n``: the text that
goes into a rank log as it is, so no Python object is made per line unless someone needs
one (``LineSplitter``, the per-line observers).
"""

from __future__ import annotations

import codecs

MAX_LINE_CHARS = 1 << 20  # a "line" longer than this is cut, so memory stays bounded


class BlockSplitter:
    """Bytes in, complete lines out as one text block: incremental UTF-8 (bad bytes become
    U+FFFD), ``\\n``, ``\\r`` and ``\\r\\n`` each end one line (also when split across
    reads), so a ``\\r`` progress bar's every state is a line of its own; the block's
    lines all end in ``\\n`` (``""``: no line completed yet)."""

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._after_cr = False
        self._max_line = max_line

    def feed(self, data: bytes | bytearray | memoryview, final: bool = False) -> str:
        """The lines that ``data`` completes; ``final``: the stream ended, so a last line
        without its break is complete too."""
        text = self._decoder.decode(data, final)
        if text:  # empty when the data held only part of a character
            if self._after_cr and text[0] == "\n":
                text = text[1:]  # the \n of a \r\n split across two reads
            self._after_cr = text.endswith("\r")
            if "\r" in text:  # rare: progress bars and CRLF; one pass each, in C
                text = text.replace("\r\n", "\n").replace("\r", "\n")
        buf = self._pending + text if self._pending else text
        cut = buf.rfind("\n") + 1
        block, self._pending = buf[:cut], buf[cut:]
        if len(self._pending) > self._max_line or (final and self._pending):
            block += self._pending + "\n"
            self._pending = ""
        return block


def lines_of(block: str) -> list[str]:
    """The lines of a block (without their ``\\n``)."""
    return block.split("\n")[:-1] if block else []


def last_lines(block: str, n: int) -> list[str]:
    """The last ``n`` lines of a block, splitting no more of it than that."""
    return block.rsplit("\n", n + 1)[-(n + 1) : -1] if block and n > 0 else []


class LineSplitter:
    """Bytes in, a list of complete lines out (``BlockSplitter``, one string per line)."""

    def __init__(self) -> None:
        self._blocks = BlockSplitter()

    def feed(self, data: bytes, final: bool = False) -> list[str]:
        return lines_of(self._blocks.feed(data, final))
