"""The systems the benchmark notebooks compare: a *system* is a launcher plus a workload
backend (e.g. Horovod over Gloo is the ``horovod`` launcher running
``lab.bench.synthetic --backend horovod``), named as the figures name it. The lab's own
implementations say so in their label.
"""

from __future__ import annotations

import importlib.util
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster.launchers.base import find_program
from lab.errors import ParameterError
from lab.experiments.kungfu import artifact as kungfu_artifact
from lab.experiments.p3 import artifact as p3_artifact
from lab.metrics.layout import REPO_ROOT

MXNET_PYTHON = ".venv-mxnet/bin/python"  # make setup: env/setup_mxnet.sh
TORCH_WORKLOAD = "lab.bench.torch_synthetic"
# How to get a requirement that is not here, said after the reason it is missing: KungFu is
# not on PyPI, and where github.com is unreachable make setup needs its source named
_KUNGFU_HINT = (
    " (make setup builds KungFu from KUNGFU_SOURCE, a tarball or checkout of its pinned "
    "commit, or from github.com when it is reachable)"
)
INSTALL_HINTS = {"kungfu": _KUNGFU_HINT, "exe:kungfu-run": _KUNGFU_HINT}
# The one worker without communication whose rate × N is a system's ideal (KungFu Fig 9),
# per workload module: the TensorFlow systems' and the PyTorch systems' own
IDEALS = {"lab.bench.synthetic": "single", TORCH_WORKLOAD: "torch-single"}
# A point's keys that are its workload's settings (the fields of the workload's config);
# the rest (system, workers, cluster, a room's own keys) are the lab's.
WORKLOAD_FLAGS = (
    "model",
    "batch_size",
    "image_size",
    "steps",
    "warmup_steps",
    "monitor",
    "interval",
    "alternate",
    "seed",
    "optimizer",
    "lr",
    "num_classes",
)


