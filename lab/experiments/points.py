"""One sweep point: a dict of parameters (system, model, batch size, workers, ...) that
becomes one run, with the scale's defaults filled in and checked before anything starts."""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from lab.errors import ParameterError
from lab.experiments import rehearsal
from lab.experiments.systems import get_system, python_for

# Workload settings per scale. Smoke: small inputs that run in seconds on 2 CPU cores.
# Paper: the artifacts' settings (224x224 ImageNet-sized inputs, 10 warm-up steps).
SCALE_DEFAULTS: dict[str, dict[str, Any]] = {
    "smoke": {"image_size": 32, "steps": 15, "warmup_steps": 3, "timeout": 300},
    "paper": {"image_size": 224, "steps": 100, "warmup_steps": 10, "timeout": 3600},
}


def workload_argv(point: Mapping[str, Any], python: str) -> list[str]:
    """The rank command for one point: ``python -m <module>`` and the flags of the point's
    workload config (``System.config``), or an upstream script's command."""
    system = get_system(point["system"])
    if system.command is not None:
        system.config(point)  # the counts; the script checks the rest
        return system.command(point, python)
    return system.config(point).command(python)


def complete_point(point: Mapping[str, Any], scale: str = "smoke") -> dict[str, Any]:
    """The point with the scale's defaults filled in (what the manifest records), checked
    before anything starts: the scale, the system, the workers and, through the system's
    workload config, every workload setting (an unknown model, a batch size < 1, ...).

    Raises:
        ParameterError: naming the point's key and what it allows.
    """
    if scale not in SCALE_DEFAULTS:
        raise ParameterError("scale", scale, ", ".join(SCALE_DEFAULTS))
    defaults = {k: v for k, v in SCALE_DEFAULTS[scale].items() if k != "timeout"}
    full = rehearsal.apply({**defaults, "workers": 1, **point, "scale": scale}, scale)
    system = get_system(full["system"])
    workers = full["workers"]
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ParameterError("workers", workers, "an integer >= 1")
    system.config(full)
    return full


def scale_parameters(
    scale: str, defaults: Mapping[str, Mapping[str, Any]], **given: Any
) -> dict[str, Any]:
    """A notebook's parameters at ``scale``: each one left ``None`` in its parameters cell
    takes the scale's default; a value a person or papermill set is kept.

    Args:
        scale: a key of ``defaults`` ("smoke" or "paper"); a rehearsal cuts the paper's
            values where one CPU cannot afford them (lab.experiments.rehearsal).
        defaults: per scale, the value of every parameter.
        given: the parameters cell's values (None: use the scale's default).
    """
    if scale not in defaults:
        raise ParameterError("scale", scale, ", ".join(defaults))
    chosen = dict(defaults[scale])
    unknown = set(given) - set(chosen)
    if unknown:
        raise ParameterError("parameters", sorted(unknown), ", ".join(sorted(chosen)))
    chosen.update({k: v for k, v in given.items() if v is not None})
    return rehearsal.apply(chosen, scale)  # a rehearsal's cuts, said (else unchanged)


def cluster_name(cluster: Any) -> str:
    """The name a point records for where it ran: a profile's name, a path's stem, or a
    Cluster's ``name``."""
    name = getattr(cluster, "name", cluster)
    text = str(name or "local")
    return text[:-5].rsplit("/", 1)[-1] if text.endswith(".yaml") else text


