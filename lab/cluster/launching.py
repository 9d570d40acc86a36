"""Run a LaunchRequest as N ranks somewhere, watch it, and keep the run's directory.

``run_request`` is the one way down for every run: everything a person can get wrong is
checked before any process starts (DESIGN.md, contract 4): the request's own values
(lab.cluster.request), the slots, the launcher and what it needs, every hook's check (the
workload's flags, a fault plan) and that every remote host answers over SSH. Then the hosts
come up (an emulated cluster's, through its hook), the launcher builds the processes and
lab.cluster.supervisor runs them. What only some runs need is a hook
(lab.cluster.hooks), so this module knows no workload, fault or namespace.

``launch(command, np=..., cluster=..., ...)`` is the same with keywords: it resolves the
cluster once and builds the request.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shlex
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.cluster import rundir
from lab.cluster.hooks import LaunchHook, attached
from lab.cluster.host_keys import (
    WRAPPER_DIR,
    strict,
    weakening,
    write_agent_wrapper,
    write_ssh_wrapper,
)
from lab.cluster.inventory import Cluster, Slot, allocate, rank_python, resolve_cluster
from lab.cluster.launchers import get_launcher
from lab.cluster.launchers.base import Job, Launcher, ProcessSpec, RunControl, RunObserver
from lab.cluster.launchers.mpi import REMOTE_AGENT
from lab.cluster.loopback_hook import LoopbackHook
from lab.cluster.loopback_hook import applies as loopback_applies
from lab.cluster.request import LaunchRequest
from lab.cluster.ssh import (
    check_hosts,
    insecure_host_keys,
    split_config_option,
    ssh_options,
    write_ssh_config,
)
from lab.cluster.start_manifest import start_manifest
from lab.cluster.supervisor import RunResult, RunState, Supervisor
from lab.cluster.waiting import PendingControl, end_waiting
from lab.errors import LaunchError, ParameterError, RanksFailed, StoppedWaiting

log = logging.getLogger(__name__)

__all__ = ["LaunchRequest", "RunResult", "RunState", "launch", "run_request"]


def run_request(
    request: LaunchRequest, *, view: str | RunObserver | None = "auto", check: bool = True
) -> RunResult:
    """Run ``request`` and block until its ranks end.

    Args:
        request: what to run, how many, where, and its hooks.
        view: ``"auto"`` (widgets in a notebook, a progress line elsewhere), ``"widget"``,
            ``"headless"``, None (nothing), or any RunObserver.
        check: raise RanksFailed when the run does not succeed.

    Returns:
        The RunResult (also when the run failed, if ``check`` is False).

    Raises:
        ParameterError, HostSpecError, LaunchError: before anything starts.
        RanksFailed: the run failed, timed out or was cancelled (with ``check``); the
            root-cause rank comes first; ``.result`` holds the RunResult.
        KeyboardInterrupt: after every rank is ended and the manifest written.
    """
    target = request.where
    hooks = [*request.hooks, *cluster_hooks(target)]
    job = Job(
        command=with_interpreter(request.command, target),
        np=request.np,
        cluster=target,
        experiment=request.experiment,
        env=request.rank_env,
        timeout=request.timeout,
        options=dict(request.options),
        params=dict(request.params),
        secret_env=frozenset(request.secrets),
    )
    slots = allocate(target, request.np)
    runner = get_launcher(request.launcher)
    if loopback_applies(target, runner):  # its servers must not face the network
        hooks.append(LoopbackHook())
    runner.check(job)
    for hook in hooks:
        hook.check(job, slots, runner)
    ssh_opts = ssh_options(target)
    insecure = _insecure_said(target, ssh_opts)
    if not (target.emulated or target.slurm):  # their hosts exist only once they are up
        check_hosts([s.host for s in slots], options=ssh_opts)
    observers = _observers(view)
    pending = PendingControl()  # Stop while the hosts are still coming (a queued job)
    for hook in hooks:
        hook.waiting(lambda words: _say_pending(observers, words, pending), pending.stopped)

    with contextlib.ExitStack() as up_stack:
        up, asked = target, time.monotonic()
        try:
            for hook in hooks:
                up = up_stack.enter_context(hook.hosts(up, runner))
            if pending.stopped.is_set():  # Stop came as the hosts came up
                raise StoppedWaiting("starting", time.monotonic() - asked)
        except StoppedWaiting as stopped:
            up_stack.close()  # what the hooks hold is let go before the run is recorded
            run_dir = rundir.new_run_dir(request.experiment, request.results_root)
            manifest = start_manifest(request, job, target, slots, hooks, insecure)
            result = end_waiting(stopped, pending, run_dir, manifest, observers)
        else:
            if up is not target:
                job = dataclasses.replace(job, cluster=up)
                slots = allocate(up, request.np)
            result = _supervised(
                request, job, runner, up, slots, hooks, observers, ssh_opts, insecure
            )
    if check and not result.ok:
        err = RanksFailed(
            list(result.failures), str(result.run_dir), result.reason, result.exit_code
        )
        err.result = result  # type: ignore[attr-defined]
        raise err
    return result


def _supervised(
    request: LaunchRequest,
    job: Job,
    runner: Launcher,
    up: Cluster,
    slots: Sequence[Slot],
    hooks: Sequence[LaunchHook],
    observers: Sequence[RunObserver],
    ssh_opts: Sequence[str],
    insecure: dict[str, Any] | None,
) -> RunResult:
    """The run on hosts that are up: its directory, its processes as the launcher and the
    hooks build them, the supervisor; the manifest is written whatever happens."""
    run_dir = rundir.new_run_dir(request.experiment, request.results_root)
    try:
        job = _with_run_files(job, runner, run_dir, ssh_opts)
        start = request.cwd or os.getcwd()
        specs = [_processed(placed_in(s, start), hooks) for s in runner.build(job, slots)]
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran: leave no run behind
        raise
    manifest = start_manifest(request, job, up, slots, hooks, insecure)
    git = rundir.git_state_later()
    try:
        with attached(hooks, up, run_dir) as during:
            supervisor = Supervisor(
                specs,
                runner,
                run_dir,
                timeout=request.timeout,
                observers=[*observers, *during.observers],
                tickers=during.tickers,
                grace=request.grace,
                ssh_options=ssh_opts,
                manifest=manifest,
                secrets=request.secrets,
                rank_hosts={s.rank: s.host.name for s in slots},
            )
            return supervisor.run()
    finally:
        rundir.write_manifest(run_dir, git=git())


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
    cwd: str | os.PathLike[str] | None = None,
    secret_env: Sequence[str] = (),
) -> RunResult:
    """Run ``command`` as ``np`` ranks and block until they end: ``run_request`` with
    keywords.

    Args:
        hosts: ``"h1:4,h2:4"``, as mpirun's ``-H``.
        cluster: a profile name (``env/clusters/NAME.yaml``), a path, or a Cluster.
        hostfile: an OpenMPI/MPICH/KungFu hostfile. At most one of hosts, cluster, hostfile;
            none: this machine.
        faults: hosts to revoke during the run (lab.cluster.faults.Revocation), carried
            out by lab.cluster.fault_plan.FaultPlan; their events go to ``events.jsonl``
            in the run directory.
        command, np, launcher, timeout, experiment, env, options, params, results_root,
            grace, cwd, secret_env: as LaunchRequest's (lab.cluster.request).
        view, check: as run_request's.

    Returns, Raises: as run_request's.
    """
    request = LaunchRequest(
        command=command,  # type: ignore[arg-type]  # a string is split by the request
        where=_cluster(hosts, cluster, hostfile),
        np=np,
        launcher=launcher,
        timeout=timeout,
        experiment=experiment,
        env=env or {},
        options=options or {},
        params=params or {},
        results_root=results_root,
        grace=grace,
        cwd=cwd,
        secret_env=tuple(secret_env),
    )
    if faults is not None:
        from lab.cluster.fault_plan import FaultPlan

        request = request.with_hooks(FaultPlan(tuple(faults)))
    return run_request(request, view=view, check=check)


def cluster_hooks(cluster: Cluster) -> list[LaunchHook]:
    """The hooks a cluster brings itself: an emulated one is brought up, run in and sampled
    by lab.cluster.emulation.hook.EmulationHook; a Slurm one's hosts are a Slurm job's
    nodes, its ranks started through srun (lab.cluster.slurm.hook.SlurmHook)."""
    if cluster.slurm is not None:
        from lab.cluster.slurm.hook import SlurmHook

        return [SlurmHook()]
    if not cluster.emulated:
        return []
    try:
        from lab.cluster.emulation.hook import EmulationHook
    except ImportError as e:
        raise LaunchError(f"emulated clusters need lab.cluster.emulation ({e})") from e
    return [EmulationHook()]


def _cluster(hosts: str | None, cluster: str | Cluster | None, hostfile: str | None) -> Cluster:
    """The one Cluster that ``hosts``, ``cluster`` or ``hostfile`` names."""
    if isinstance(cluster, Cluster):
        if hosts or hostfile:
            raise ParameterError("cluster", cluster.name, "only one of hosts, cluster, hostfile")
        return cluster
    return resolve_cluster(hosts=hosts, cluster=cluster, hostfile=hostfile)


def with_interpreter(argv: Sequence[str], cluster: Cluster) -> tuple[str, ...]:
    """A command starting with a bare ``python``/``python3`` runs the cluster's Python
    (lab.cluster.inventory.rank_python): this interpreter (the lab's venv) on this machine
    and emulated hosts, the profile's ``python`` on remote nodes when it names one;
    anything else is left as given."""
    argv = tuple(argv)
    if argv[0] not in ("python", "python3"):
        return argv
    python = rank_python(cluster)
    return (python, *argv[1:]) if python else argv


def _with_run_files(job: Job, runner: Launcher, run_dir: Path, ssh_opts: Sequence[str]) -> Job:
    """The job's options with the files its launcher keeps in the run directory: an
    ssh_config for a launcher running its own ssh (mpirun) to hosts with their own port or
    user, unless the job names one; an ssh that checks host keys for one whose ssh does not
    (horovodrun: ``wants_ssh_wrapper``); the directory itself for one that asks
    (kungfu-run's ``-logdir``)."""
    options = dict(job.options)
    if getattr(runner, "needs_ssh_to_hosts", False) and "ssh_config" not in options:
        path = write_ssh_config(job.cluster.hosts if job.cluster else (), run_dir, ssh_opts)
        if path is not None:
            options["ssh_config"] = str(path)
    if getattr(runner, "wants_ssh_wrapper", False) and job.cluster is not None:
        options["ssh_bin"] = str(_ssh_wrapper(job.cluster, run_dir, options.get("ssh_config")))
    if getattr(runner, "wants_run_dir", False):
        options["run_dir"] = str(run_dir)
    return dataclasses.replace(job, options=options) if options != job.options else job


def placed_in(spec: ProcessSpec, cwd: str) -> ProcessSpec:
    """``spec`` starting where mpirun, horovodrun and torchrun start their ranks: in
    ``cwd`` (the caller's directory) on this machine and on emulated hosts, so a script
    given by a relative path is found and what it writes lands beside it; on an SSH host
    in the profile's ``workdir``, else the same path there. A directory the launcher chose
    stays. Every log still goes to the run directory."""
    if spec.cwd is not None:
        return spec
    remote = not (spec.host.is_local or spec.host.namespace is not None)
    return dataclasses.replace(spec, cwd=(spec.host.workdir or cwd) if remote else cwd)


def _ssh_wrapper(cluster: Cluster, run_dir: Path, config: str | None) -> Path:
    """``run_dir/bin/ssh`` (lab.cluster.host_keys): the engine's ssh with the run's
    ssh_config, the options of ``$DISTLAB_SSH_OPTIONS`` and of the cluster as up (an emulated
    one's identity and known_hosts) and strict host-key checking; or, on a cluster whose
    hosts another program reaches (``remote_agent``: a Slurm job's), that program; returns
    its directory."""
    agent = cluster.extra.get(REMOTE_AGENT)
    if agent:  # the hosts are reached by another program (a Slurm job's: srun)
        return write_agent_wrapper(run_dir / WRAPPER_DIR, shlex.split(str(agent))).parent
    opts = ssh_options(cluster)
    if config:
        opts, _ = split_config_option(opts)  # the generated config includes that file
        opts = ["-F", config, *opts]
    opts = ["-o", "BatchMode=yes", *strict(opts, insecure=insecure_host_keys(cluster))]
    return write_ssh_wrapper(run_dir / WRAPPER_DIR, opts).parent


def _insecure_said(cluster: Cluster, ssh_opts: Sequence[str]) -> dict[str, Any] | None:
    """When the profile turns host-key checking off: what the manifest records under
    ``ssh``, said once at launch too; None otherwise."""
    if not insecure_host_keys(cluster):
        return None
    weak = weakening(ssh_opts)
    log.warning(
        "cluster %r: host keys are NOT checked (ssh: {insecure_host_keys: true}; %s)",
        cluster.name,
        " ".join(weak) or "no weakening option given",
    )
    return {"insecure_host_keys": True, "options": weak}


def _processed(spec: ProcessSpec, hooks: Sequence[LaunchHook]) -> ProcessSpec:
    """A process as every hook leaves it (an emulated host: inside its namespace)."""
    for hook in hooks:
        spec = hook.process(spec)
    return spec


def _say_pending(observers: Sequence[RunObserver], words: str, control: RunControl) -> None:
    """Tell the observers that can hear it why the run has not started yet, and how to
    stop it meanwhile (lab.cluster.waiting)."""
    for obs in observers:
        pending = getattr(obs, "on_pending", None)
        if callable(pending):
            try:
                pending(words, control)
            except Exception:  # a view's trouble must not end a run that waits
                log.exception("run view: on_pending failed")


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
