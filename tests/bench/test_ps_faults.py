"""The ps workload's side of revocations: telling an ended chief from a vanished one, finding
the newest checkpoint, and refusing checkpoint flags that cannot work."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from lab.bench import synthetic
from lab.bench.backends import checkpoints, ps
from lab.errors import ParameterError


def test_probe_tells_up_refused_and_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert ps._probe(f"127.0.0.1:{port}") == "up"
    assert ps._probe(f"127.0.0.1:{port}") == "refused"
    # A revoked host answers nothing: the connect times out or finds no route.
    for error in (TimeoutError("timed out"), OSError(113, "No route to host")):

        def connect(*_a: object, error: OSError = error, **_k: object) -> None:
            raise error

        monkeypatch.setattr(socket, "create_connection", connect)
        assert ps._probe("10.0.0.1:23450") == "gone"


def _scripted_probe(monkeypatch: pytest.MonkeyPatch, answers: list[str]) -> list[str]:
    """``ps._probe`` answering ``answers`` in turn (the last one forever), with no sleeps;
    returns the list of answers given."""
    given: list[str] = []

    def probe(_address: str, timeout: float = 1.0) -> str:
        given.append(answers[min(len(given), len(answers) - 1)])
        return given[-1]

    monkeypatch.setattr(ps, "_probe", probe)
    monkeypatch.setattr(ps, "POLL_SECONDS", 0.0)
    return given


def test_a_chief_that_stops_answering_ends_the_task_when_no_replacement_is_planned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A probe queued behind a saturated link times out ("gone") as the chief ends; with no
    replacement planned that is an end like a refusal, not a 60-s wait and a failure."""
    given = _scripted_probe(monkeypatch, ["up", "up", "gone", "gone", "gone"])
    assert ps.watch_chief("10.0.0.4:23450", wait=5, grace=0) == 0
    assert given == ["up", "up", "gone", "gone", "gone"]
    # a refusal (its host answers, nothing listens) is an end at once
    given = _scripted_probe(monkeypatch, ["up", "up", "gone", "refused", "up"])
    assert ps.watch_chief("10.0.0.4:23450", wait=5, grace=0) == 0
    assert given == ["up", "up", "gone", "refused"]


def test_a_silent_chief_is_waited_for_until_it_marks_its_end_when_a_replacement_is_planned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # revoked, its replacement starting (refusals), up, then ended and marked: 0
    back = ["up", "gone", "gone", "refused", "refused", "refused", "refused", "up", "refused"]
    given = _scripted_probe(monkeypatch, back)
    marked = lambda: len(given) >= len(back) + 2  # noqa: E731  (marked two probes after)
    assert ps.watch_chief("10.0.0.4:23450", wait=5, grace=30, ended=marked) == 0
    assert given == [*back, "refused", "refused"]
    # no replacement answers within the grace: the task ends with 1
    _scripted_probe(monkeypatch, ["up", "gone", "refused"])
    assert ps.watch_chief("10.0.0.4:23450", wait=5, grace=0.05, ended=lambda: False) == 1


def test_refusals_alone_never_end_a_server_that_awaits_a_replacement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race a rehearsal found: a PS starved of CPU never probed inside the revoked
    chief's one-second outage, saw the replacement's refusals while it imported TF, took
    them for an end and left, and the replacement waited for a PS that was gone."""
    starts = ["up", "up", *["refused"] * 12, "up", "up"]
    given = _scripted_probe(monkeypatch, [*starts, "refused"])
    marked = lambda: len(given) > len(starts) + 1  # noqa: E731
    assert ps.watch_chief("10.0.0.4:23450", wait=5, grace=30, ended=marked) == 0
    assert given[: len(starts)] == starts  # it stayed through every refusal


def test_a_server_task_outlives_a_replacement_chief_on_a_real_port(tmp_path: Path) -> None:
    """The watcher against a real listening port: up, closed for longer than three probes
    with no outage in between (what a stalled server sees), up again (the replacement),
    then closed after the chief's end mark is written. The watcher stays through the
    first gap and leaves after the mark."""
    import threading

    token = "job-1"
    ps.mark_ended(str(tmp_path), "another-job")  # a stale mark of another job is ignored
    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    chief = socket.socket()
    chief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    chief.bind(("127.0.0.1", port))
    chief.listen()
    result: list[int] = []
    watcher = threading.Thread(target=lambda: result.append(ps.watch_chief(
        f"127.0.0.1:{port}", wait=5, grace=30,
        ended=lambda: ps.ended_normally(str(tmp_path), token))), daemon=True)  # fmt: skip
    watcher.start()
    time.sleep(1.2)
    chief.close()  # revoked; the replacement is importing TensorFlow
    time.sleep(ps.POLL_SECONDS * (ps.MISSES_TO_EXIT + 3))
    assert watcher.is_alive(), "a server left while the chief's replacement was starting"
    chief = socket.socket()
    chief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    chief.bind(("127.0.0.1", port))
    chief.listen()
    time.sleep(1.2)
    ps.mark_ended(str(tmp_path), token)
    chief.close()
    watcher.join(timeout=10)
    assert result == [0]
    assert not list(tmp_path.glob("*.partial"))


def test_latest_checkpoint_is_the_highest_complete_step(tmp_path: Path) -> None:
    assert checkpoints.latest(str(tmp_path)) is None
    for name in ("ckpt-100.index", "ckpt-100.data-00000-of-00001", "ckpt-300.index",
                 "ckpt-20.index", "ckpt-400.data-00000-of-00001", "other.index"):  # fmt: skip
        (tmp_path / name).write_text("x" * 10)
    step, prefix = checkpoints.latest(str(tmp_path)) or (0, "")
    assert step == 300 and prefix == str(tmp_path / "ckpt-300")
    assert checkpoints.size_of(str(tmp_path / "ckpt-100")) == 20


def test_checkpoint_flags_are_checked() -> None:
    with pytest.raises(SystemExit):
        synthetic.parse_args(["--backend", "ps", "--checkpoint-every", "10"])
    cfg = synthetic.parse_args(["--backend", "ps", "--checkpoint-every", "10",
                                "--checkpoint-dir", "/tmp/x", "--chief-grace", "5"])  # fmt: skip
    assert (cfg.checkpoint_every, cfg.chief_grace) == (10, 5.0)
    with pytest.raises(ParameterError):
        synthetic.Config.from_argv(["--chief-grace", "-1"])
    with pytest.raises(ParameterError, match=r"checkpoint-dir.*with --chief-grace"):
        synthetic.Config.from_argv(["--chief-grace", "5"])  # no place for the end mark
