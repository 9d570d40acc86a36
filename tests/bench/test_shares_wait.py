"""A rank waits for its emulated host's CPU share before timing, and only there."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lab.bench.shares_wait import MARK_ENV, shares_pending, wait_before_step, wait_for_shares
from lab.metrics.records import parse_record


def _records(text: str) -> list[dict]:
    return [r for r in map(parse_record, text.splitlines()) if r is not None]


def test_without_a_mark_nothing_waits(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv(MARK_ENV, raising=False)
    assert not shares_pending()
    assert wait_for_shares(0) == 0.0
    assert capsys.readouterr().out == ""  # no event: nothing was waited for


def test_a_rank_waits_until_the_launcher_marks_the_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    mark = tmp_path / "cluster.shares"
    monkeypatch.setenv(MARK_ENV, str(mark))
    assert shares_pending()
    timer = threading.Timer(0.4, mark.write_text, args=("1\n",))
    timer.start()
    began = time.monotonic()
    waited = wait_for_shares(3, reporter="chief")
    timer.join()
    assert 0.35 < waited <= time.monotonic() - began
    [event] = _records(capsys.readouterr().out)
    assert event["name"] == "shares_wait" and event["applied"] is True
    assert event["rank"] == 3 and event["reporter"] == "chief" and event["waited_s"] > 0.35
    assert not shares_pending()
    assert wait_for_shares(3) < 0.01  # a later start: no wait, and it says so
    [again] = _records(capsys.readouterr().out)
    assert again["applied"] is True and again["waited_s"] < 0.01


def test_a_rank_goes_on_when_no_mark_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv(MARK_ENV, str(tmp_path / "never"))
    assert 0.1 < wait_for_shares(1, timeout=0.15) < 2
    out = capsys.readouterr()
    [event] = _records(out.out)
    assert event["applied"] is False
    assert "did not apply within" in out.err


def test_a_loop_waits_only_before_its_first_timed_step_or_step_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A step record must be out before the wait (it is what the launcher waits for)."""
    monkeypatch.setenv(MARK_ENV, str(tmp_path / "cluster.shares"))
    (tmp_path / "cluster.shares").write_text("1\n")
    waited = []
    for warmup in (0, 1, 3):
        for step in range(5):
            wait_before_step(step, warmup, rank=0)
            if _records(capsys.readouterr().out):
                waited.append((warmup, step))
    assert waited == [(0, 1), (1, 1), (3, 3)]
