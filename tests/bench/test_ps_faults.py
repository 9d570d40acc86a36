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
        synthetic._config(synthetic._parser().parse_args(["--chief-grace", "-1"]))
