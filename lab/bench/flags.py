"""The settings every training workload shares (``TrainingConfig``: model, batch size,
image size, classes, warm-up, steps, optimizer, learning rate, seed, threads), checked in
one place, and the lab-side check of a rank command before launch (DESIGN.md, contract 4).

A workload's config subclasses ``TrainingConfig`` (lab.bench.config) with its own fields
and checks, and its module exports it as ``Config``. ``check_argv`` finds the workload in a
command (``python -m lab.bench.<name> ...``, also behind a wrapper such as
lab.cluster.affinity) and parses its flags with that config, in the lab's process: no
process is started and nothing heavy is imported.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lab.bench.config import WorkloadConfig, flag
from lab.errors import ParameterError, require_at_least, require_positive

OPTIMIZERS = ("sgd", "momentum", "adam")
WORKLOAD_PREFIX = "lab.bench."


@dataclasses.dataclass(frozen=True)
class TrainingConfig(WorkloadConfig):
    """The shared training settings; subclasses add theirs (and may change defaults).

    ``backend`` is what a rank's records report as its engine: a field where the flags
    choose it (lab.bench.synthetic), else the class's ``BACKEND``.
    """

    BACKEND: ClassVar[str] = ""

    model: str = flag("tiny_cnn", "a keras application name, or tiny_cnn, small_cnn")
    batch_size: int = flag(32, "per-rank batch size")
    image_size: int | None = flag(None, "square input size (None: the model's)")
    num_classes: int = flag(10, "classes of the random labels")
    warmup_steps: int = flag(5, "steps run before timing counts")
    steps: int = flag(20, "timed steps (per worker)")
    optimizer: str = flag("sgd", ", ".join(OPTIMIZERS))
    lr: float = flag(0.01, "learning rate")
    seed: int = flag(1, "model initialisation and data seed")
    threads: int = flag(0, "TensorFlow intra/inter-op threads (0: TF's default)")

    @property
    def backend(self) -> str:
        return self.BACKEND

    def checked(self) -> Any:
        """The shared settings checked, the model's canonical name and its image size (the
        model's default when not given) filled in (``model_and_size``)."""
        model, size = self.model_and_size()
        self.check_counts()
        return dataclasses.replace(self, model=model, image_size=size)

    def model_and_size(self) -> tuple[str, int]:
        """The model's canonical name and the image size, checked against
        lab.bench.models (a workload with other models overrides this)."""
        from lab.bench.models import check_image_size, get_spec

        spec = get_spec(self.model)
        size = spec.default_size if self.image_size is None else self.image_size
        check_image_size(spec, size)
        return spec.name, size

    def check_counts(self) -> None:
        """The counts, the learning rate and the optimizer, without a model."""
        if self.optimizer not in OPTIMIZERS:
            raise ParameterError("optimizer", self.optimizer, ", ".join(OPTIMIZERS))
        require_at_least(
            ("batch_size", self.batch_size, 1),
            ("steps", self.steps, 1),
            ("warmup_steps", self.warmup_steps, 0),
            ("num_classes", self.num_classes, 2),
            ("threads", self.threads, 0),
        )
        require_positive(("lr", self.lr))

    def described(self) -> dict[str, Any]:
        """What a rank's ``header`` record says about the run (lab.bench.backends.common)."""
        return {
            "model": self.model,
            "backend": self.backend,
            "batch_size": self.batch_size,
            "image_size": self.image_size,
            "num_classes": self.num_classes,
            "optimizer": self.optimizer,
            "lr": self.lr,
            "warmup_steps": self.warmup_steps,
            "steps": self.steps,
            "monitor": "none",
            "interval": 1,
            "alternate": 0,
            "seed": self.seed,
        }


def workload_of(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """The lab workload a command runs and its flags: what follows the first
    ``-m lab.bench.<name>``, wherever it stands (a wrapper may come first); None if none."""
    argv = list(argv)
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[i + 1].startswith(WORKLOAD_PREFIX):
            return argv[i + 1], argv[i + 2 :]
    return None


def config_class(module: str) -> type[WorkloadConfig] | None:
    """The ``Config`` a workload module exports for its own flags, or None (a module
    that runs an upstream script, or has none yet).

    Raises:
        ParameterError: naming the module when there is no such workload.
    """
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise  # the workload exists but something it imports does not
        path = module.replace(".", "/")
        allowed = f"an existing workload, e.g. lab.bench.synthetic (there is no {path}.py)"
        raise ParameterError("command", module, allowed) from None
    cls = getattr(imported, "Config", None)
    if isinstance(cls, type) and issubclass(cls, WorkloadConfig) and module == cls.MODULE:
        return cls
    return None


def parse_command(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> WorkloadConfig | None:
    """The checked config of the lab workload ``argv`` runs, as its ranks will parse it
    in the environment ``env`` the launch gives them (``ranks_env``); None for a command
    that runs no lab workload with a config (or asks for --help).

    Raises:
        ParameterError: naming the flag, as the workload's ranks would.
    """
    found = workload_of(argv)
    if found is None:
        return None
    module, flags = found
    cls = config_class(module)
    if cls is None or "-h" in flags or "--help" in flags:
        return None
    return cls.from_argv(flags, env)


def ranks_env(np: int, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a config's ``given`` fields are read from when the lab checks a
    job of ``np`` ranks: the job's ``env`` and WORLD_SIZE = np, as the per-rank launchers
    set it (lab.cluster.launchers.base.rank_env; the ``ps`` launcher counts its servers
    too, so a workload it runs reads no given field)."""
    return {**dict(env or {}), "WORLD_SIZE": str(np)}


def check_argv(argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    """A ``python -m lab.bench.<name> ...`` command's flags checked here, before launch,
    with the workload's own config; other commands (an upstream script) are left to their
    ranks.

    Raises:
        ParameterError: naming the flag and what it allows.
    """
    parse_command(argv, env)
