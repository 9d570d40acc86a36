"""The KungFu rooms' controls take the sweep's path: a point tried from the controls of Fig 7
(an elastic run through a schedule), Fig 8 (a monitoring setting) and adaptive batch (one
launch of every arm) is recorded as the sweep's own point, so the sweep (or the protocol's
rounds) hands it back instead of running it, and ``mark`` adds it to the figure's data.

Fig 8's runs are real launches of tests/bin/step_rank.py through ``run_point`` (its
throughput with the monitor on and off is known exactly); Fig 7's and adaptive batch's are
real Horovod runs at the smallest settings (slow)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lab.errors import ParameterError
from lab.experiments import Controls, run_point, run_rounds, run_sweep
from lab.experiments.controls import MARK_NAME, TRIED
from lab.experiments.resume import CONTROLS_KEY
from lab.experiments.systems import SYSTEMS, System
from lab.metrics import store
from lab.metrics.protocol import Target

STEP_RANK = Path(__file__).resolve().parents[1] / "bin" / "step_rank.py"
OFF_S, ON_S = 0.01, 0.0125  # a step without and with the monitor: a 20% overhead


def click(controls: Controls, timeout: float = 120) -> Any:
    """Press Run as a person would and wait for the run; its RunResult."""
    controls.button.click()
    assert controls._thread is not None
    controls._thread.join(timeout=timeout)
    assert not controls._thread.is_alive()
    assert "done: succeeded" in controls.status.value, html.unescape(controls.status.value)
    return controls.runs[-1][1]


def note(controls: Controls) -> str:
    return html.unescape(controls.widget.children[1].value)


# -- Fig 8 --------------------------------------------------------------------------------


def _monitored(point: Any, python: str) -> list[str]:
    argv = [python, str(STEP_RANK), "--batch-size", str(point["batch_size"])]
    argv += ["--steps", str(point["steps"]), "--step-seconds", str(OFF_S)]
    if point.get("monitor", "none") != "none":
        argv += ["--on-seconds", str(ON_S), "--alternate", str(point.get("alternate", 0))]
    return argv


@pytest.fixture
def monitored(monkeypatch) -> str:
    """A system that alternates its monitor as KungFu's does (its backend), whose ranks
    are step_rank.py: 20% slower with the monitor on."""
    system = System("monitored", "step rank", "local", "kungfu-monitor", command=_monitored)
    monkeypatch.setitem(SYSTEMS, "monitored", system)
    return "monitored"


@pytest.mark.parametrize("alternate", [3, 0], ids=["within-runs", "across-runs"])
def test_fig8_a_setting_tried_is_the_rounds_next_run_and_a_star(monitored, alternate) -> None:
    from lab.experiments.kungfu import fig8

    p = {**fig8.DEFAULTS["smoke"], "systems": [monitored], "workers": 1, "steps": 12}
    p |= {"warmup_steps": 0, "alternate": alternate}
    points, keys, compared = fig8.protocol_points(p, [monitored])
    values = {"system": monitored, "model": "small_cnn", "batch_size": 32, "workers": 1}
    controls = Controls(
        {**values, "setting": "variance interval 1"},
        run=lambda point, out: run_point(point, fig8.EXPERIMENT, out=out),
        choices={"system": [monitored], "setting": list(fig8.SETTINGS)},
        sweep=points,
        build=lambda v: fig8.point_for(p, v),
    )
    assert "steps=12" in note(controls) and "monitor=variance, interval=1" in note(controls)
    assert ("alternate=3" in note(controls)) == bool(alternate)
    tried = click(controls)
    assert store.read_manifest(tried.run_dir)["params"][CONTROLS_KEY] is True

    target = Target(rel_ci=0.5, budget_s=120, min_repeats=2)
    measured = run_rounds(
        fig8.EXPERIMENT, points, compared, target, keys=keys, run=fig8.runner("smoke", "local")
    )
    made = measured.attrs["runs"]
    from_controls = made[made["run_dir"] == str(tried.run_dir)]
    on = ("monitored", "small_cnn", "variance interval 1")
    # within runs the one run holds the setting's steps and its baseline's
    assert on in list(from_controls["point"]) and len(from_controls) == (2 if alternate else 1)
    launched = set(made["run_dir"]) - {str(tried.run_dir)}
    assert len(store.list_runs(fig8.EXPERIMENT)) == 1 + len(launched)  # it was not re-run

    overheads = fig8.overheads(measured)
    assert overheads["overhead"].tolist() == pytest.approx([0.2])
    figure = fig8.figure(overheads)
    marked = controls.mark(figure, x="setting", y=fig8.tried_overhead(measured))
    (star,) = [t for t in marked.data if t.name == MARK_NAME]
    assert list(star.x) == ["variance interval 1"] and list(star.y) == pytest.approx([20.0])
    assert len(marked.data) == len(figure.data) + 1


def test_fig8_controls_name_the_sweeps_point_for_a_setting(monitored) -> None:
    """The baseline of a system that alternates has no run of its own in the sweep: tried
    from the controls it is a plain run, and it is no star (it has no overhead)."""
    from lab.experiments.kungfu import fig8

    p = {**fig8.DEFAULTS["smoke"], "systems": [monitored], "workers": 1}
    values = {"system": monitored, "model": "small_cnn", "batch_size": 32, "workers": 1}
    noise = fig8.point_for(p, {**values, "setting": "noise scale"})
    assert (noise["monitor"], noise["interval"], noise["alternate"]) == ("noise-scale", 1, 3)
    baseline = fig8.point_for(p, {**values, "setting": fig8.BASELINE})
    assert baseline["monitor"] == "none" and not baseline.get("alternate")
    assert fig8.tried_overhead(pd.DataFrame())(baseline, Path("unused")) is None
    with pytest.raises(ParameterError, match="settings"):
        fig8.point_for(p, {**values, "setting": "sometimes"})


# -- Fig 7 --------------------------------------------------------------------------------


def test_fig7_schedules_are_checked_as_typed() -> None:
    from lab.experiments.kungfu import fig7

    controls = Controls(
        {"system": fig7.SYSTEM, "schedule": "0:1,2:stop", "model": "tiny_cnn", "batch_size": 8},
        run=lambda point, out: pytest.fail("a refused schedule ran"),
        parse={"schedule": fig7.checked_schedule},
        sweep=fig7.points({"schedule": "0:1,2:stop", "model": "tiny_cnn", "batch_size": 8}),
    )
    assert "steps=100000" in note(controls) and "warmup_steps=0" in note(controls)
    field = controls.fields["schedule"]
    for text in ("0:1,20:2", "abc", "5:1,2:stop", "", "0:stop"):
        field.widget.value = text
        assert controls.button.disabled, text
        assert "schedule:" in html.unescape(field.error.value), text
        assert field.widget.value == text  # left as typed
    field.widget.value = "0:1,3:2,9:stop"
    assert not controls.button.disabled and controls.point()["schedule"] == "0:1,3:2,9:stop"
    assert "tiny_cnn" in controls.fields["model"].widget.options  # a dropdown


@pytest.mark.slow
def test_fig7_a_run_tried_is_the_sweeps_run_and_drawn_dotted() -> None:
    pytest.importorskip("horovod")
    from lab.experiments.evidence import run_dirs
    from lab.experiments.kungfu import fig7

    p = {"schedule": "0:1,2:stop", "model": "tiny_cnn", "batch_size": 8}
    points = fig7.points(p, [fig7.SYSTEM])
    controls = Controls(
        {"system": fig7.SYSTEM, **p},
        run=lambda point, out: fig7.run_one(point, "smoke", "local", out=out),
        choices={"system": [fig7.SYSTEM]},
        parse={"schedule": fig7.checked_schedule},
        sweep=points,
    )
    tried = click(controls, timeout=300)
    assert store.read_manifest(tried.run_dir)["params"][CONTROLS_KEY] is True

    summary = run_sweep(fig7.EXPERIMENT, points, run=fig7.runner("local"))
    assert list(summary["sweep_status"]) == ["skipped"]  # handed back, not run again
    assert run_dirs(summary) == (str(tried.run_dir),)
    assert len(store.list_runs(fig7.EXPERIMENT)) == 1

    figure = fig7.figure(run_dirs(summary))
    marked = controls.mark(figure, draw=fig7.run_traces)
    (dotted,) = [t for t in marked.data if t.name.startswith(TRIED)]
    assert dotted.name == TRIED + "Horovod Elastic · tiny_cnn" and dotted.line.dash == "dot"
    assert list(dotted.y) == list(figure.data[0].y) and len(figure.data) == 1


# -- adaptive batch -------------------------------------------------------------------------


def _adaptive_controls(p: dict[str, Any]) -> Controls:
    from lab.experiments.kungfu import adaptive

    keys = ("start_batch", "max_batch", "workers", "steps", "features", "seeds")
    return Controls(
        {k: p[k] for k in keys},
        run=lambda point, out: adaptive.run_one(point, "smoke", "local", out=out),
        bounds={"workers": (2, 64)},
        sweep=adaptive.points(p),
        build=lambda values: adaptive.point_for(p, values),
    )


SMALL = {"workers": 2, "start_batch": 16, "fixed_batches": [16], "max_batch": 64, "steps": 5}
SMALL |= {"features": 16, "seeds": 1}


def test_adaptive_values_that_do_not_go_together_are_refused_beside_their_field() -> None:
    controls = _adaptive_controls(SMALL)
    assert "arms=adaptive:16,fixed:16" in note(controls)
    controls.fields["start_batch"].widget.value = "32"
    assert "arms=adaptive:32,fixed:16" in note(controls)  # the note follows the values
    controls.fields["max_batch"].widget.value = "8"
    assert controls.button.disabled
    assert "max_batch=8" in html.unescape(controls.fields["max_batch"].error.value)
    controls.button.click()
    assert "refused, nothing ran" in controls.status.value and not controls.runs
    controls.fields["max_batch"].widget.value = "64"
    assert not controls.button.disabled and controls.fields["max_batch"].error.value == ""
    workers = controls.fields["workers"]
    workers.widget.value = "1"  # one rank has no noise scale
    assert controls.button.disabled and "1 is out of range" in workers.error.value


@pytest.mark.slow
def test_adaptive_a_launch_tried_is_the_sweeps_and_drawn_dotted() -> None:
    pytest.importorskip("horovod")
    from lab.experiments.evidence import run_dirs
    from lab.experiments.kungfu import adaptive

    controls = _adaptive_controls(SMALL)
    tried = click(controls, timeout=300)
    assert store.read_manifest(tried.run_dir)["params"][CONTROLS_KEY] is True

    summary = run_sweep(adaptive.EXPERIMENT, adaptive.points(SMALL), run=adaptive.runner())
    assert list(summary["sweep_status"]) == ["skipped"]
    assert run_dirs(summary) == (str(tried.run_dir),)
    assert len(store.list_runs(adaptive.EXPERIMENT)) == 1

    figure = adaptive.figure(adaptive.curves(summary))
    marked = controls.mark(figure, draw=adaptive.run_traces)
    added = marked.data[len(figure.data) :]
    assert len(added) == len(figure.data)  # the same lines on the same four panels
    named = {t.name for t in added if t.showlegend}
    assert named == {TRIED + "adaptive · from 16", TRIED + "fixed · 16"}
    assert all(t.line.dash == "dot" for t in added)
