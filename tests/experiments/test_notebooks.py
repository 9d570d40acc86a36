"""Every notebook runs at smoke scale through papermill, and the runner reports failures."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from notebook_checks import CHECKS
from notebook_lean import LEAN

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


def test_lean_overrides_name_notebooks_and_their_parameters() -> None:
    """Every LEAN entry is a notebook here and sets only its parameters-cell names."""
    by_name = {str(nb.relative_to(NOTEBOOK_DIR)): nb for nb in NOTEBOOKS}
    assert set(LEAN) <= set(by_name), sorted(set(LEAN) - set(by_name))
    for name, overrides in LEAN.items():
        unknown = set(overrides) - set(parameter_names(by_name[name]))
        assert not unknown, f"{name}: no parameters {sorted(unknown)}"


@pytest.mark.slow
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: str(p.relative_to(NOTEBOOK_DIR)))
def test_notebook_runs_at_smoke_scale(nb: Path, tmp_path: Path, _isolated_results: Path) -> None:
    """Every cell, system and figure of the notebook, at smoke scale cut to LEAN's overrides
    (notebook_lean.py: make run keeps the whole smoke scale and its statistics), and what
    its runs must show where notebook_checks.py says."""
    out = tmp_path / nb.name
    lean = LEAN.get(str(nb.relative_to(NOTEBOOK_DIR)), {})
    result = run_notebook(nb, out, {"scale": "smoke", **lean})  # its own smoke cluster
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
        verdicts = sorted((_isolated_results / "verdicts").glob("*/*/*.json"))  # room/scale
        assert verdicts, f"{nb.name} saved no verdict under {_isolated_results}"
        for path in verdicts:
            saved = json.loads(path.read_text())
            assert len(saved["runs"]) >= 1, f"{path} names no run"
            # a run directory, or the shipped data file a figure of published data is read from
            assert all(Path(r).exists() for r in saved["runs"]), f"{path}: a named run is missing"
            kept = path.relative_to(_isolated_results / "verdicts").with_suffix(".html")
            figure = _isolated_results / "figures" / kept
            assert figure.stat().st_size > 1000, f"{nb.name} wrote no figure at {figure}"
            drawn = json.loads(figure.with_suffix(".runs.json").read_text())["runs"]
            assert drawn == saved["runs"], f"{figure} was drawn from other runs than {path}"
    problems = unreadable_figures(_isolated_results)
    assert not problems, f"{nb.name} saved figures that cannot be read:\n" + "\n".join(problems)
    check = CHECKS.get(str(nb.relative_to(NOTEBOOK_DIR)))
    if check is not None:  # what its runs must show (notebook_checks.py)
        check(_isolated_results)


def unreadable_figures(results: Path) -> list[str]:
    """``check_figure``'s problems with every figure saved under ``results`` (its
    ``.plotly.json``, judged at the size its PNG is rendered), each named by its file: every
    saved version once, not again through the link to the latest."""
    import plotly.io as pio

    from lab.experiments.saved import FIGURE_JSON
    from lab.metrics.figure_check import check_figure
    from lab.metrics.figure_style import HEIGHT, WIDTH

    problems = []
    for path in sorted((results / "figures").glob(f"**/*{FIGURE_JSON}")):
        if path.is_symlink():
            continue
        fig = pio.read_json(path)
        size = (fig.layout.width or WIDTH, fig.layout.height or HEIGHT)
        named = path.relative_to(results)
        problems += [f"{named}: {problem}" for problem in check_figure(fig, *size)]
    return problems


def test_an_unreadable_saved_figure_is_named_with_its_problem(tmp_path: Path) -> None:
    """What the notebook runs check: a figure saved by ``conclude`` whose legend carries a
    whole citation is reported by its file and the problem; a plain one is not."""
    import plotly.graph_objects as go

    from lab.experiments import Status, Verdict, conclude

    def save(figure_name: str, legend: str) -> None:
        verdict = Verdict(paper="P", figure=figure_name, claim="c", status=Status.NOT_MEASURED,
                          scale="smoke", hardware="here", why="w")  # fmt: skip
        fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=n) for n in (legend, "paper")])
        conclude(verdict, "room", fig, results=tmp_path)

    save("Fig 1", "lab")
    assert unreadable_figures(tmp_path) == []
    save("Fig 2", "KungFu (Mai et al., OSDI'20, Table 3, read from the published PDF)")
    problems = unreadable_figures(tmp_path)
    named = "figures/room/smoke/fig_2/"  # its saved version (the latest link is not re-read)
    assert problems and all(p.startswith(named) for p in problems)
    assert any("legend entry of 66 characters (over 40)" in p for p in problems)


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
    # the execution is kept under its own name, and the latest links to it
    assert result.output.is_symlink() and result.output.resolve() == result.executed.resolve()
    assert result.executed == result.output.parent / "one" / f"{result.execution}.ipynb"
    assert result.cpu_speed is not None and result.cpu_speed > 0
    timings = result.output.parent / "timings.jsonl"
    [line] = [json.loads(t) for t in timings.read_text().splitlines()]
    assert line["notebook"] == "one.ipynb" and line["ok"] and line["scale"] == "smoke"
    assert line["cpu_speed"] == result.cpu_speed and line["seconds"] == round(result.seconds, 1)


_TOGETHER = """import sys, time
from pathlib import Path
import lab
lab.launch([sys.executable, "-c", "pass"], experiment="t/shared", view=None)
Path({sync!r}, {me!r}).touch()
deadline = time.time() + 120
while not Path({sync!r}, {other!r}).exists():  # both executions run at once
    assert time.time() < deadline, "the other notebook never started"
    time.sleep(0.2)
