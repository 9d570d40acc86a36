"""A run described before it starts: ``LaunchRequest``, what lab.cluster.launching runs.

One frozen value instead of a long keyword list, so that what a point or a test asks for can
be built, checked, shown and run again as data. Everything a value alone can tell is checked
when the request is made (DESIGN.md, contract 4): the command, the number of ranks, the
timeout and grace, the experiment's name and the environment's names. What depends on the
cluster and the launcher (slots, programs, hosts answering) is checked by ``run_request``,
still before any process starts. ``where`` is one resolved Cluster, so a point's profile is
read once, not once per helper that needs it.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.bench.backends.common import LEAN_IMPORT_ENV
from lab.cluster.hooks import LaunchHook, WorkloadCheck
from lab.cluster.inventory import Cluster
from lab.cluster.rundir import check_experiment
from lab.cluster.secret_env import declared, secrets_of
from lab.errors import ParameterError

# What every rank gets unless the request's env says otherwise (the launching environment's
# own value, when it has one, is the default instead). TF_USE_LEGACY_KERAS=1: TensorFlow
# >= 2.16 otherwise gives tf.keras as Keras 3, whose variables Horovod's
# DistributedGradientTape cannot handle ("'Variable' object has no attribute 'ref'"); the
# lab pins tf-keras for that. Set for every launcher and every workload: only processes
# that use TensorFlow's Keras read it, so torch/MXNet ranks are untouched, and an
# unmodified upstream TF2 script runs as its README says. LEAN_IMPORT_ENV=1: the lab's own
# workloads import TensorFlow without pandas and scipy, which no rank uses
# (lab.bench.backends.common.NOT_FOR_RANKS); other scripts never read it.
RANK_ENV_DEFAULTS = {"TF_USE_LEGACY_KERAS": "1", LEAN_IMPORT_ENV: "1"}


def env_defaults(env: Mapping[str, str]) -> dict[str, str]:
    """The RANK_ENV_DEFAULTS that apply to a job whose own variables are ``env``."""
    return {k: os.environ.get(k, v) for k, v in RANK_ENV_DEFAULTS.items() if k not in env}


@dataclass(frozen=True)
class LaunchRequest:
    """One run: what to start, how many, where, and what else it needs.

    Args:
        command: the rank's argv (a string is split with ``shlex.split``, never a shell).
        where: the Cluster the ranks go to, resolved once by the caller
            (lab.cluster.inventory.as_cluster reads a profile name or path).
        np: number of ranks.
        launcher: a registered launcher name (``local``, ``mpi``, ``horovod``, ...).
        timeout: seconds until the run is ended as timed out (exit code 124); None: none.
        experiment: the run directory's group: ``results/runs/<experiment>/``.
        env: extra environment for every rank; it wins over RANK_ENV_DEFAULTS (which the
            manifest records under ``env_defaults``).
        options: launcher-specific settings.
        params: the experiment's parameters, recorded in the manifest.
        results_root: where ``runs/`` goes (default ``$DISTLAB_RESULTS`` or ``results/``).
        grace: seconds between SIGTERM and SIGKILL when ranks are ended.
        cwd: the directory ranks start in, as with mpirun, horovodrun and torchrun;
            None: this process's working directory when the run starts (in a notebook,
            the notebook's own directory). On SSH hosts: the profile's ``workdir``, else
            the same path there (lab.cluster.launching.placed_in).
        secret_env: names of variables whose values are secret, beyond those matching
            ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*KEY*`` and ``$DISTLAB_SECRET_ENV``
            (lab.cluster.secret_env): ranks get them, files and command lines only the names.
        hooks: what only some runs need (lab.cluster.hooks.LaunchHook), in order: by
            default the lab workload's own flag check; add one with ``with_hooks``, e.g.
            a fault plan (lab.cluster.fault_plan.FaultPlan). An emulated cluster's hook
            is added by ``run_request`` itself.
    """

    command: tuple[str, ...]
    where: Cluster
    np: int = 1
    launcher: str = "local"
    timeout: float | None = None
    experiment: str = "adhoc"
    env: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    results_root: str | os.PathLike[str] | None = None
    grace: float = 5.0
    hooks: tuple[LaunchHook, ...] = (WorkloadCheck(),)
    cwd: str | os.PathLike[str] | None = None
    secret_env: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: the given values are normalised once, here
        set_(self, "command", _command(self.command))
        np, timeout, grace = self.np, self.timeout, self.grace
        if not isinstance(np, int) or isinstance(np, bool) or np < 1:
            raise ParameterError("np", np, "an integer >= 1")
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise ParameterError("timeout", timeout, "a number of seconds > 0, or None")
        if not isinstance(grace, int | float) or grace < 0:
            raise ParameterError("grace", grace, "a number of seconds >= 0")
        check_experiment(self.experiment)
        if not isinstance(self.where, Cluster):
            allowed = "a Cluster (lab.cluster.inventory.as_cluster reads a profile name)"
            raise ParameterError("where", self.where, allowed)
        set_(self, "env", _env(self.env))
        set_(self, "options", dict(self.options or {}))
        set_(self, "params", dict(self.params or {}))
        set_(self, "grace", float(grace))
        set_(self, "hooks", tuple(self.hooks))
        if self.cwd is not None:
            set_(self, "cwd", os.path.abspath(os.fspath(self.cwd)))
        set_(self, "secret_env", tuple(_env(dict.fromkeys(self.secret_env, ""))))

    def with_hooks(self, *hooks: LaunchHook) -> LaunchRequest:
        """The same request with ``hooks`` run after its own (the default workload check
        stays; giving ``hooks=`` to the constructor replaces it)."""
        return dataclasses.replace(self, hooks=(*self.hooks, *hooks))

    @property
    def rank_env(self) -> dict[str, str]:
        """Every rank's extra environment: the defaults that apply, then ``env``."""
        return {**env_defaults(self.env), **self.env}

    @property
    def secrets(self) -> dict[str, str]:
        """The secret variables of ``rank_env``, by name (lab.cluster.secret_env)."""
        return secrets_of(self.rank_env, declared(self.secret_env))


def _command(command: Sequence[str] | str) -> tuple[str, ...]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise ParameterError("command", command, "a non-empty argv, e.g. ['python', 'x.py']")
    return tuple(argv)


def _env(env: Mapping[str, Any] | None) -> dict[str, str]:
    out = {}
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ParameterError("env", key, "variable names: non-empty, without '='")
        out[key] = str(value)
    return out


__all__ = ["RANK_ENV_DEFAULTS", "LaunchRequest", "env_defaults"]
