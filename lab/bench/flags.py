"""The flags every training workload shares, checked in one place, and the lab-side check
that runs a workload's own flag parsing before any rank starts (DESIGN.md, contract 4).

A workload builds its parser with ``training_parser`` (model, batch size, image size,
classes, warm-up, steps, optimizer, learning rate, seed, threads) plus its own flags, turns
the namespace into its config in a function that raises ``ParameterError``, and parses with
``parse_checked``. ``check_argv`` lets the lab call that same parsing on a rank command
before launch: nothing heavy is imported, no process is started.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lab.errors import ParameterError, require_at_least

OPTIMIZERS = ("sgd", "momentum", "adam")
T = TypeVar("T")


def training_parser(
    prog: str,
    description: str,
    steps: int = 20,
    warmup_steps: int = 5,
    steps_help: str = "timed steps (per worker)",
    batch_help: str = "per-rank batch size",
) -> argparse.ArgumentParser:
    """A parser with the shared training flags; add the workload's own to it."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument(
        "--model", default="tiny_cnn", help="keras application name or tiny_cnn, small_cnn"
    )
    p.add_argument("--batch-size", type=int, default=32, help=batch_help)
    p.add_argument(
        "--image-size", type=int, default=None, help="square input size (default: the model's)"
    )
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument(
        "--warmup-steps", type=int, default=warmup_steps, help="steps run before timing counts"
    )
    p.add_argument("--steps", type=int, default=steps, help=steps_help)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--threads", type=int, default=0, help="TensorFlow intra/inter-op threads (0: TF's default)"
    )
    return p


def check_training(ns: argparse.Namespace, *at_least: tuple[str, int, int]) -> tuple[str, int]:
    """Check the shared flags (and ``at_least``: more ``(flag, value, low)``); return the
    model's canonical name and the image size (the model's default when not given)."""
    from lab.bench.models import check_image_size, get_spec

    spec = get_spec(ns.model)
    image_size = spec.default_size if ns.image_size is None else ns.image_size
    check_image_size(spec, image_size)
    check_counts(ns, *at_least)
    return spec.name, image_size


def training_config(
    ns: argparse.Namespace, model: str, image_size: int, backend: str, **more: Any
) -> Any:
    """The synthetic workload's Config from the shared flags (checked by ``check_training``
    or ``check_counts``) and a backend; ``more`` sets its other fields."""
    from lab.bench.synthetic import Config

    return Config(
        model=model,
        batch_size=ns.batch_size,
        image_size=image_size,
        num_classes=ns.num_classes,
        warmup_steps=ns.warmup_steps,
        steps=ns.steps,
        optimizer=ns.optimizer,
        lr=ns.lr,
        seed=ns.seed,
        backend=backend,
        threads=ns.threads,
        **more,
    )


def check_counts(ns: argparse.Namespace, *at_least: tuple[str, int, int]) -> None:
    """The shared count flags and learning rate, without a model (e.g. a regression task)."""
    require_at_least(
        ("batch-size", ns.batch_size, 1),
        ("steps", ns.steps, 1),
        ("warmup-steps", ns.warmup_steps, 0),
        ("num-classes", ns.num_classes, 2),
        ("threads", ns.threads, 0),
        *at_least,
    )
    if not ns.lr > 0:
        raise ParameterError("lr", ns.lr, "a number > 0")


def parse_checked(
    parser: argparse.ArgumentParser,
    build: Callable[[argparse.Namespace], T],
    argv: Sequence[str] | None = None,
) -> T:
    """Parse ``argv`` and build the config; a bad value prints what is allowed and exits 2."""
    ns = parser.parse_args(argv)
    try:
        return build(ns)
    except ParameterError as exc:
        parser.error(str(exc))
    raise AssertionError("unreachable")  # parser.error exits


def check_argv(argv: Sequence[str]) -> None:
    """Run a ``python -m lab.bench.<name> ...`` command's flag parsing here, before launch.

    Commands that are not a lab workload with a ``parse_args`` are left alone (an
    upstream script is checked by its own ranks).

    Raises:
        ParameterError: naming the workload's complaint, as its ranks would print it.
    """
    argv = list(argv)
    if "-m" not in argv:
        return
    at = argv.index("-m")
    if at + 1 >= len(argv) or not argv[at + 1].startswith("lab.bench."):
        return
    module = importlib.import_module(argv[at + 1])
    parse: Any = getattr(module, "parse_args", None)
    if parse is None:
        return
    flags = argv[at + 2 :]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse(flags)
    except SystemExit as exc:
        if exc.code in (0, None):
            return
        message = err.getvalue().strip().splitlines()
        text = message[-1].split("error: ", 1)[-1] if message else "bad flags"
        raise ParameterError(argv[at + 1], " ".join(flags), f"valid flags ({text})") from None