lab.launch([sys.executable, "-c", "pass"], experiment="t/" + {me!r}, view=None)
"""

_RUN = """import json, sys
from pathlib import Path
from lab.experiments.notebooks import run_notebook
r = run_notebook(Path(sys.argv[1]), Path(sys.argv[2]))
print(json.dumps({"ok": r.ok, "error": r.error, "execution": r.execution,
                  "copies": [str(c) for c in r.copies]}))
"""


@pytest.mark.slow
def test_two_notebooks_run_at_once_keep_their_copies_apart(tmp_path: Path) -> None:
    """Two executions of one notebook at the same time (two people, or two scales), each
    with a run in one shared experiment: both executed notebooks are kept, the latest link
    names one of them, and each copy goes beside its own execution's runs only."""
    import os
    import signal
    import subprocess
    import sys

    results = Path(os.environ["DISTLAB_RESULTS"])
    sync = tmp_path / "sync"
    sync.mkdir()
    procs = {}
    out = results / "notebooks" / "fig.ipynb"  # both write the same notebook's latest
    for me, other in (("x", "y"), ("y", "x")):
        (tmp_path / me).mkdir()
        source = _TOGETHER.format(sync=str(sync), me=me, other=other)
        nb = _notebook(tmp_path / me / "fig.ipynb", source)
        procs[me] = subprocess.Popen(
            [sys.executable, "-c", _RUN, str(nb), str(out)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a kernel left by a timeout goes with its group
        )
    done = {}
    try:
        for me, proc in procs.items():
            stdout, _ = proc.communicate(timeout=300)
            done[me] = json.loads(stdout.strip().splitlines()[-1])
    finally:
        for proc in procs.values():
            if proc.poll() is None:  # not reaped: its group id is still its own
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    for me in procs:
        assert done[me]["ok"], done[me]["error"]
    runs = results / "runs" / "t"
    for me, got in done.items():
        copies = sorted(Path(c) for c in got["copies"])
        assert [c.parent.parent for c in copies] == sorted([runs / me, runs / "shared"])
        for copy in copies:
            assert copy.name == f"{got['execution']}-fig.ipynb"
            [run_id] = json.loads(copy.with_suffix(".runs.json").read_text())["runs"]
            manifest = json.loads((copy.parent.parent / run_id / "manifest.json").read_text())
            assert manifest["launched_by"]["execution"] == got["execution"]
        executed = out.parent / "fig" / f"{got['execution']}.ipynb"
        mine = f"Path({str(sync)!r}, {me!r}).touch()"
        assert mine in nbformat.read(executed, as_version=4).cells[1].source, f"not {me}'s"
    assert out.is_symlink() and out.resolve().stem in {got["execution"] for got in done.values()}
    assert len(list((runs / "shared").glob("*/manifest.json"))) == 2
    assert len(list((runs / "shared" / "notebooks").glob("*.ipynb"))) == 2


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
