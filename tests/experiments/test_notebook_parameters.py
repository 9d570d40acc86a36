"""Every notebook refuses an unknown model, a zero batch size or an unknown system before
any process starts, naming the parameter (DESIGN.md, contract 4).

Each notebook's own cells run here, in this process (papermill's kernel would cost seconds
a case), with the bad value set after its parameters cell as papermill sets it, until a
cell raises. A launch that gets as far as its run directory, the last step before its
ranks start, fails the test: a check that is missing would otherwise show up as ranks that
fail later, naming no parameter. (Probes such as ``mpirun --version`` may run before.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from lab.bench.config import field_of
from lab.cluster import rundir
from lab.errors import ParameterError
from lab.experiments.notebooks import NOTEBOOK_DIR, discover, parameter_names

# A parameters-cell name -> (bad value, the word the error's parameter name must hold).
BAD: dict[str, list[tuple[Any, str]]] = {
    "system": [("no_such_system", "system")],
    "systems": [(["no_such_system"], "system")],
    "mxnet_systems": [(["no_such_system"], "system")],
    "model": [("no_such_model", "model")],
    "models": [(["no_such_model"], "model")],
    "checkpoint_models": [(["no_such_model"], "model")],
    "batch_size": [(0, "batch")],
    "start_batch": [(0, "batch")],
    "fixed_batches": [([0], "batch")],
    "max_batch": [(0, "batch")],
    "base": [({"batch_size": 0}, "batch"), ({"model": "no_such_model"}, "model")],
}
# a parameter whose name says it is one of these must be in BAD
SWEPT = re.compile(r"model|batch|system")


def _code_cells(nb: Path) -> list[tuple[bool, str]]:
    """(is the parameters cell, source) of every code cell."""
    cells = json.loads(nb.read_text())["cells"]
    return [
        ("parameters" in c.get("metadata", {}).get("tags", []), "".join(c["source"]))
        for c in cells
        if c["cell_type"] == "code"
    ]


def _cases() -> list[Any]:
    out = []
    for nb in discover():
        for name in parameter_names(nb):
            for value, word in BAD.get(name, []):
                rel = nb.relative_to(NOTEBOOK_DIR)
                out.append(pytest.param(nb, name, value, word, id=f"{rel}-{name}={value!r}"))
    return out


def test_every_model_batch_or_system_parameter_is_swept() -> None:
    names = {n for nb in discover() for n in parameter_names(nb) if SWEPT.search(n)}
    assert names and names <= set(BAD), f"add these to BAD: {sorted(names - set(BAD))}"


class _Started(AssertionError):
    """A launch was about to start its ranks."""


@pytest.mark.parametrize("nb, name, value, word", _cases())
def test_a_bad_parameter_fails_before_any_process_starts(
    nb: Path, name: str, value: Any, word: str, monkeypatch, _isolated_results: Path
) -> None:
    def refuse(experiment: str, *args: Any, **kwargs: Any) -> None:
        raise _Started(f"{nb.name} with {name}={value!r} launched {experiment}")

    monkeypatch.setattr(rundir, "new_run_dir", refuse)
    monkeypatch.setenv("DISTLAB_BATCH", "1")  # as the notebook runner's kernels
    monkeypatch.chdir(nb.parent)  # as papermill starts the kernel
    namespace: dict[str, Any] = {"display": lambda *a, **k: None, "__name__": "__main__"}
    raised: Exception | None = None
    for is_parameters, source in _code_cells(nb):
        try:
            exec(compile(source, f"{nb.name}", "exec"), namespace)
            if is_parameters:
                namespace[name] = value  # papermill's injected cell
        except Exception as exc:  # the first cell that raises ends the run
            raised = exc
            break
    assert isinstance(raised, ParameterError), f"{nb.name} with {name}={value!r}: {raised!r}"
    assert word in field_of(raised.name), f"{raised} names {raised.name!r}, not the {word}"
    runs = _isolated_results / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "a run directory was made"
