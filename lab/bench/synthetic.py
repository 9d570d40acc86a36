"""The synthetic training benchmark: ``python -m lab.bench.synthetic --backend horovod ...``.

Random images and labels (made once per rank from a seeded generator) train a keras
application or a smoke model for ``--warmup-steps`` + ``--steps`` steps on the chosen
engine. Flags are checked before TensorFlow is imported, so a bad flag fails at once with
exit code 2 and the allowed values. Each rank prints ``@lab`` records on stdout (header,
one step record per step, monitor metrics, summary) and Horovod's benchmark lines
(``Iter #k: X img/sec per CPU``, ``Img/sec per CPU: X +-Y``, ``Total img/sec on N CPU(s):
X +-Y``); monitors print KungFu's ``Gradient Noise Scale: X`` / ``Variance: X`` on stderr.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from lab.bench.backends import BACKENDS, EngineUnavailable
from lab.bench.config import flag
from lab.bench.flags import TrainingConfig
from lab.bench.standby import wait_if_standby
from lab.errors import ParameterError, require_at_least

MONITORS = ("none", "noise-scale", "variance")
# backends that can switch their monitor off and on within a run (--alternate)
ALTERNATING_BACKENDS = ("kungfu-monitor",)
DATA = ("synthetic",)


@dataclasses.dataclass(frozen=True)
class Config(TrainingConfig):
    """The workload's parameters; every backend reads this and nothing else. ``checked()``
    refuses values no engine could run, importing nothing heavy, so the lab checks a
    point's config before launching it."""

    MODULE = "lab.bench.synthetic"
    DESCRIPTION = "Synthetic image-classification training benchmark on a real engine."

    backend: str = flag("single", ", ".join(BACKENDS))
    monitor: str = flag("none", ", ".join(MONITORS))
    interval: int = flag(1, "compute the monitor every K steps")
    alternate: int = flag(
        0,
        "kungfu-monitor with --monitor: switch the monitor off and on every K timed steps, "
        "tagging each step's phase, so one run measures the monitor against itself "
        "(0: the monitor on throughout)",
    )
    data: str = flag("synthetic", ", ".join(DATA))
    port_base: int = flag(
        0,
        "mwms without TF_CONFIG: worker i listens on MASTER_ADDR:port-base+i "
        "(0: MASTER_PORT+1, or 23456)",
    )
    ps_wait: float = flag(
        600.0, "ps/worker tasks: seconds to wait for the chief to appear before giving up"
    )
    chief_grace: float = flag(
        0.0,
        "ps/worker tasks: seconds to wait for a silent chief (revoked, or its replacement "
        "starting) to answer again, when a replacement is planned (needs --checkpoint-dir, "
        "where the chief marks a normal end); 0 (none planned): a chief that stops "
        "answering counts as ended, like one whose host refuses the connection",
    )
    checkpoint_dir: str = flag(
        "", "ps chief: write checkpoints here and resume from the latest one found"
    )
    checkpoint_every: int = flag(0, "ps chief: global steps between checkpoints (0: none)")

    def checked(self) -> Config:
        cfg = super().checked()
        cfg._check_own()
        return cfg

    def _check_own(self) -> None:
        for name, value, allowed in (
            ("backend", self.backend, tuple(BACKENDS)),
            ("monitor", self.monitor, MONITORS),
            ("data", self.data, DATA),
        ):
            if value not in allowed:
                raise ParameterError(name, value, ", ".join(allowed))
        require_at_least(
            ("interval", self.interval, 1),
            ("alternate", self.alternate, 0),
            ("port_base", self.port_base, 0),
            ("checkpoint_every", self.checkpoint_every, 0),
        )
        if not self.chief_grace >= 0:
            raise ParameterError("chief_grace", self.chief_grace, "seconds >= 0")
        if self.chief_grace and not self.checkpoint_dir:
            raise ParameterError("checkpoint_dir", "", "a directory, with --chief-grace")
        if self.checkpoint_every and not self.checkpoint_dir:
            raise ParameterError("checkpoint_dir", "", "a directory, with --checkpoint-every")
        if self.monitor != "none" and not BACKENDS[self.backend][1]:
            able = ", ".join(b for b, (_, mon) in BACKENDS.items() if mon)
            raise ParameterError(
                "backend",
                self.backend,
                f"{able} with --monitor {self.monitor} (needs an all-reduce)",
            )
        if self.alternate and (self.backend not in ALTERNATING_BACKENDS or self.monitor == "none"):
            raise ParameterError(
                "alternate",
                self.alternate,
                f"0, or > 0 with --backend {' or '.join(ALTERNATING_BACKENDS)} and a --monitor",
            )

    def described(self) -> dict[str, Any]:
        return {
            **super().described(),
            "monitor": self.monitor,
            "interval": self.interval,
            "alternate": self.alternate,
        }


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """Parse and check flags; on a bad flag print the allowed values and exit with 2."""
    return Config.main_config(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code."""
    from lab.bench.backends.common import setup_tensorflow

    cfg = parse_args(argv)
    wait_if_standby(lambda: setup_tensorflow(cfg.threads), cfg.ps_wait)
    module = importlib.import_module(f"lab.bench.backends.{BACKENDS[cfg.backend][0]}")
    try:
        return int(module.run(cfg))
    except (ParameterError, EngineUnavailable) as exc:
        print(f"python -m {Config.MODULE}: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
