"""A notebook's ``parameters`` cell: the names it assigns, and the values a batch sets.

The batch runner (lab.experiments.notebooks) and its command line both refuse a name the
cell does not have before anything runs; reading the cell and parsing ``-p``/``-y`` live
here so neither has to know the other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.errors import ParameterError


def parameter_names(notebook: Path) -> list[str]:
    """The names assigned in the notebook's ``parameters`` cell (used to validate it)."""
    nb = json.loads(notebook.read_text())
    cells = [
        c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])
    ]
    if len(cells) != 1:
        raise ValueError(f"{notebook}: {len(cells)} cells tagged 'parameters'; want exactly 1")
    import ast

    source = "".join(cells[0]["source"])
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def check_parameters(notebooks: Iterable[Path], parameters: Mapping[str, Any]) -> None:
    """Refuse, before anything runs, a parameter that a selected notebook does not have."""
    for nb in notebooks:
        accepted = set(parameter_names(nb))
        unknown = set(parameters) - accepted
        if unknown:
            raise ParameterError(
                "parameters",
                sorted(unknown),
                f"names in {nb.name}'s parameters cell: {', '.join(sorted(accepted))}",
            )


def parse_parameters(pairs: Sequence[Sequence[str]], yaml_text: str | None) -> dict[str, Any]:
    """Papermill-style parameters: ``-y`` first, then each ``-p NAME VALUE`` (VALUE as YAML)."""
    import yaml

    params: dict[str, Any] = {}
    if yaml_text:
        loaded = yaml.safe_load(yaml_text)
        if not isinstance(loaded, dict):
            raise ParameterError("yaml", yaml_text, "a YAML mapping, e.g. '{workers: [1, 2]}'")
        params.update(loaded)
    for name, value in pairs:
        params[name] = yaml.safe_load(value)
    for reserved in ("scale", "cluster"):
        if reserved in params:
            raise ParameterError(reserved, params[reserved], f"--{reserved}, not -p/-y")
    return params
