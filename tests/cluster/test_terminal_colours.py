"""Colour codes a launcher prints (kungfu-run colours its ``[E]`` and its tags) are taken
out of what the terminal and the live view show, and kept in the rank logs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lab.cluster.launchers.base import Line
from lab.cluster.view_state import RunTracker

ESC = "\x1b"
COLOURED = f"{ESC}[1;35m[E]{ESC}[m exit on error: {ESC}[1;36m127.0.0.1.10001{ESC}[m failed"
PLAIN = "[E] exit on error: 127.0.0.1.10001 failed"


def test_terminal_shows_plain_text_and_the_log_keeps_the_codes(tmp_path: Path) -> None:
    say = f"import sys; print({COLOURED!r}); print({COLOURED!r}, file=sys.stderr)"
    done = subprocess.run(
        [sys.executable, "-m", "lab", "launch", "--results", str(tmp_path), "--",
         sys.executable, "-c", say],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"[0] {PLAIN}" in done.stdout.splitlines()
    assert f"[0] {PLAIN}" in done.stderr.splitlines()
    assert ESC not in done.stdout + done.stderr
    run_dir = Path(done.stdout.splitlines()[-1])
    assert COLOURED in (run_dir / "rank-0.log").read_text()


def test_live_view_log_is_plain() -> None:
    tracker = RunTracker()
    tracker.start("/tmp/run", [0])
    tracker.add(Line(0, "stderr", COLOURED))
    tracker.add(Line(None, "stdout", COLOURED))
    logs = tracker.snapshot().logs
    assert logs[0] == (("stderr", PLAIN),)
    assert logs[None] == (("stdout", PLAIN),)
