"""The controls and the sweeps share one path: a point tried from the controls is recorded as
the sweep's point, the sweep (and the protocol's rounds) do not run it again, re-running a
sweep repeats nothing, a Stop ends a sweep with a sentence, and bad values are refused as
typed. Every run here is a real launch of tests/bin/step_rank.py through ``run_point``."""

from __future__ import annotations

import html
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.errors import NothingMeasured, ParameterError, RunStopped
from lab.experiments import Controls, run_point, run_rounds, run_sweep
from lab.experiments.outcome import require_succeeded
from lab.experiments.resume import CALL_KEY, CONTROLS_KEY, PASS_KEY
from lab.experiments.systems import SYSTEMS, System
from lab.metrics import store
from lab.metrics.protocol import Target, throughput

STEP_RANK = Path(__file__).resolve().parents[1] / "bin" / "step_rank.py"
EXPERIMENT = "t/controls"


def _command(point: Any, python: str) -> list[str]:
    argv = [python, str(STEP_RANK), "--batch-size", str(point["batch_size"])]
    argv += ["--steps", str(point["steps"]), "--hold", str(point.get("hold", 0))]
    return [*argv, "--exit-code", str(point.get("exit_code", 0))]


@pytest.fixture(autouse=True)
def step_system(monkeypatch) -> Iterator[str]:
    """A system whose ranks are tests/bin/step_rank.py (batch b: b / 0.01 samples/s)."""
    monkeypatch.setitem(
        SYSTEMS, "steps", System("steps", "step rank", "local", None, command=_command)
    )
    yield "steps"


def runs() -> list[Path]:
    return store.list_runs(EXPERIMENT)


def run(point: Any, out: Any = None) -> Any:
    return run_point(point, EXPERIMENT, out=out, view=None if out is None else "auto")


def sweep_points() -> list[dict[str, Any]]:
    return [{"system": "steps", "batch_size": b, "steps": 6} for b in (8, 16)]


def click(controls: Controls) -> None:
    controls.button.click()
    assert controls._thread is not None
    controls._thread.join(timeout=120)
    assert not controls._thread.is_alive()


def test_bad_values_are_refused_as_typed_never_coerced() -> None:
    calls: list[Any] = []
    controls = Controls(
        {"system": "steps", "batch_size": 32, "lr": 0.1},
        run=lambda point, out: calls.append(point),
        sweep=sweep_points(),
    )
    field = controls.fields["batch_size"]
    for text in ("0", "-5", "2.5", "abc", "", "1e3", "1000001"):
        field.widget.value = text
        assert controls.button.disabled, text
        assert "batch size:" in field.error.value and "allowed: a whole number" in field.error.value
        assert field.widget.value == text  # what was typed stays as typed
        controls.button.click()  # a click that gets through anyway runs nothing
        assert "refused, nothing ran" in controls.status.value
        with pytest.raises(ParameterError, match="batch_size"):
            controls.point()
    assert calls == []
    field.widget.value = " 64 "
    assert not controls.button.disabled and field.error.value == ""
    controls.fields["lr"].widget.value = "fast"
    shown = html.unescape(controls.fields["lr"].error.value)
    assert controls.button.disabled and "lr: 'fast' is not a number" in shown
    controls.fields["lr"].widget.value = "0.05"
    assert controls.point() == {"system": "steps", "steps": 6, "batch_size": 64, "lr": 0.05}


def test_model_is_a_dropdown_of_the_known_models() -> None:
    from lab.bench.models import model_names

    controls = Controls({"model": "tiny_cnn"}, run=lambda point, out: None)
    assert list(controls.fields["model"].widget.options) == model_names()


def test_the_page_says_what_the_controls_share_with_the_sweep() -> None:
    controls = Controls({"batch_size": 8}, run=lambda point, out: None, sweep=sweep_points())
    note = controls.widget.children[1].value
    assert "steps=6" in note and "system=steps" in note and "not run again" in note
    alone = Controls({"batch_size": 8}, run=lambda point, out: None)
    assert "scale's defaults" in alone.widget.children[1].value


