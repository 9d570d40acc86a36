"""The controls' fields: one widget per parameter and how its text becomes a value.

A number is typed into a text box and parsed here, not by the widget: a whole number out of
range, or "2.5" for one, is refused with a message naming the parameter and what it
allows, never rounded or clamped (an integer widget would silently coerce it). A choice is
a dropdown; ``model`` gets every model the workloads know. A room may give a parameter a
parser of its own (KungFu Fig 7's schedule), which refuses a text by raising ValueError
(ParameterError is one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lab.errors import ParameterError

INT_MAX = 1_000_000
_INT = re.compile(r"[+-]?\d+")


@dataclass
class Field:
    """One parameter's widget and how its text becomes a value (or is refused)."""

    name: str
    widget: Any
    error: Any
    parse: Callable[[Any], Any]

    @property
    def label(self) -> str:
        return self.name.replace("_", " ")

    def read(self) -> tuple[Any, str]:
        """(value, "") or (None, why the text is refused)."""
        try:
            return self.parse(self.widget.value), ""
        except ValueError as e:
            return None, f"{self.label}: {e}"


def parse_int(low: int | None, high: int | None) -> Callable[[Any], int]:
    """A parser of whole numbers in [low, high]: "2.5", "1e3", "" and letters are refused."""

    def parse(text: Any) -> int:
        shown = str(text).strip()
        allowed = _int_range(low, high)
        if not _INT.fullmatch(shown):
            raise ValueError(f"{shown!r} is not a whole number; {allowed}")
        value = int(shown)
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{value} is out of range; {allowed}")
        return value

    return parse


def _int_range(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"allowed: a whole number from {low:,} to {high:,}"
    return f"allowed: a whole number >= {low:,}" if low is not None else "allowed: a whole number"


def parse_float(text: Any) -> float:
    shown = str(text).strip()
    try:
        value = float(shown)
    except ValueError:
        raise ValueError(f"{shown!r} is not a number; allowed: a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{shown!r} is not a finite number; allowed: a finite number")
    return value


def _model_choices(value: Any) -> list[str] | None:
    """Every model the synthetic workload knows, when ``value`` is one of them."""
    from lab.bench.models import model_names

    names = model_names()
    return names if value in names else None


def _own(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A room's parser, its ParameterError said as the other fields say theirs."""

    def checked(text: Any) -> Any:
        try:
            return parse(str(text).strip())
        except ParameterError as e:
            raise ValueError(f"{e.value!r} is not allowed; allowed: {e.allowed}") from None

    return checked


def make_field(
    name: str,
    value: Any,
    choices: Sequence[Any] | None = None,
    bounds: tuple[int | None, int | None] | None = None,
    parse: Callable[[Any], Any] | None = None,
) -> Field:
    """The widget for one parameter: a dropdown for a choice (``model`` gets every known
    model), a checkbox for a bool, a checked text box for a number, a text box else
    (checked by ``parse`` where given)."""
    import ipywidgets as w

    label = name.replace("_", " ")
    style = {"description_width": "initial"}
    error = w.HTML("", layout=w.Layout(min_height="0"))
    if parse is not None:
        widget = w.Text(value=str(value), description=label, style=style)
        return Field(name, widget, error, _own(parse))
    if choices is None and name == "model":
        choices = _model_choices(value)
    if choices:
        options = list(choices)
        start = value if value in options else options[0]
        widget = w.Dropdown(options=options, value=start, description=label, style=style)
        return Field(name, widget, error, lambda v: v)
    if isinstance(value, bool):
        return Field(name, w.Checkbox(value=value, description=label), error, bool)
    if isinstance(value, int):
        low, high = bounds or (1, INT_MAX)
        widget = w.Text(value=str(value), description=label, style=style)
        widget.layout.width = "14em"
        return Field(name, widget, error, parse_int(low, high))
    if isinstance(value, float):
        widget = w.Text(value=repr(value), description=label, style=style)
        widget.layout.width = "14em"
        return Field(name, widget, error, parse_float)
    return Field(name, w.Text(value=str(value), description=label, style=style), error, str)
