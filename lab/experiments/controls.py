"""Widgets bound to a notebook's parameters, with a Run button that re-runs one point live.

Papermill never clicks, so a batch run skips straight past them to the sweep. A click
runs the point in a worker thread, so the kernel stays free to deliver the run view's
Stop button and later clicks; the button is disabled while a run is in progress.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)


def _widget_for(name: str, value: Any, choices: Sequence[Any] | None) -> Any:
    import ipywidgets as w

    label = name.replace("_", " ")
    style = {"description_width": "initial"}
    if choices:
        return w.Dropdown(
            options=list(choices),
            value=value if value in choices else choices[0],
            description=label,
            style=style,
        )
    if isinstance(value, bool):
        return w.Checkbox(value=value, description=label)
    if isinstance(value, int):
        return w.BoundedIntText(value=value, min=1, max=1_000_000, description=label, style=style)
    if isinstance(value, float):
        return w.FloatText(value=value, description=label, style=style)
    return w.Text(value=str(value), description=label, style=style)


class Controls:
    """A row of widgets for some parameters and a Run button.

    Args:
        defaults: parameter name -> starting value (usually the parameters cell's values).
        choices: parameter name -> allowed values, shown as a dropdown.
        run: called with the chosen values when Run is pressed; it receives an
            ``ipywidgets.Output`` to show its live view in as ``out=``.
        title: a short line above the widgets.
    """

    def __init__(
        self,
        defaults: Mapping[str, Any],
        run: Callable[..., Any],
        choices: Mapping[str, Sequence[Any]] | None = None,
        title: str = "Re-run one point",
    ) -> None:
        import ipywidgets as w

        choices = choices or {}
        self._run = run
        self.fields = {k: _widget_for(k, v, choices.get(k)) for k, v in defaults.items()}
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.status = w.HTML(value="")
        self.out = w.Output()
        self.button.on_click(self._clicked)
        self.widget = w.VBox(
            [
                w.HTML(f"<b>{title}</b>"),
                w.HBox(list(self.fields.values()), layout=w.Layout(flex_flow="row wrap")),
                w.HBox([self.button, self.status]),
                self.out,
            ]
        )
        self._thread: threading.Thread | None = None

    @property
    def values(self) -> dict[str, Any]:
        return {k: f.value for k, f in self.fields.items()}

    def _clicked(self, _button: Any) -> None:
        if self._thread and self._thread.is_alive():
            return
        values = self.values
        self.button.disabled = True
        self.status.value = "running: " + ", ".join(f"{k}={v}" for k, v in values.items())
        self.out.clear_output()
        self._thread = threading.Thread(target=self._work, args=(values,), daemon=True)
        self._thread.start()

    def _work(self, values: dict[str, Any]) -> None:
        try:
            result = self._run(values, out=self.out)
            self.status.value = f"done: {getattr(result, 'state', result)}"
        except Exception as e:  # shown to the person who clicked; the sweep is unaffected
            log.exception("run from the controls failed")
            self.status.value = f"<span style='color:#b00'>failed: {type(e).__name__}: {e}</span>"
        finally:
            self.button.disabled = False

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
