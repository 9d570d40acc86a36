"""lab.bench.profiling: one rank's profile covers the threads it starts, not only the main one
(the parameter server's work is all in sender and receiver threads)."""

from __future__ import annotations

import pstats
import threading
from pathlib import Path

from lab.bench.profiling import ThreadProfiles


def _busy_in_thread(n: int) -> int:
    return sum(i * i for i in range(n))


def _busy_in_main(n: int) -> int:
    return sum(i + 1 for i in range(n))


def _never_called() -> None:
    raise AssertionError


def test_profiles_of_started_threads_and_the_main_one_are_merged(tmp_path: Path) -> None:
    profiles = ThreadProfiles()
    profiles.start()
    threads = [threading.Thread(target=_busy_in_thread, args=(200_000,)) for _ in range(2)]
    for t in threads:
        t.start()
    _busy_in_main(100_000)
    for t in threads:
        t.join(timeout=30)
    path = profiles.dump(tmp_path / "prof" / "rank0.prof")
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    by_name = {func[2]: value for func, value in stats.items()}
    assert by_name["_busy_in_thread"][1] == 2  # called once in each of the two threads
    assert by_name["_busy_in_main"][1] == 1
    assert by_name["_busy_in_thread"][3] > 0  # CPU time was counted, not only calls
    assert "_never_called" not in by_name
    # profiling stopped: a thread started after dump() is not followed
    assert threading.getprofile() is None  # type: ignore[attr-defined]