@dataclass(frozen=True)
class System:
    """A distribution system as the figures name it.

    Args:
        name: the key used in sweeps and tables.
        label: the legend text; the lab's own implementations say so.
        launcher: the lab.cluster launcher that starts it.
        backend: the ``--backend`` of the workload (None for workloads without one).
        module: the workload module run by every rank.
        options: launcher options.
        requires: what must be there: a Python module name, ``exe:NAME``, ``env:VAR`` or
            ``path:FILE`` (relative to the repository: another venv's interpreter).
        min_workers: the smallest number of workers it runs with.
        command: builds the rank's argv from (point, python) instead of ``module`` and
            flags (for upstream scripts such as the KungFu artifact's).
        check: says why something else it needs is missing (None: nothing is).
    """

    name: str
    label: str
    launcher: str
    backend: str | None
    module: str = "lab.bench.synthetic"
    options: Mapping[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    min_workers: int = 1
    command: Callable[[Mapping[str, Any], str], list[str]] | None = None
    check: Callable[[], str | None] | None = None

    def unavailable(self) -> str | None:
        """Why this system cannot run here, or None when it can (with how to get what is
        missing, where ``INSTALL_HINTS`` knows)."""
        for need in self.requires:
            missing = self._missing(need)
            if missing:
                return missing + INSTALL_HINTS.get(need, "")
        return self.check() if self.check is not None else None

    def config(self, point: Mapping[str, Any]) -> Any:
        """The point's workload config (lab.bench.config), checked: its ``WORKLOAD_FLAGS``
        and the system's ``backend``; None for a system that runs an upstream command
        (its script checks its own flags; the counts are checked here).

        Raises:
            ParameterError: naming the point's key (``model``, ``batch_size``, ...) and
                what it allows, before anything is imported or started.
        """
        values = {k: point[k] for k in WORKLOAD_FLAGS if point.get(k) is not None}
        if self.command is not None:
            _check_counts(values)
            return None
        from lab.bench.flags import config_class

        cls = config_class(self.module)
        if cls is None:
            raise ParameterError("system", self.name, f"a system whose {self.module} has a Config")
        if self.backend:
            values["backend"] = self.backend
        return cls.from_values(values)

    @staticmethod
    def _missing(need: str) -> str | None:
        """Why one requirement (``System.requires``) is not met here, or None."""
        if need.startswith("exe:"):
            exe = need[4:]
            if find_program(exe) is None:
                return f"{exe} is not installed"
        elif need.startswith("env:"):
            if not os.environ.get(need[4:]):
                return f"{need[4:]} is not set"
        elif need.startswith("path:"):
            if not (REPO_ROOT / need[5:]).is_file():
                return f"not installed ({need[5:]} is missing; make setup creates it)"
        elif importlib.util.find_spec(need) is None:
            return f"Python package {need!r} is not installed"
        return None


def horovod_torch_missing() -> str | None:
    """Why Horovod's PyTorch API cannot run here (its ops were not built: Horovod built
    without HOROVOD_WITH_PYTORCH), or None; read from the files, importing nothing."""
    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        return "Python package 'horovod' is not installed"
    root = Path(next(iter(spec.submodule_search_locations)))
    if not list((root / "torch").glob("mpi_lib_v2*.so")):
        return (
            f"Horovod at {root} was built without PyTorch (make setup rebuilds it with "
            "HOROVOD_WITH_PYTORCH=1)"
        )
    return None


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("single", "ideal (one worker, no communication)", "local", "single"),
        System(
            "horovod-gloo",
            "Horovod (Gloo)",
            "horovod",
            "horovod",
            options={"controller": "gloo"},
            requires=("horovod",),
        ),
        System(
            "horovod-mpi",
            "Horovod (MPI)",
            "mpi",
            "horovod",
            requires=("horovod", "exe:mpirun"),
        ),
        System("mwms", "TF MultiWorkerMirroredStrategy", "local", "mwms"),
        System(
            "torch-single",
            "ideal, PyTorch (one worker, no communication)",
            "local",
            "torch-single",
            module=TORCH_WORKLOAD,
            requires=("torch",),
        ),
        System(  # Horovod's PyTorch API, as its pytorch_synthetic_benchmark.py uses it
            "horovod-torch",
            "Horovod PyTorch (MPI)",
            "mpi",
            "horovod-torch",
            module=TORCH_WORKLOAD,
            requires=("torch", "horovod", "exe:mpirun"),
            check=horovod_torch_missing,
        ),
        System(  # in none of the papers: PyTorch's own data parallelism, for comparison
            "torch-ddp",
            "PyTorch DDP, beyond papers",
            "torchrun",
            "torch-ddp",
            module=TORCH_WORKLOAD,
            requires=("torch",),
        ),
        System(
            "kungfu-sync",
            "KungFu sync SGD",
            "kungfu",
            "kungfu-sync",
            requires=("kungfu", "exe:kungfu-run"),
        ),
        System(  # KungFu Fig 8: its MonitorGradient{NoiseScale,Variance}Optimizer
            "kungfu-monitor",
            "KungFu sync SGD, its own monitors",
            "kungfu",
            "kungfu-monitor",
            requires=("kungfu", "exe:kungfu-run"),
            min_workers=2,
        ),
        System("ps", "TF parameter server (1 PS)", "ps", "ps", options={"num_ps": 1}),
        System(
            "kungfu-async",
            "KungFu pair averaging",
            "kungfu",
            "kungfu-async",
            requires=("kungfu", "exe:kungfu-run"),
            min_workers=2,
        ),
        System(  # KungFu Fig 7: resizes itself through kungfu-run -w's config server
            "kungfu-elastic",
            "KungFu elastic (config server)",
            "kungfu",
            None,
            module="lab.bench.kungfu_elastic",
            options={"elastic": True},
            requires=("kungfu", "exe:kungfu-run"),
        ),
        System(
            "kungfu-artifact-monitoring",
            "KungFu (artifact's monitoring benchmark)",
            "kungfu",
            None,
            requires=("exe:kungfu-run",),
            check=kungfu_artifact.missing,
            command=kungfu_artifact.monitoring_argv,
        ),
        System(
            "kungfu-artifact-sync",
            "KungFu sync SGD (artifact's benchmark)",
            "kungfu",
            None,
            requires=("exe:kungfu-run",),
            check=kungfu_artifact.missing,
            command=kungfu_artifact.benchmark_argv("sync-sgd"),
        ),
        System(
            "kungfu-artifact-async",
            "KungFu pair averaging (artifact's benchmark)",
            "kungfu",
            None,
            requires=("exe:kungfu-run",),
            check=kungfu_artifact.missing,
            command=kungfu_artifact.benchmark_argv("async-sgd"),
            min_workers=2,
        ),
        System(
            "mxnet-baseline",
            "baseline (MXNet 1.9.1 KVStore)",
            "dmlc",
            None,
            module="lab.bench.p3.mxnet_workload",
            requires=(f"path:{MXNET_PYTHON}",),
        ),
        System(
            "mxnet-slicing",
            "slicing (MXNet, MXNET_KVSTORE_BIGARRAY_BOUND=40000)",
            "dmlc",
            None,
            module="lab.bench.p3.mxnet_workload",
            requires=(f"path:{MXNET_PYTHON}",),
        ),
        System(
            "p3-mxnet-fork",
            "P3 (its MXNet fork, train_imagenet.py, dist_device_sync)",
            "dmlc",
            None,
            requires=(f"env:{p3_artifact.HOME_ENV}", f"env:{p3_artifact.PYTHON_ENV}"),
            command=p3_artifact.fork_argv,
        ),
        System(
            "pair-avg",
            "pair averaging (lab, MPI one-sided)",
            "mpi",
            None,
            module="lab.bench.pair_averaging",
            requires=("mpi4py", "exe:mpirun"),
            min_workers=2,
        ),
    )
}


