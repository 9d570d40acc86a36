"""Rank output read a buffer at a time: lines stay whole, in order and complete however the
bytes are cut, attribution by block matches attribution by line, and the observers get
every line from their own thread."""

from __future__ import annotations

import fcntl
import os
import random
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.feed import ObserverFeed
from lab.cluster.inventory import Host
from lab.cluster.launchers.base import Line, Lines, PerRankLauncher, ProcessSpec, demux_each
from lab.cluster.launchers.mpi import MpiLauncher
from lab.cluster.lines import BlockSplitter, LineSplitter, last_lines, lines_of
from lab.cluster.observers import FanOut
from lab.cluster.output import PIPE_BYTES, widen_pipe
from lab.cluster.view_state import RunTracker
from lab.experiments.selfbench.streaming import CountingObserver, check_log, spew_argv

# -- splitting -------------------------------------------------------------------------------


def reference_lines(data: bytes) -> list[str]:
    """What the rank printed, as lines: the whole output decoded at once, split on every
    break (``\\r\\n`` counts once), a last line without a break kept."""
    text = data.decode("utf-8", errors="replace")
    parts = re.split(r"\r\n|\r|\n", text)
    return parts if parts[-1] else parts[:-1]


def fed(data: bytes, cuts: Sequence[int]) -> list[str]:
    """``data`` through a BlockSplitter in the pieces ``cuts`` makes, as lines."""
    s, out, start = BlockSplitter(), [], 0
    for end in [*cuts, len(data)]:
        block = s.feed(data[start:end])
        assert block == "" or block.endswith("\n")
        out += lines_of(block)
        start = end
    out += lines_of(s.feed(b"", final=True))
    return out


def test_a_line_cut_between_reads_stays_whole() -> None:
    data = b"rank 0 line 1\nrank 0 line 2\nrank 0 li"
    s = BlockSplitter()
    assert s.feed(data) == "rank 0 line 1\nrank 0 line 2\n"
    assert s.feed(b"ne 3") == ""  # nothing complete yet: no half line comes out
    assert s.feed(b"\nrank 0") == "rank 0 line 3\n"
    assert s.feed(b"", final=True) == "rank 0\n"  # the last line, printed without a break


def test_every_progress_state_is_a_line_and_crlf_counts_once() -> None:
    s = BlockSplitter()
    assert s.feed(b"step 1/3\rstep 2/3\r") == "step 1/3\nstep 2/3\n"
    assert s.feed(b"\n") == ""  # the \n of a \r\n cut between reads
    assert s.feed(b"\n") == "\n"  # ... but only that one: the next \n is an empty line
    assert s.feed(b"done\r\nnext\r\r\n") == "done\nnext\n\n"


def test_a_character_cut_between_reads_decodes_whole() -> None:
    euro = "€".encode()
    s = BlockSplitter()
    assert s.feed(b"a\r") == "a\n"
    assert s.feed(euro[:2]) == ""  # only part of a character: the pending \r\n stays
    assert s.feed(euro[2:] + b"\n\xffz") == "€\n"
    assert s.feed(b"", final=True) == "\ufffdz\n"  # bad bytes become U+FFFD, as before


@pytest.mark.parametrize("seed", range(20))
def test_any_cutting_of_the_bytes_gives_the_same_lines(seed: int) -> None:
    rng = random.Random(seed)
    pieces = ["a", "bc", "€", "ü", "\n", "\r", "\r\n", "\n\n", " x"]
    data = "".join(rng.choice(pieces) for _ in range(400)).encode()
    cuts = sorted(rng.sample(range(1, len(data)), rng.randint(1, 60)))
    assert fed(data, cuts) == reference_lines(data)
    assert fed(data, range(1, len(data))) == reference_lines(data)  # byte by byte


def test_an_overlong_line_is_cut_so_memory_stays_bounded() -> None:
    s = BlockSplitter(max_line=10)
    assert s.feed(b"0123456789ABCDEF") == "0123456789ABCDEF\n"
    assert s.feed(b"ok\n") == "ok\n"


def test_line_splitter_is_the_block_splitter_line_by_line() -> None:
    s = LineSplitter()
    assert s.feed(b"a\rb\nc") == ["a", "b"]
    assert s.feed(b"", final=True) == ["c"]


def test_last_lines_splits_only_the_end() -> None:
    block = "".join(f"{i}\n" for i in range(100))
    assert last_lines(block, 3) == ["97", "98", "99"]
    assert last_lines("a\nb\n", 5) == ["a", "b"]
    assert last_lines("", 5) == [] and last_lines(block, 0) == []


# -- attribution -----------------------------------------------------------------------------


def spec(argv: Sequence[str], ranks: tuple[int, ...]) -> ProcessSpec:
    return ProcessSpec(argv=tuple(argv), env={}, ranks=ranks, host=Host("localhost"))


