"""A batch run that measured nothing fails; resuming knows where a point ran; the runner
takes papermill-style parameters and keeps each executed copy beside its runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest

import lab
from lab.errors import NothingMeasured, ParameterError
from lab.experiments import batch, run_sweep
from lab.experiments.notebooks import (
    check_parameters,
    copy_beside_runs,
    parse_parameters,
    run_notebook,
)
from lab.experiments.saved import load_verdict
from lab.metrics import Sweep
from lab.metrics.layout import EXECUTION_ENV


def _summary(*states: str) -> pd.DataFrame:
    return pd.DataFrame({"system": ["single"] * len(states), "state": list(states)})


def test_no_succeeded_point_fails_even_interactively() -> None:
    with pytest.raises(NothingMeasured, match="no point succeeded"):
        batch.require_measured(_summary("failed", "failed"), "x", strict=False)
    with pytest.raises(NothingMeasured, match="ran no point"):
        batch.require_measured(pd.DataFrame(), "x", strict=False)


def test_a_failed_point_fails_a_batch_but_not_a_person(monkeypatch) -> None:
    mixed = _summary("succeeded", "failed")
    assert batch.require_measured(mixed, "x", strict=False) is mixed
    monkeypatch.setenv(batch.BATCH_ENV, "1")
    assert batch.in_batch()
    with pytest.raises(NothingMeasured, match="1 of 2 points failed"):
        batch.require_measured(mixed, "x")


def _trivial_run(calls: list[dict], experiment: str):
    def run(point: dict):
        calls.append(point)
        return lab.launch([sys.executable, "-c", "pass"], experiment=experiment, params=point)

    return run


def test_a_broken_figure_ends_a_strict_sweep(tmp_path: Path) -> None:
    def broken(summary):
        raise NameError("actual")  # the fig9 defect: a name that does not exist

    calls: list[dict] = []
    points = [{"n": 1}, {"n": 2}]
    with pytest.raises(NameError):
        Sweep(
            "t/strict",
            points,
            _trivial_run(calls, "t/strict"),
            on_point_done=broken,
            strict=True,
            progress=False,
        ).run()
    assert len(calls) == 1
    Sweep(
        "t/lenient", points, _trivial_run(calls, "t/lenient"), on_point_done=broken, progress=False
    ).run()
    assert len(calls) == 3


def test_resume_knows_the_cluster_a_point_ran_on() -> None:
    calls: list[dict] = []
    run = _trivial_run(calls, "t/resume")
    points = [{"system": "single", "workers": 1}]
    first = run_sweep("t/resume", points, cluster="local", run=run)
    assert len(calls) == 1 and first["cluster"].tolist() == ["local"]
    run_sweep("t/resume", points, cluster="local", run=run)
    assert len(calls) == 1  # same cluster: resumed
    again = run_sweep("t/resume", points, cluster="emulated-2", run=run)
    assert len(calls) == 2 and again["cluster"].tolist() == ["emulated-2"]


def test_parameters_like_papermill() -> None:
    params = parse_parameters([["workers", "[1, 2]"], ["model", "ResNet50"]], "{repeats: 3}")
    assert params == {"workers": [1, 2], "model": "ResNet50", "repeats": 3}
    with pytest.raises(ParameterError, match="--scale"):
        parse_parameters([["scale", "paper"]], None)
    with pytest.raises(ParameterError, match="mapping"):
        parse_parameters([], "[1, 2]")


def _notebook(path: Path, params: str, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, *(nbformat.v4.new_code_cell(s) for s in sources)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)
    return path


def test_unknown_parameter_is_refused_before_anything_runs(tmp_path: Path) -> None:
    nb = _notebook(tmp_path / "a.ipynb", 'scale = "smoke"\ncluster = "local"\nworkers = 1')
    check_parameters([nb], {"workers": 2})
    with pytest.raises(ParameterError, match="workers"):
        check_parameters([nb], {"batch": 2})


@pytest.mark.slow
def test_a_notebook_that_measured_nothing_fails_under_papermill(tmp_path: Path) -> None:
    nb = _notebook(
        tmp_path / "empty.ipynb",
        'scale = "smoke"\ncluster = "local"',
        "import os\nprint('batch:', os.environ.get('DISTLAB_BATCH'))",
        "from lab.experiments import run_sweep\n"
        "summary = run_sweep('t/empty', [{'system': 'single'}], "
        "run=lambda p: {'run_dir': None, 'state': 'failed'})",
    )
    result = run_notebook(nb, tmp_path / "out.ipynb")
    assert not result.ok and "NothingMeasured" in result.error
    assert "batch: 1" in (tmp_path / "out.ipynb").read_text()


def test_each_execution_copies_its_notebook_beside_its_own_runs_only(
    tmp_path: Path, monkeypatch
) -> None:
    """Two notebooks run at once, both with a run in one experiment: each copy goes beside
    the runs its own execution launched, named by its execution, and lists those runs."""
    made: dict[str, dict[str, list[str]]] = {"A": {}, "B": {}}
    for execution, experiment in [("A", "t/shared"), ("B", "t/shared"), ("A", "t/a"), ("B", "t/b")]:
        monkeypatch.setenv(EXECUTION_ENV, f"20250101-120000-{execution * 6}")
        run = lab.launch([sys.executable, "-c", "pass"], experiment=experiment, view=None)
        made[execution].setdefault(experiment, []).append(run.run_dir.name)
    monkeypatch.delenv(EXECUTION_ENV)
    lab.launch([sys.executable, "-c", "pass"], experiment="t/shared", view=None)  # by a person
    runs = Path(os.environ["DISTLAB_RESULTS"]) / "runs"
    for execution, theirs in made.items():
        executed = tmp_path / f"{execution}.ipynb"
        executed.write_text(json.dumps({"cells": [], "metadata": {"by": execution}}))
        copies = copy_beside_runs(executed, f"20250101-120000-{execution * 6}", "fig.ipynb")
        assert sorted(c.parent.parent for c in copies) == sorted(runs / e for e in theirs)
        for copy in copies:
            assert copy.name == f"20250101-120000-{execution * 6}-fig.ipynb"
            assert copy.read_text() == executed.read_text()
            said = json.loads(copy.with_suffix(".runs.json").read_text())
            assert said["runs"] == theirs[str(copy.parent.parent.relative_to(runs))]
    shared = sorted(p.name for p in (runs / "t" / "shared" / "notebooks").iterdir())
    assert len(shared) == 4, f"one copy and one list of runs per execution: {shared}"


def test_scale_parameters_keep_what_papermill_injected() -> None:
    from lab.experiments import scale_parameters

    defaults = {
        "smoke": {"models": ["tiny"], "workers": [1, 2]},
        "paper": {"models": ["R50"], "workers": [1, 8]},
    }
    assert scale_parameters("paper", defaults, models=None, workers=[1, 4]) == {
        "models": ["R50"],
        "workers": [1, 4],
    }
    with pytest.raises(ParameterError, match="scale"):
        scale_parameters("huge", defaults)


def test_conclude_saves_the_verdict_it_prints(tmp_path: Path, capsys) -> None:
    import plotly.graph_objects as go

    from lab.experiments import Status, Verdict, conclude

    v = Verdict("P", "Fig 3", "x is fast", Status.NOT_RESOLVED, 1.0, 0.5, runs=("r1",))
    conclude(v, "room", figure=go.Figure(), save_figure=True, results=tmp_path)
    saved = load_verdict("room", "Fig 3", results=tmp_path)
    assert saved["status"] == "not resolved at this scale" and saved["runs"] == ["r1"]
    assert (tmp_path / "figures" / "room" / "smoke" / "fig_3.html").stat().st_size > 1000
    assert v.sentence() in capsys.readouterr().out
    with pytest.raises(NothingMeasured):
        conclude(Verdict("P", "Fig 3", "x", Status.REPRODUCED), "room", results=tmp_path)


def test_every_measured_verdict_says_what_precision_it_reached(tmp_path: Path, capsys) -> None:
    from lab.experiments import Status, Verdict, conclude

    interval = Verdict("P", "Fig 3", "x", Status.NOT_RESOLVED, 2.0, 0.5, unit="s", runs=("r",))
    said = Verdict("P", "Fig 4", "y", Status.REPRODUCED, 1.1, precision="2 repeats, spread 3%",
                   runs=("r",))  # fmt: skip
    bare = Verdict("P", "Fig 5", "z", Status.REPRODUCED, 7.0, runs=("r",))
    assert interval.precision_sentence() == "Precision: ±0.5 s at 95% (25% of the value)."
    assert said.precision_sentence() == "Precision: 2 repeats, spread 3%."
    assert bare.precision_sentence() == "Precision: no interval was computed for this number."
    assert Verdict("P", "Fig 6", "w", Status.NOT_MEASURED).precision_sentence() == ""
    conclude(interval, "room", results=tmp_path)
    assert "Precision: ±0.5 s at 95% (25% of the value)." in capsys.readouterr().out
    saved = load_verdict("room", "Fig 3", results=tmp_path)
    assert saved["precision_sentence"] == interval.precision_sentence()


def test_several_claims_of_one_figure_are_saved_together(tmp_path: Path) -> None:
    from lab.experiments import Status, Verdict, conclude

    claims = [
        Verdict("E", "Fig 14", "JCT", Status.REPRODUCED, 3.6, runs=("r1",)),
        Verdict("E", "Fig 14", "makespan", Status.NOT_RESOLVED, 1.04, runs=("r2",)),
    ]
    conclude(claims, "room", results=tmp_path)
    saved = load_verdict("room", "Fig 14", results=tmp_path)
    assert saved["status"] == "not resolved at this scale" and len(saved["claims"]) == 2
    assert saved["runs"] == ["r1", "r2"]
    with pytest.raises(ValueError, match="one figure"):
        conclude(
            [claims[0], Verdict("E", "Fig 15", "x", Status.REPRODUCED, runs=("r",))],
            "room",
            results=tmp_path,
        )


def test_a_failed_point_is_tried_once_more_and_says_so() -> None:
    calls: list[dict] = []

    def flaky(point: dict):
        calls.append(point)
        code = "import sys; sys.exit(1)" if len(calls) == 1 else "pass"
        return lab.launch([sys.executable, "-c", code], experiment="t/flaky", params=point)

    summary = run_sweep("t/flaky", [{"system": "single"}], run=flaky)
    assert len(calls) == 2 and summary["state"].tolist() == ["succeeded"]
    assert summary["attempts"].tolist() == [2]
    assert summary["retried"].str.contains("RanksFailed.*exit code 1").all()