def uses_torch(name: str) -> bool:
    """Whether system ``name`` trains with PyTorch (its figures' ideal is ``torch-single``)."""
    return name in SYSTEMS and SYSTEMS[name].module == TORCH_WORKLOAD


def ideal_of(name: str) -> str:
    """The system whose one worker, without communication, is ``name``'s ideal rate."""
    return IDEALS.get(get_system(name).module, "single")


def _check_counts(values: Mapping[str, Any]) -> None:
    """The counts an upstream script's point gives (no config of the lab's to check them)."""
    for name, low in (("batch_size", 1), ("steps", 1), ("warmup_steps", 0)):
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise ParameterError(name, value, f"an integer >= {low}")


def get_system(name: str) -> System:
    try:
        return SYSTEMS[name]
    except KeyError:
        raise ParameterError("system", name, ", ".join(SYSTEMS)) from None


def split_available(
    names: Iterable[str], cluster: Any = None, need_one: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The systems that can run here (on ``cluster``, when given: its launcher is asked
    whether it can start a job there), and why each of the others cannot.

    Raises:
        NothingMeasured: with ``need_one``, when none can run: a figure with nothing to
            measure says which of its systems is missing what, not an IndexError later.
    """
    from lab.errors import NothingMeasured

    runnable, skipped = [], {}
    for name in names:
        system = get_system(name)
        reason = system.unavailable() or (
            _launcher_refuses(system, cluster) if cluster is not None else None
        )
        if reason:
            skipped[name] = reason
        else:
            runnable.append(name)
    if need_one and not runnable:
        why = "; ".join(f"{SYSTEMS[n].label}: {r}" for n, r in skipped.items())
        raise NothingMeasured(f"none of this figure's systems can run here: {why}")
    return runnable, skipped


def _launcher_refuses(system: System, cluster: Any) -> str | None:
    """The launcher's own pre-launch check (e.g. horovodrun on an emulated cluster)."""
    from lab.cluster.inventory import as_cluster
    from lab.cluster.launchers import get_launcher
    from lab.cluster.launchers.base import Job
    from lab.errors import LabError

    c = as_cluster(cluster)
    job = Job(command=("true",), np=1, cluster=c, options=dict(system.options))
    try:
        get_launcher(system.launcher).check(job)
    except LabError as e:
        return str(e).split(":", 1)[0] if len(str(e)) > 120 else str(e)
    return None


def python_for(cluster: Any) -> str:
    """The interpreter ranks run (lab.cluster.inventory.rank_python), else ``python3``."""
    from lab.cluster.inventory import as_cluster, rank_python

    return rank_python(as_cluster(cluster)) or "python3"