def expand(blocks: Sequence[Lines]) -> list[tuple[int | None, str, str]]:
    return [(b.rank, b.stream, t) for b in blocks for t in b.lines]


def test_mpirun_blocks_are_attributed_as_line_by_line() -> None:
    mpi = MpiLauncher()
    s = spec(["mpirun", "-np", "2", "--tag-output", "x"], (0, 1))
    text = (
        "[1,0]<stdout>: a\n[1,0]<stdout>: b\n[1,1]<stderr>:c\nplain from mpirun\n"
        "[1,7]<stdout>: not our rank\n[1,1]<stddiag>: d\n\n[1,0]<stdout>: \n[1,1]<stdout>: e\n"
    )
    fast = mpi.demux_block(s, "stdout", text)
    assert expand(fast) == expand(demux_each(lambda t: mpi.demux(s, "stdout", t), text))
    assert [(b.rank, b.text) for b in fast][:2] == [(0, "a\nb\n"), (1, "c\n")]
    assert (None, "stdout", "[1,7]<stdout>: not our rank") in expand(fast)


def test_a_launcher_with_its_own_demux_is_read_line_by_line() -> None:
    class Tagged(PerRankLauncher):
        def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
            return Line(int(text[0]), stream, text[2:])

    blocks = Tagged().demux_block(spec(["x"], (0, 1)), "stdout", "0 a\n0 b\n1 c\n0 d\n")
    assert [(b.rank, b.text) for b in blocks] == [(0, "a\nb\n"), (1, "c\n"), (0, "d\n")]
    plain = PerRankLauncher().demux_block(spec(["x"], (3,)), "stderr", "0 a\n1 b\n")
    assert plain == [Lines(3, "stderr", "0 a\n1 b\n")]  # one rank's: the block as it is


# -- observers -------------------------------------------------------------------------------


def test_tracker_takes_a_block_as_it_takes_each_line() -> None:
    step = '@lab {"kind": "step", "rank": 1, "step": 0, "samples": 64, "seconds": 0.5}'
    texts = [f"line {i}" for i in range(30)] + ["\x1b[31mred\x1b[0m", step, "tail"]
    block = Lines(1, "stdout", "\n".join(texts) + "\n")
    by_block, by_line = RunTracker(log_lines=10), RunTracker(log_lines=10)
    for t in (by_block, by_line):
        t.start("", [0, 1])
    by_block.add_lines(Lines(1, "stdout", "".join(f"{t}\n" for t in texts[:31])))
    by_block.add_lines(Lines(1, "stdout", f"{step}\ntail\n"))
    for t in texts:
        by_line.add(Line(1, "stdout", t))
    a, b = by_block.snapshot(), by_line.snapshot()
    assert a.lines == b.lines == len(texts)
    assert a.logs == b.logs and a.logs[1][-3][1] == "red"  # colour taken out for the view
    assert a.steps == b.steps == {1: (64.0, 0.5)}
    assert block.count == len(texts)


class Recorder:
    """Remembers every line, and which threads it was told on."""

    def __init__(self, delay: float = 0.0) -> None:
        self.lines: list[tuple[int | None, str]] = []
        self.threads: set[str] = set()
        self.delay = delay

    def on_line(self, line: Line) -> None:
        time.sleep(self.delay)
        self.threads.add(threading.current_thread().name)
        self.lines.append((line.rank, line.text))


def test_feed_tells_every_line_in_order_from_its_own_thread() -> None:
    errors: list[str] = []
    per_line, counter = Recorder(), CountingObserver()

    def notify(obs: object, method: str, *args: object) -> None:
        try:
            getattr(obs, method)(*args)
        except Exception as e:  # pragma: no cover - shown if it happens
            errors.append(repr(e))

    feed = ObserverFeed([FanOut(per_line, counter)], notify, max_queued=2)
    sent = [(r, f"rank {r} line {i}") for i in range(3000) for r in (0, 1)]
    for k in range(0, len(sent), 100):  # blocks of 100 lines, more than the queue holds
        chunk = sent[k : k + 100]
        feed.put([Lines(r, "stdout", t + "\n") for r, t in chunk])
    assert feed.close()
    assert not errors
    assert per_line.lines == sent
    assert per_line.threads == {"lab-observers"}
    assert counter.counts == {0: 3000, 1: 3000}


def test_a_slow_observer_does_not_hold_back_another() -> None:
    """The start-up gate and fault injectors act on step records; a view that draws slowly
    (a loaded machine, a busy kernel) must not delay them: each observer has its own
    thread. With one thread for all, the quick observer would wait for the slow one."""
    release, all_in = threading.Event(), threading.Event()
    got: list[str] = []

    class Slow:
        def on_lines(self, block: Lines) -> None:
            release.wait(30)

    class Quick:
        def on_lines(self, block: Lines) -> None:
            got.append(block.text)
            if len(got) == 3:
                all_in.set()

    feed = ObserverFeed([Slow(), Quick()], lambda o, m, *a: getattr(o, m)(*a))
    for i in range(3):
        feed.put([Lines(0, "stdout", f"step {i}\n")])
    assert all_in.wait(10), "the quick observer waited behind the slow one"
    release.set()
    assert feed.close()
    assert got == ["step 0\n", "step 1\n", "step 2\n"]


