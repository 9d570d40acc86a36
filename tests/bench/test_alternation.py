"""Which steps of an alternating run have the monitor on, and which configs may alternate."""

from __future__ import annotations

import pytest

from lab.bench import alternation, synthetic
from lab.errors import ParameterError


def test_warm_up_switches_every_step_then_blocks_of_k() -> None:
    phases = [alternation.phase(i, warmup_steps=4, block=3) for i in range(4 + 12)]
    assert phases[:4] == ["off", "on", "off", "on"]  # both functions traced twice
    assert phases[4:] == ["off"] * 3 + ["on"] * 3 + ["off"] * 3 + ["on"] * 3
    timed = phases[4:]
    assert timed.count("on") == timed.count("off")


def test_bad_block_or_step_is_refused() -> None:
    with pytest.raises(ValueError):
        alternation.phase(0, 0, 0)
    with pytest.raises(ValueError):
        alternation.phase(-1, 0, 2)


def test_only_a_monitoring_kungfu_run_may_alternate() -> None:
    ok = synthetic.Config(backend="kungfu-monitor", monitor="variance", alternate=3)
    ok.checked()
    assert "--alternate" in ok.to_argv()
    for bad in (
        synthetic.Config(backend="kungfu-monitor", monitor="none", alternate=3),
        synthetic.Config(backend="horovod", monitor="variance", alternate=3),
        synthetic.Config(backend="kungfu-monitor", monitor="variance", alternate=-1),
    ):
        with pytest.raises(ParameterError, match="alternate"):
            bad.checked()
