"""records.exit_now: a rank's last records reach its output, and no teardown runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lab.metrics.records import parse_record

REPO = Path(__file__).resolve().parents[2]

RANK = """
import atexit, sys
from lab.metrics.records import emit, exit_now
atexit.register(lambda: print("teardown ran", file=sys.stderr, flush=True))
sys.stdout = open(sys.stdout.fileno(), "w", buffering=1 << 20, closefd=False)
emit("summary", rank=0, steps=3)
sys.stdout.write("unflushed tail")
exit_now(3)
"""


def test_exit_now_flushes_the_records_and_skips_the_teardown() -> None:
    done = subprocess.run(
        [sys.executable, "-c", RANK], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    record = parse_record(lines[0])
    assert record is not None and (record["kind"], record["steps"]) == ("summary", 3)
    assert lines[-1] == "unflushed tail"
    assert "teardown ran" not in done.stderr
