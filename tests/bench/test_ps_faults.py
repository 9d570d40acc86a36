"""The ps workload's side of revocations: telling an ended chief from a vanished one, finding
the newest checkpoint, and refusing checkpoint flags that cannot work."""

from __future__ import annotations

import socket
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


def test_a_vanished_chief_is_waited_for_when_a_replacement_is_planned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # revoked, its replacement starting (refusals), up, then ended: the task ends with 0
    back = ["up", "gone", "gone", "refused", "refused", "refused", "refused", "up", "refused"]
    given = _scripted_probe(monkeypatch, back)
    assert ps.watch_chief("10.0.0.4:23450", wait=5, grace=30) == 0
    assert given == [*back, "refused", "refused"]
    # no replacement answers within the grace: the task ends with 1
    _scripted_probe(monkeypatch, ["up", "gone", "refused"])
    assert ps.watch_chief("10.0.0.4:23450", wait=5, grace=0.05) == 1


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
