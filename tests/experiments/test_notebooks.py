"""Every notebook runs at smoke scale through papermill, and the runner reports failures."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from lab.experiments.notebooks import (
    NOTEBOOK_DIR,
    NotebookResult,
    discover,
    parameter_names,
    run_notebook,
    summary_table,
)

NOTEBOOKS = discover()


def test_there_are_notebooks() -> None:
    assert any(p.name == "00_tour.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: str(p.relative_to(NOTEBOOK_DIR)))
def test_notebook_conventions(nb: Path) -> None:
    """One parameters cell with scale and cluster; committed without outputs."""
    names = parameter_names(nb)
    assert "scale" in names and "cluster" in names
    data = json.loads(nb.read_text())
    for cell in data["cells"]:
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{nb} is committed with outputs"
            assert cell.get("execution_count") is None


def _concludes(nb: Path) -> bool:
    """A figure notebook ends with ``conclude(...)``: its verdict and figure are saved."""
    return "conclude(" in nb.read_text()


# rooms whose every notebook is a figure notebook ending in ``conclude`` (add a room here
# when its notebooks adopt it)
CONCLUDING_ROOMS = ("kungfu", "benchmark", "cluster", "easyscale", "p3", "cmdare")


def test_figure_notebooks_conclude() -> None:
    rooms = [nb for nb in NOTEBOOKS if nb.parent.name in CONCLUDING_ROOMS]
    assert len(rooms) >= 7
    assert [nb.name for nb in rooms if not _concludes(nb)] == []


@pytest.mark.slow
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: str(p.relative_to(NOTEBOOK_DIR)))
def test_notebook_runs_at_smoke_scale(nb: Path, tmp_path: Path, _isolated_results: Path) -> None:
    out = tmp_path / nb.name
    result = run_notebook(nb, out, {"scale": "smoke"})  # each notebook's own smoke cluster
    assert result.ok, f"{nb.name} failed: {result.error} (executed copy: {out})"
    executed = nbformat.read(out, as_version=4)
    errors = [
        o
        for c in executed.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    if _concludes(nb):  # its figure and verdict were produced from >= 1 run
        verdicts = sorted((_isolated_results / "verdicts").glob("*/*.json"))
        assert verdicts, f"{nb.name} saved no verdict under {_isolated_results}"
        for path in verdicts:
            saved = json.loads(path.read_text())
            assert len(saved["runs"]) >= 1, f"{path} names no run"
            # a run directory, or the shipped data file a figure of published data is read from
            assert all(Path(r).exists() for r in saved["runs"]), f"{path}: a named run is missing"
            figure = _isolated_results / "figures" / path.parent.name / f"{path.stem}.html"
            assert figure.stat().st_size > 1000, f"{nb.name} wrote no figure at {figure}"


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('scale = "smoke"\ncluster = "local"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(s) for s in sources)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_executed_notebooks_go_under_the_results_root(tmp_path: Path, monkeypatch) -> None:
    """$DISTLAB_RESULTS moves the executed copies with the runs and verdicts."""
    from lab.experiments.notebooks import run_notebooks

    root = tmp_path / "nbs"
    root.mkdir()
    nb = _notebook(root / "one.ipynb", "print('ran')")
    monkeypatch.setenv("DISTLAB_RESULTS", str(tmp_path / "results"))
    [result] = run_notebooks([nb], root=root, progress=False)
    assert result.ok and result.output == tmp_path / "results" / "notebooks" / "one.ipynb"
    assert "ran" in result.output.read_text()
    assert result.cpu_speed is not None and result.cpu_speed > 0
    timings = result.output.parent / "timings.jsonl"
    [line] = [json.loads(t) for t in timings.read_text().splitlines()]
    assert line["notebook"] == "one.ipynb" and line["ok"] and line["scale"] == "smoke"
    assert line["cpu_speed"] == result.cpu_speed and line["seconds"] == round(result.seconds, 1)


def test_summary_gives_the_machine_speed_over_the_run(tmp_path: Path) -> None:
    """The speed probed before each notebook: its median and range close the summary."""
    runs = [
        NotebookResult(tmp_path / f"{i}.ipynb", tmp_path / "o.ipynb", True, 1.0, cpu_speed=s)
        for i, s in enumerate([20.0, 10.0, 12.0])
    ]
    table = summary_table(runs, root=tmp_path)
    assert "median 12.0, 10.0-20.0 M loops/s" in table
    alone = NotebookResult(tmp_path / "x.ipynb", tmp_path / "o.ipynb", True, 1.0)
    assert "M loops/s" not in summary_table([alone], root=tmp_path)  # no probe, no line


@pytest.mark.slow
def test_runner_injects_parameters_and_saves_failures(tmp_path: Path) -> None:
    good = _notebook(tmp_path / "good.ipynb", "print('scale is', scale)")
    bad = _notebook(
        tmp_path / "bad.ipynb", "print('before the error')", "raise RuntimeError('boom')"
    )
    ok = run_notebook(good, tmp_path / "out" / "good.ipynb", {"scale": "paper"})
    failed = run_notebook(bad, tmp_path / "out" / "bad.ipynb", {"scale": "smoke"})
    assert ok.ok and not failed.ok
    assert "RuntimeError" in failed.error and "boom" in failed.error
    text = (tmp_path / "out" / "good.ipynb").read_text()
    assert "scale is paper" in text
    saved = (tmp_path / "out" / "bad.ipynb").read_text()
    assert "before the error" in saved  # outputs up to the failure are kept
    table = summary_table([ok, failed], root=tmp_path)
    assert "1 passed, 1 failed" in table and "FAILED" in table


def test_runner_rejects_unknown_parameters(tmp_path: Path) -> None:
    nb = _notebook(tmp_path / "p.ipynb", "pass")
    with pytest.raises(ValueError, match="parameters cell"):
        run_notebook(nb, tmp_path / "o.ipynb", {"batch": 3})


def test_parameters_cell_must_be_unique(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, tmp_path / "n.ipynb")
    with pytest.raises(ValueError, match="0 cells tagged 'parameters'"):
        parameter_names(tmp_path / "n.ipynb")