def pinning(point: Mapping[str, Any], cluster: Any, argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` behind ``python -m lab.cluster.affinity``, which gives each rank its own
    cores, and whether it is: the point's ``pin_cpus`` if it says, else pinned on this
    machine alone (the ``local`` cluster), where unbound ranks on shared cores made runs of
    one point differ by up to 40%. The host's slots split its cores (one core a rank with a
    slot a core, a lone rank too). Emulated hosts share cores by their cgroups' quotas
    instead. A bare ``python`` in front of ``argv`` becomes the wrapper's interpreter:
    launch() resolves one only where it comes first."""
    from lab.cluster.inventory import as_cluster

    c = as_cluster(cluster)
    wanted = point.get("pin_cpus")
    if wanted is None:
        wanted = c.is_local and len(c.hosts) == 1
    if not wanted:
        return list(argv), False
    python = python_for(c)
    head = python if argv[0] in ("python", "python3") else argv[0]
    slots = max(h.slots for h in c.hosts)
    wrapper = [python, "-m", "lab.cluster.affinity", "--slots", str(slots), "--"]
    return [*wrapper, head, *argv[1:]], True


_RECORDED: ContextVar[Mapping[str, Any] | None] = ContextVar("distlab_recorded", default=None)


@contextmanager
def recorded_as(tags: Mapping[str, Any]) -> Iterator[None]:
    """Runs started by ``run_point`` in this block record ``tags`` beside their parameters
    in the manifest (which pass of rounds made them, or that the controls did). Tags are
    no part of a point's identity: a sweep compares only the keys its own points have."""
    token = _RECORDED.set({**(_RECORDED.get() or {}), **tags})
    try:
        yield
    finally:
        _RECORDED.reset(token)


def recorded_tags() -> dict[str, Any]:
    """The tags of the ``recorded_as`` block around this call, for a room whose runner
    launches without ``run_point`` (an elastic run, one launch of several arms); a
    rehearsal's points carry ``rehearsal`` too, so no measured sweep resumes them."""
    return {**(_RECORDED.get() or {}), **_rehearsal_tag()}


def run_point(
    point: Mapping[str, Any],
    experiment: str,
    scale: str = "smoke",
    cluster: Any = "local",
    view: Any = "auto",
    out: Any = None,
    results_root: Any = None,
    timeout: float | None = None,
    observe: Any = None,
) -> Any:
    """Run one point of a benchmark sweep and return its RunResult (failed runs too).

    Args:
        point: at least ``system``; ``workers`` (default 1), model, batch_size, ...
        experiment: the run directory's group (e.g. ``"benchmark/sync_sgd"``).
        scale: ``"smoke"`` or ``"paper"``; fills in image size, steps and warm-up.
        cluster: a profile name, path or Cluster.
        view: as for ``lab.cluster.launch``.
        out: an ``ipywidgets.Output`` to show the live view in (used by Controls).
        timeout: seconds for the whole run (default: the scale's).
        observe: another RunObserver to feed beside the view (e.g. a MetricTrace).
    """
    from lab.cluster import launch
    from lab.cluster.inventory import as_cluster

    full = complete_point({"cluster": cluster_name(cluster), **point}, scale)
    system = get_system(full["system"])
    reason = system.unavailable()
    if reason:
        raise ParameterError("system", system.name, f"an installed system ({reason})")
    if int(full["workers"]) < system.min_workers:
        raise ParameterError(
            "workers", full["workers"], f">= {system.min_workers} for {system.name}"
        )
    where = as_cluster(cluster)  # read once: pinning, the interpreter and launch share it
    argv, full["pin_cpus"] = pinning(full, where, workload_argv(full, python_for(where)))
    if out is not None and view == "auto":
        from lab.cluster.view import ShownIn

        view = ShownIn(out)
    if observe is not None:
        from lab.cluster.observers import FanOut
        from lab.cluster.view import make_view

        view = FanOut(make_view(view) if isinstance(view, str) or view is None else view, observe)
    return launch(
        argv,
        np=int(full["workers"]),
        launcher=system.launcher,
        cluster=where,
        experiment=experiment,
        options=dict(system.options),
        params={**full, **recorded_tags()},
        view=view,
        results_root=results_root,
        timeout=timeout or SCALE_DEFAULTS[scale]["timeout"],
        check=False,
    )


def _rehearsal_tag() -> dict[str, Any]:
    """``{"rehearsal": True}`` in a rehearsal's points: no measured sweep resumes them."""
    return {"rehearsal": True} if rehearsal.plan() is not None else {}


def grid(**axes: Sequence[Any] | Any) -> list[dict[str, Any]]:
    """Every combination of the given axes (scalars are held fixed), in order."""
    import itertools

    keys = list(axes)
    values = [v if isinstance(v, list | tuple) else [v] for v in axes.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]