def test_feed_gives_up_on_an_observer_that_never_returns() -> None:
    stuck = threading.Event()

    class Stuck:
        def on_lines(self, block: Lines) -> None:
            stuck.wait(120)

    feed = ObserverFeed([Stuck()], lambda o, m, *a: getattr(o, m)(*a), max_queued=1)
    feed.put([Lines(0, "stdout", "a\n")])
    start = time.monotonic()
    assert feed.close(stall=0.5) is False
    assert time.monotonic() - start < 60  # gave up: did not wait out the observer
    stuck.set()


# -- real runs -------------------------------------------------------------------------------


def test_200k_lines_per_rank_arrive_whole_in_order_and_observed(tmp_path: Path, probe) -> None:
    n = 200_000
    counter = CountingObserver()
    result = launch(
        spew_argv(n),
        np=2,
        results_root=tmp_path,
        view=counter,
        timeout=600,
        experiment="blocks",
    )
    assert result.exit_code == 0
    for r in range(2):
        found = check_log(result.run_dir / f"rank-{r}.log", r, n)
        assert (found["found"], found["lost"], found["out_of_order"], found["other"]) == (
            n,
            0,
            0,
            0,
        )
        assert found["rank_seconds"] is not None  # the count line after them came too
        assert counter.counts[r] == n + 1
    assert counter.ended == "succeeded"
    probe.assert_nothing_left(result.run_dir)


class EndWatcher:
    """Notes how many lines it had been told when the run's end was told."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.at_end: int | None = None

    def on_start(self, run_dir: str, ranks: Sequence[int], control: object) -> None:
        return None

    def on_line(self, line: Line) -> None:
        self.lines.append(line)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        self.at_end = len(self.lines)


def test_progress_lines_and_a_last_line_without_break_reach_log_and_view(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "w = sys.stdout.write\n"
        "for i in range(1, 4):\n"
        "    w(f'progress {i}/3\\r'); sys.stdout.flush(); time.sleep(0.05)\n"
        "w('\\n'); sys.stdout.flush(); time.sleep(0.05)\n"
        "w('crlf\\r'); sys.stdout.flush(); time.sleep(0.05)\n"
        "w('\\nunfinished')\n"
    )
    watcher = EndWatcher()
    result = launch(
        [sys.executable, "-c", script],
        np=1,
        results_root=tmp_path,
        view=watcher,
        timeout=120,
        experiment="blocks",
    )
    assert result.exit_code == 0
    expected = ["progress 1/3", "progress 2/3", "progress 3/3", "crlf", "unfinished"]
    assert (result.run_dir / "rank-0.log").read_text().splitlines() == expected
    assert [(x.rank, x.text) for x in watcher.lines] == [(0, t) for t in expected]
    assert watcher.at_end == len(expected)  # every line was told before the end


def test_stdout_pipes_are_widened_where_the_kernel_allows() -> None:
    read_end, write_end = os.pipe()
    try:
        size = widen_pipe(read_end)
        assert size == fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
        if int(Path("/proc/sys/fs/pipe-max-size").read_text()) >= PIPE_BYTES:
            assert size >= PIPE_BYTES
    finally:
        os.close(read_end)
        os.close(write_end)


class Arrivals:
    """When each line was told (wall clock), for lines a rank stamps with its own clock."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}

    def on_start(self, run_dir: str, ranks: Sequence[int], control: object) -> None:
        return None

    def on_line(self, line: Line) -> None:
        self.seen.setdefault(line.text.split()[0], time.time())

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        return None


def test_a_quiet_ranks_line_is_told_while_the_rank_still_runs(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "print('burst', *range(2000), flush=True)\n"
        "print('ready', time.time(), flush=True)\n"
        "time.sleep(4)\n"
        "print('end', time.time(), flush=True)\n"
    )
    arrivals = Arrivals()
    result = launch(
        [sys.executable, "-c", script],
        np=1,
        results_root=tmp_path,
        view=arrivals,
        timeout=120,
        experiment="blocks",
    )
    assert result.exit_code == 0
    log = (result.run_dir / "rank-0.log").read_text().splitlines()
    printed = {x.split()[0]: float(x.split()[1]) for x in log if x.split()[0] in ("ready", "end")}
    # told while the rank was still quiet, before it printed its next line 4 s later
    assert printed["ready"] <= arrivals.seen["ready"] < printed["end"]