def test_every_click_gets_its_own_view_and_the_sweep_does_not_repeat_it() -> None:
    """Two clicks: two fresh outputs, each holding a run view with logs and a Stop button;
    the sweep then finds the clicked point done and runs only the other; run again, it
    runs nothing; the figure marks both points tried."""
    import plotly.graph_objects as go

    controls = Controls({"batch_size": 8}, run=run, sweep=sweep_points())
    click(controls)
    first = controls.current.children[0]
    controls.fields["batch_size"].widget.value = "24"
    click(controls)
    second = controls.current.children[0]
    assert first is not second and controls.current.children == (second,)
    for out in (first, second):
        (shown,) = out.outputs
        box_id = shown["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        assert box_id  # the run view's box, with its Stop button and log tabs
    assert "done: succeeded" in controls.status.value and "2,400 samples/s" in controls.status.value
    assert len(runs()) == 2
    manifests = [store.read_manifest(r) for r in runs()]
    assert all(m["params"][CONTROLS_KEY] is True for m in manifests)
    assert "tried here" in controls.history.value and controls.history.value.count("<tr>") == 3

    summary = run_sweep(EXPERIMENT, sweep_points(), run=run)
    assert list(summary["sweep_status"]) == ["skipped", "ran"]  # batch 8: done from the controls
    assert len(runs()) == 3
    again = run_sweep(EXPERIMENT, sweep_points(), run=run)
    assert list(again["sweep_status"]) == ["skipped", "skipped"] and len(runs()) == 3

    fig = go.Figure(go.Scatter(x=[8, 16], y=[1, 2], name="sweep"))
    marked = controls.mark(fig, x="batch_size", y="total")
    stars = [t for t in marked.data if t.name == "tried in the controls"]
    assert len(stars) == 1 and list(stars[0].x) == [8, 24]
    assert [round(v) for v in stars[0].y] == [800, 2400]
    assert len(fig.data) == 1  # the figure given stays as the sweep drew it


def rounds(points: list[dict[str, Any]]) -> Any:
    compared = [throughput(b) for b in ("b8", "b16")]
    target = Target(rel_ci=0.5, budget_s=600, min_repeats=2)  # two rounds: four calls
    return run_rounds(EXPERIMENT, points, compared, target, keys=["b8", "b16"], run=run)


def test_rounds_resume_from_a_controls_run_and_from_their_own_runs() -> None:
    """The protocol's first call of batch 8 takes the run made from the controls; the
    other three calls launch; running the rounds again launches nothing and gives the
    same table."""
    controls = Controls({"batch_size": 8}, run=run, sweep=sweep_points())
    click(controls)
    assert len(runs()) == 1

    first = rounds(sweep_points())
    assert len(runs()) == 4
    made = first.attrs["runs"]
    assert list(made["point"]) == ["b8", "b16", "b16", "b8"]  # round 1 rotated
    tagged = [store.read_manifest(r)["params"] for r in runs()[1:]]
    assert [p[CALL_KEY] for p in tagged] == [1, 2, 3] and len({p[PASS_KEY] for p in tagged}) == 1
    value = first.set_index("quantity").loc["throughput(b8)", "value"]
    assert math.isclose(value, 800.0, rel_tol=1e-6)

    again = rounds(sweep_points())
    assert len(runs()) == 4  # nothing repeated
    assert list(again.attrs["runs"]["run_dir"]) == list(made["run_dir"])
    assert list(again["value"]) == list(first["value"])


def test_a_batch_run_of_rounds_measures_afresh(monkeypatch) -> None:
    rounds(sweep_points())
    assert len(runs()) == 4
    monkeypatch.setenv("DISTLAB_BATCH", "1")
    rounds(sweep_points())
    assert len(runs()) == 8


class StopOnFirstLine:
    """An observer that presses Stop as the first line arrives, as a person would."""

    def on_start(self, run_dir: str, ranks: Any, control: Any) -> None:
        self.control = control
        self.stopped = False

    def on_line(self, line: Any) -> None:
        if not self.stopped:
            self.stopped = True
            self.control.cancel("stopped from the view")

    def on_end(self, state: str, exit_code: int, codes: Any) -> None:
        pass


def test_a_stop_ends_the_sweep_with_a_sentence_and_the_next_cell_gets_one_too() -> None:
    points = [{"system": "steps", "batch_size": 8, "steps": 3, "hold": h} for h in (0, 60, 0)]

    def stoppable(point: dict[str, Any]) -> Any:
        view = StopOnFirstLine() if point["hold"] else None
        return run_point(point, EXPERIMENT, view=view)

    with pytest.raises(
        RunStopped, match=r"stopped from the view, so the sweep ended there; the 1 "
    ):
        run_sweep(EXPERIMENT, points, run=stoppable)
    states = [store.read_manifest(r)["state"] for r in runs()]
    assert states == ["succeeded", "cancelled"]  # not retried, the third point not run

    result = run_point(points[1], EXPERIMENT, view=StopOnFirstLine())
    with pytest.raises(RunStopped, match="the tour's run was stopped from the view after"):
        require_succeeded(result, "the tour's run")
    assert require_succeeded(run_point(points[0], EXPERIMENT, view=None)).ok


def test_a_failed_run_leaves_a_sentence_not_a_key_error() -> None:
    point = {"system": "steps", "batch_size": 8, "steps": 2, "exit_code": 3}
    result = run_point(point, EXPERIMENT, view=None)
    with pytest.raises(NothingMeasured, match=r"the run failed \(rank 0 .*: nothing to read back"):
        require_succeeded(result)
