"""``launch()``: run a command as N ranks somewhere, watch it, and keep the run's directory.

Everything a person can get wrong is checked before any process starts (DESIGN.md,
contract 4): the number of ranks, the hosts and their slots, the launcher and what it
needs, and that every remote host answers over SSH. Then the launcher builds the
processes and lab.cluster.supervisor runs them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.bench.backends.common import LEAN_IMPORT_ENV
from lab.bench.flags import check_argv
from lab.cluster import rundir
from lab.cluster.fault_injector import FaultInjector
from lab.cluster.faults import check_plan, plan_records
from lab.cluster.inventory import Cluster, Slot, allocate, resolve_cluster
from lab.cluster.launchers.base import Job, ProcessSpec, RunObserver, get_launcher
from lab.cluster.ssh import (
    SSH_CONFIG_NAME,
    check_hosts,
    needs_ssh_config,
    split_config_option,
    ssh_config_text,
    ssh_options,
)
from lab.cluster.supervisor import RunResult, RunState, Supervisor
from lab.errors import LaunchError, ParameterError, RanksFailed
from lab.metrics.machine import hardware_description

log = logging.getLogger(__name__)

__all__ = ["RunResult", "RunState", "launch"]


def launch(
    command: Sequence[str] | str,
    np: int = 1,
    launcher: str = "local",
    hosts: str | None = None,
    cluster: str | Cluster | None = None,
    hostfile: str | None = None,
    timeout: float | None = None,
    experiment: str = "adhoc",
    env: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    view: str | RunObserver | None = "auto",
    results_root: str | os.PathLike[str] | None = None,
    check: bool = True,
    grace: float = 5.0,
    faults: Sequence[Any] | None = None,
) -> RunResult:
    """Run ``command`` as ``np`` ranks and block until they end.

    Args:
        command: the rank's argv (a string is split with ``shlex.split``, never a shell).
        np: number of ranks.
        launcher: a registered launcher name (``local``, ``mpi``, ``horovod``, ...).
        hosts: ``"h1:4,h2:4"``, as mpirun's ``-H``.
        cluster: a profile name (``env/clusters/NAME.yaml``), a path, or a Cluster.
        hostfile: an OpenMPI/MPICH/KungFu hostfile. At most one of hosts, cluster, hostfile.
        timeout: seconds until the run is ended as timed out (exit code 124).
        experiment: the run directory's group: ``results/runs/<experiment>/``.
        env: extra environment for every rank; it wins over RANK_ENV_DEFAULTS (which the
            manifest records under ``env_defaults``).
        options: launcher-specific settings.
        params: the experiment's parameters, recorded in the manifest.
        view: ``"auto"`` (widgets in a notebook, a progress line elsewhere), ``"widget"``,
            ``"headless"``, None (nothing), or any RunObserver.
        results_root: where ``runs/`` goes (default ``$DISTLAB_RESULTS`` or ``results/``).
        check: raise RanksFailed when the run does not succeed.
        grace: seconds between SIGTERM and SIGKILL when ranks are ended.
        faults: hosts to revoke during the run (lab.cluster.faults.Revocation); their
            events go to ``events.jsonl`` in the run directory.

    Returns:
        The RunResult (also when the run failed, if ``check`` is False).

    Raises:
        ParameterError, HostSpecError, LaunchError: before anything starts.
        RanksFailed: the run failed, timed out or was cancelled (with ``check``); the
            root-cause rank comes first; ``.result`` holds the RunResult.
        KeyboardInterrupt: after every rank is ended and the manifest written.
    """
    argv = _command(command)
    if not isinstance(np, int) or isinstance(np, bool) or np < 1:
        raise ParameterError("np", np, "an integer >= 1")
    if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
        raise ParameterError("timeout", timeout, "a number of seconds > 0, or None")
    if not isinstance(grace, int | float) or grace < 0:
        raise ParameterError("grace", grace, "a number of seconds >= 0")
    rundir.check_experiment(experiment)
    check_argv(argv)  # a lab workload's own flag checks, here rather than in N ranks
    given = _env(env)
    rank_env = {**env_defaults(given), **given}
    target = _cluster(hosts, cluster, hostfile)
    argv = _with_interpreter(argv, target)
    slots = allocate(target, np)
    runner = get_launcher(launcher)
    job = Job(
        command=argv,
        np=np,
        cluster=target,
        experiment=experiment,
        env=rank_env,
        timeout=timeout,
        options=dict(options or {}),
        params=dict(params or {}),
    )
    runner.check(job)
    plan = check_plan(faults, target, runner.build(job, slots), argv, np) if faults else ()
    ssh_opts = ssh_options(target)
    if not target.emulated:
        check_hosts([s.host for s in slots], options=ssh_opts)
    observers = _observers(view)

    with _hosts_up(target, sshd=bool(getattr(runner, "needs_ssh_to_hosts", False))) as up:
        if up is not target:
            job = dataclasses.replace(job, cluster=up)
            slots = allocate(up, np)
        run_dir = rundir.new_run_dir(experiment, results_root)
        try:
            job = _with_ssh_config(job, runner, run_dir, ssh_opts)
            if getattr(runner, "wants_run_dir", False):  # e.g. kungfu-run's -logdir goes there
                job = dataclasses.replace(job, options={**job.options, "run_dir": str(run_dir)})
            specs = [_in_namespace(s) for s in runner.build(job, slots)]
        except BaseException:
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran: leave no run behind
            raise
        injector = FaultInjector(plan, up) if plan else None
        gate = _startup_shares(up)
        watchers = [*observers, *_host_monitor(up), *([injector] if injector else [])]
        watchers += [gate] if gate else []
        supervisor = Supervisor(
            specs,
            runner,
            run_dir,
            timeout=timeout,
            observers=watchers,
            faults=injector,
            grace=float(grace),
            ssh_options=ssh_opts,
            manifest={
                **_manifest_fields(job, launcher, up, slots),
                "env_defaults": env_defaults(given),
                "faults": plan_records(plan),
            },
        )
        git = rundir.git_state_later()
        try:
            with _host_sampling(up, run_dir):
                result = supervisor.run()
        finally:
            shares = {"cpu_shares": gate.summary()} if gate else {}
            rundir.write_manifest(run_dir, git=git(), **shares)
    if check and not result.ok:
        err = RanksFailed(list(result.failures), str(run_dir), result.reason, result.exit_code)
        err.result = result  # type: ignore[attr-defined]
        raise err
    return result


def _command(command: Sequence[str] | str) -> tuple[str, ...]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise ParameterError("command", command, "a non-empty argv, e.g. ['python', 'x.py']")
    return tuple(argv)


def _with_interpreter(argv: tuple[str, ...], cluster: Cluster) -> tuple[str, ...]:
    """A command starting with a bare ``python``/``python3`` runs the cluster's Python:
    this interpreter (the lab's venv) on this machine and emulated hosts, the profile's
    ``python`` on remote nodes when it names one; anything else is left as given."""
    if argv[0] not in ("python", "python3"):
        return argv
    if cluster.is_local or cluster.emulated:
        return (sys.executable, *argv[1:])
    python = cluster.python or next((h.python for h in cluster.hosts if h.python), None)
    return (python, *argv[1:]) if python else argv


# What every rank gets unless the job's env says otherwise (the launching environment's
# own value, when it has one, is the default instead). TF_USE_LEGACY_KERAS=1: TensorFlow
# >= 2.16 otherwise gives tf.keras as Keras 3, whose variables Horovod's
# DistributedGradientTape cannot handle ("'Variable' object has no attribute 'ref'"); the
# lab pins tf-keras for that. Set for every launcher and every workload: only processes
# that use TensorFlow's Keras read it, so torch/MXNet ranks are untouched, and an
# unmodified upstream TF2 script runs as its README says. LEAN_IMPORT_ENV=1: the lab's own
# workloads import TensorFlow without pandas and scipy, which no rank uses
# (lab.bench.backends.common.NOT_FOR_RANKS); other scripts never read it.
RANK_ENV_DEFAULTS = {"TF_USE_LEGACY_KERAS": "1", LEAN_IMPORT_ENV: "1"}


def _env(env: Mapping[str, Any] | None) -> dict[str, str]:
    out = {}
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ParameterError("env", key, "variable names: non-empty, without '='")
        out[key] = str(value)
    return out


def env_defaults(env: Mapping[str, str]) -> dict[str, str]:
    """The RANK_ENV_DEFAULTS that apply to a job whose own variables are ``env``."""
    return {k: os.environ.get(k, v) for k, v in RANK_ENV_DEFAULTS.items() if k not in env}


def _cluster(hosts: str | None, cluster: str | Cluster | None, hostfile: str | None) -> Cluster:
    if isinstance(cluster, Cluster):
        if hosts or hostfile:
            raise ParameterError("cluster", cluster.name, "only one of hosts, cluster, hostfile")
        return cluster
    return resolve_cluster(hosts=hosts, cluster=cluster, hostfile=hostfile)


@contextlib.contextmanager
def _hosts_up(cluster: Cluster, sshd: bool = False) -> Iterator[Cluster]:
    """Emulated clusters are brought up (and down) by lab.cluster.emulation.prepare.

    ``sshd``: the launcher starts ranks itself over SSH (mpirun), so every emulated host
    runs an sshd; launchers that start one process per rank do without.
    """
    if not cluster.emulated:
        yield cluster
        return
    try:
        from lab.cluster import emulation
    except ImportError as e:
        raise LaunchError(f"emulated clusters need lab.cluster.emulation ({e})") from e
    with emulation.prepare(cluster, sshd=sshd) as up:
        yield up


def _host_sampling(cluster: Cluster, run_dir: os.PathLike[str]) -> Any:
    """Emulated hosts' CPU use and throttling, sampled into the run directory."""
    if not cluster.emulated:
        return contextlib.nullcontext()
    from lab.cluster.emulation import hoststats

    return hoststats.sampling(cluster, run_dir)


def _with_ssh_config(job: Job, runner: Any, run_dir: Path, ssh_opts: Sequence[str]) -> Job:
    """For launchers that run their own ssh (mpirun): when remote hosts set ssh_port or
    ssh_user, write ``run_dir/ssh_config`` saying them and name it in the job's options
    (``ssh_config``), unless the job names one already. It includes the configs plain ssh
    reads (or the file an ``-F`` in the ssh options names), so nothing else changes."""
    wants = getattr(runner, "needs_ssh_to_hosts", False) and "ssh_config" not in job.options
    if not wants or job.cluster is None or not needs_ssh_config(job.cluster.hosts):
        return job
    _, given = split_config_option(ssh_opts)
    includes = None if given is None else [os.path.abspath(os.path.expanduser(g)) for g in given]
    path = run_dir / SSH_CONFIG_NAME
    path.write_text(ssh_config_text(job.cluster.hosts, includes))
    path.chmod(0o600)  # ssh refuses a config that others may write
    return dataclasses.replace(job, options={**job.options, "ssh_config": str(path)})


def _host_monitor(cluster: Cluster) -> list[RunObserver]:
    """Emulated hosts' CPU and link use are sampled into the run directory (hostload.jsonl)."""
    emulation = cluster.extra.get("emulation") if cluster.emulated else None
    if not emulation:
        return []
    from lab.cluster.emulation.monitor import HostMonitor

    return [HostMonitor(emulation)]


def _startup_shares(cluster: Cluster) -> Any:
    """Emulated hosts start at full speed and get their CPU shares once the job is up
    (lab.cluster.emulation.startup), unless the profile says ``startup: share``."""
    emulation = cluster.extra.get("emulation") if cluster.emulated else None
    if not emulation or emulation.get("startup", "full") != "full":
        return None
    from lab.cluster.emulation.startup import StartupShares

    return StartupShares(emulation)


def _in_namespace(spec: ProcessSpec) -> ProcessSpec:
    """A spec for an emulated host runs inside its namespace and cgroup."""
    if spec.host.namespace is None:
        return spec
    from lab.cluster import emulation

    return dataclasses.replace(spec, argv=tuple(emulation.wrap_argv(spec.host, spec.argv)))


def _observers(view: str | RunObserver | None) -> list[RunObserver]:
    if view is None:
        return []
    if not isinstance(view, str):
        return [view]
    try:
        from lab.cluster.view import make_view
    except ImportError as e:
        log.info("no run view (%s); running without one", e)
        return []
    made = make_view(view)
    return [made] if made is not None else []


def _manifest_fields(job: Job, launcher: str, cluster: Cluster, slots: Sequence[Slot]) -> dict:
    return {
        "experiment": job.experiment,
        "params": dict(job.params),
        "launcher": launcher,
        "options": dict(job.options),
        "np": job.np,
        "command": list(job.command),
        "env": dict(job.env),
        "cluster": {
            "name": cluster.name,
            "emulated": cluster.emulated,
            "hosts": [dataclasses.asdict(h) for h in cluster.hosts],
            "emulation": cluster.extra.get("emulation"),  # cgroups, links, fair settings
        },
        "slots": [{"rank": s.rank, "host": s.host.name, "local_rank": s.local_rank} for s in slots],
        "launched_by": {"argv": list(sys.argv), "pid": os.getpid(), "cwd": os.getcwd()},
        "versions": rundir.package_versions(),  # of the launching machine
        "launched_on": {"host": platform.node(), "hardware": hardware_description()},
    }
