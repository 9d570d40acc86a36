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

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields

from lab.bench.backends import BACKENDS, EngineUnavailable
from lab.bench.backends.common import setup_tensorflow
from lab.bench.flags import OPTIMIZERS, parse_checked, training_parser
from lab.bench.models import check_image_size, get_spec
from lab.bench.standby import wait_if_standby
from lab.errors import ParameterError, require_at_least

MONITORS = ("none", "noise-scale", "variance")
# backends that can switch their monitor off and on within a run (--alternate)
ALTERNATING_BACKENDS = ("kungfu-monitor",)
DATA = ("synthetic",)


@dataclass(frozen=True)
class Config:
    """The workload's parameters, checked; every backend reads this and nothing else."""

    model: str = "tiny_cnn"
    batch_size: int = 32
    image_size: int = 32
    num_classes: int = 10
    warmup_steps: int = 5
    steps: int = 20
    optimizer: str = "sgd"
    lr: float = 0.01
    seed: int = 1
    backend: str = "single"
    monitor: str = "none"
    interval: int = 1
    alternate: int = 0
    data: str = "synthetic"
    threads: int = 0
    port_base: int = 0
    ps_wait: float = 600.0
    chief_grace: float = 0.0
    checkpoint_dir: str = ""
    checkpoint_every: int = 0

    def to_argv(self) -> list[str]:
        """The flags that reproduce this config (what a launcher puts after the module)."""
        out: list[str] = []
        for f in fields(self):
            out += [f"--{f.name.replace('_', '-')}", str(getattr(self, f.name))]
        return out


def _parser() -> argparse.ArgumentParser:
    p = training_parser(
        "python -m lab.bench.synthetic",
        "Synthetic image-classification training benchmark on a real engine.",
    )
    p.add_argument("--backend", choices=tuple(BACKENDS), default="single")
    p.add_argument("--monitor", choices=MONITORS, default="none")
    p.add_argument("--interval", type=int, default=1, help="compute the monitor every K steps")
    p.add_argument(
        "--alternate",
        type=int,
        default=0,
        help="kungfu-monitor with --monitor: switch the monitor off and on every K timed "
        "steps, tagging each step's phase, so one run measures the monitor against itself "
        "(0: the monitor on throughout)",
    )
    p.add_argument("--data", choices=DATA, default="synthetic")
    p.add_argument(
        "--port-base",
        type=int,
        default=0,
        help="mwms without TF_CONFIG: worker i listens on MASTER_ADDR:port-base+i "
        "(0: MASTER_PORT+1, or 23456)",
    )
    p.add_argument(
        "--ps-wait",
        type=float,
        default=600.0,
        help="ps/worker tasks: seconds to wait for the chief to appear before giving up",
    )
    p.add_argument(
        "--chief-grace",
        type=float,
        default=0.0,
        help="ps/worker tasks: seconds to wait for a chief whose host vanished (revoked) to "
        "come back, when its replacement is planned; 0 (none planned): a chief that stops "
        "answering counts as ended, like one whose host refuses the connection",
    )
    p.add_argument(
        "--checkpoint-dir",
        default="",
        help="ps chief: write checkpoints here and resume from the latest one found",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="ps chief: global steps between checkpoints (0: none)",
    )
    return p


def check_config(cfg: Config) -> None:
    """Raise ParameterError for values no engine could run; imports nothing heavy, so the
    lab side can check a sweep's points before launching them."""
    spec = get_spec(cfg.model)
    check_image_size(spec, cfg.image_size)
    for name, value, allowed in (
        ("backend", cfg.backend, tuple(BACKENDS)),
        ("optimizer", cfg.optimizer, OPTIMIZERS),
        ("monitor", cfg.monitor, MONITORS),
        ("data", cfg.data, DATA),
    ):
        if value not in allowed:
            raise ParameterError(name, value, ", ".join(allowed))
    require_at_least(
        ("batch-size", cfg.batch_size, 1),
        ("steps", cfg.steps, 1),
        ("warmup-steps", cfg.warmup_steps, 0),
        ("interval", cfg.interval, 1),
        ("alternate", cfg.alternate, 0),
        ("num-classes", cfg.num_classes, 2),
        ("threads", cfg.threads, 0),
        ("port-base", cfg.port_base, 0),
        ("checkpoint-every", cfg.checkpoint_every, 0),
    )
    if not cfg.chief_grace >= 0:
        raise ParameterError("chief-grace", cfg.chief_grace, "seconds >= 0")
    if cfg.checkpoint_every and not cfg.checkpoint_dir:
        raise ParameterError("checkpoint-dir", "", "a directory, with --checkpoint-every")
    if not cfg.lr > 0:
        raise ParameterError("lr", cfg.lr, "a number > 0")
    if cfg.monitor != "none" and not BACKENDS[cfg.backend][1]:
        able = ", ".join(b for b, (_, mon) in BACKENDS.items() if mon)
        raise ParameterError(
            "backend", cfg.backend, f"{able} with --monitor {cfg.monitor} (needs an all-reduce)"
        )
    if cfg.alternate and (cfg.backend not in ALTERNATING_BACKENDS or cfg.monitor == "none"):
        raise ParameterError(
            "alternate",
            cfg.alternate,
            f"0, or > 0 with --backend {' or '.join(ALTERNATING_BACKENDS)} and a --monitor",
        )


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """Parse and check flags; on a bad flag print the allowed values and exit with 2."""
    return parse_checked(_parser(), _config, argv)


def _config(ns: argparse.Namespace) -> Config:
    """The checked Config from parsed flags (raises ParameterError)."""
    spec = get_spec(ns.model)
    image_size = spec.default_size if ns.image_size is None else ns.image_size
    cfg = Config(
        model=spec.name,
        batch_size=ns.batch_size,
        image_size=image_size,
        num_classes=ns.num_classes,
        warmup_steps=ns.warmup_steps,
        steps=ns.steps,
        optimizer=ns.optimizer,
        lr=ns.lr,
        seed=ns.seed,
        backend=ns.backend,
        monitor=ns.monitor,
        interval=ns.interval,
        alternate=ns.alternate,
        data=ns.data,
        threads=ns.threads,
        port_base=ns.port_base,
        ps_wait=ns.ps_wait,
        chief_grace=ns.chief_grace,
        checkpoint_dir=ns.checkpoint_dir,
        checkpoint_every=ns.checkpoint_every,
    )
    check_config(cfg)
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code."""
    cfg = parse_args(argv)
    wait_if_standby(lambda: setup_tensorflow(cfg.threads), cfg.ps_wait)
    module = importlib.import_module(f"lab.bench.backends.{BACKENDS[cfg.backend][0]}")
    try:
        return int(module.run(cfg))
    except (ParameterError, EngineUnavailable) as exc:
        print(f"{_parser().prog}: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
