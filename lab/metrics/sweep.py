"""Run a list of parameter points one after another, resumably, with a live summary.

A notebook builds the points (``[{"model": "ResNet50", "np": 1}, ...]``) and a
``run_point(point) -> RunResult`` (usually a call to ``lab.cluster.launch``); the sweep
skips points that already have a succeeded run directory with the same parameters,
keeps going when a point fails (its error is noted in the summary), shows a progress bar
(a widget in notebooks) and calls ``on_point_done(summary)`` after every point so a
figure can be redrawn (``LiveFigure``). Nothing of lab.cluster is imported here.

In a batch notebook execution (``make run``: ``DISTLAB_EXECUTION`` is set) only that
execution's own runs count as done, so every batch run measures anew (as the protocol's
rounds do, lab.experiments.resume) while a second sweep over the same points in one
notebook still resumes.
"""

from __future__ import annotations

import json
import logging
import os
import traceback
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import RunStopped
from lab.metrics import store
from lab.metrics.layout import EXECUTION_ENV, execution_of

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
Key = Sequence[str] | Callable[[Mapping[str, Any]], Hashable] | None


def _canon(value: Any) -> str:
    """A comparable form of a parameter value: 4 == 4.0, tuples == lists, dict order ignored."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True, default=str)


def identity(params: Mapping[str, Any], names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """What two points must share to be the same point: ``names``' values, compared as
    ``_canon`` makes them (4 == 4.0; a name a point lacks is None)."""
    return tuple((n, _canon(params.get(n))) for n in names)


def _run_dir_of(result: Any) -> Path | None:
    if result is None:
        return None
    if isinstance(result, (str, os.PathLike)):
        return Path(result)
    if isinstance(result, Mapping):
        value = result.get("run_dir")
    else:
        value = getattr(result, "run_dir", None)
    return Path(value) if value else None


class Sweep:
    """The points of one experiment, run one after another.

    Args:
        experiment: the run directories' group (results/runs/<experiment>/); run_point
            must launch with this experiment name so that resuming finds its runs.
        points: parameter dicts, in the order to run them.
        run_point: runs one point and returns a RunResult-like value (an object or dict
            with ``run_dir``, or the run directory itself). It may raise; the sweep goes on.
        key: what identifies a point: parameter names to compare (default: all of the
            point's keys) or a function of the parameters.
        results_root: the results root (default: ``store.results_root()``).
        on_point_done: called with the summary so far after every point.
        warmup: steps per rank left out of throughput in the summary.
        group_by: columns to sort the summary by (default: the key's names).
        progress: show a progress bar.
        strict: let an exception in ``on_point_done`` (a figure that cannot be drawn) end
            the sweep, as a batch run must; otherwise it is logged and the sweep goes on.
        retries: run a failed point again up to this many times (a transient start-up
            failure of an engine on a busy machine); each attempt keeps its run directory.
        raises: exceptions of ``run_point`` that end the sweep instead of failing the
            point (a bad point, which no later point would fix).
    """

    def __init__(
        self,
        experiment: str,
        points: Sequence[Mapping[str, Any]],
        run_point: Callable[[dict[str, Any]], Any],
        key: Key = None,
        results_root: str | os.PathLike[str] | None = None,
        on_point_done: Callable[[pd.DataFrame], None] | None = None,
        warmup: int = 0,
        group_by: Sequence[str] | None = None,
        progress: bool = True,
        strict: bool = False,
        retries: int = 0,
        raises: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.experiment = experiment
        self.points = [dict(p) for p in points]
        self.run_point = run_point
        self.key = [key] if isinstance(key, str) else key
        self.results_root = results_root
        self.on_point_done = on_point_done
        self.warmup = warmup
        self.group_by = group_by
        self.progress = progress
        self.strict = strict
        self.retries = retries
        self.raises = raises
        self.rows: list[dict[str, Any]] = []

    def identity(
        self, params: Mapping[str, Any], like: Mapping[str, Any] | None = None
    ) -> Hashable:
        """What two points must share to be the same point (see ``key``)."""
        if callable(self.key):
            return self.key(params)
        names = list(self.key) if self.key is not None else sorted((like or params).keys())
        return identity(params, names)

    def find_done(self, point: Mapping[str, Any]) -> Path | None:
        """The newest succeeded run directory whose manifest params match ``point`` (in a
        batch execution: one this execution launched)."""
        want = self.identity(point, point)
        execution = os.environ.get(EXECUTION_ENV)
        for run_dir in reversed(store.list_runs(self.experiment, self.results_root)):
            manifest = store.read_manifest(run_dir)
            if manifest.get("state") != SUCCEEDED:
                continue
            if execution and execution_of(manifest) != execution:
                continue  # an earlier batch run's, or a person's: this run measures anew
            if self.identity(manifest.get("params") or {}, point) == want:
                return run_dir
        return None

    def pending(self) -> list[dict[str, Any]]:
        """The points without a succeeded run yet."""
        return [p for p in self.points if self.find_done(p) is None]

    def _row(
        self, point: Mapping[str, Any], run_dir: Path | None, status: str, error: str | None
    ) -> dict[str, Any]:
        row: dict[str, Any] = {}
        if run_dir is not None and run_dir.is_dir():
            try:
                row = store.summarize_run(run_dir, warmup=self.warmup)
            except (OSError, ValueError) as exc:
                log.warning("cannot summarise %s: %s", run_dir, exc)
        if not row:
            row = {
                "experiment": self.experiment,
                "run_dir": str(run_dir) if run_dir else None,
                "state": "failed",
            }
        for name, value in store.flatten(point).items():
            col = f"param.{name}" if name in store.SUMMARY_COLUMNS else name
            row.setdefault(
                col, value if not isinstance(value, (list, dict, tuple)) else _canon(value)
            )
        if error:
            row["state"] = (
                row.get("state") if row.get("state") not in (None, SUCCEEDED) else "failed"
            )
            row["error"] = error
        row["sweep_status"] = status
        return row

    def summary(self) -> pd.DataFrame:
        """The summary so far: one row per point handled in this sweep, in sweep order."""
        df = pd.DataFrame(self.rows)
        keys = list(self.group_by or (self.key if isinstance(self.key, Sequence) else []))
        keys = [k for k in keys if k in df.columns]
        if keys:
            df = df[keys + [c for c in df.columns if c not in keys]]
        return df

    def run(self, rerun: bool = False) -> pd.DataFrame:
        """Run every point (skipping finished ones unless ``rerun``); return the summary.

        The experiment's ``summary.parquet``/``.csv`` are written anew from the run
        directories at the end (a new version; the one before is kept), with this sweep's
        failures that left no run directory appended (their ``error`` column says why).
        """
        from tqdm.auto import tqdm

        self.rows = []
        bar = tqdm(
            total=len(self.points), desc=self.experiment, unit="point", disable=not self.progress
        )
        try:
            for point in self.points:
                bar.set_postfix_str(
                    ", ".join(f"{k}={v}" for k, v in point.items())[:60], refresh=False
                )
                done = None if rerun else self.find_done(point)
                if done is not None:
                    log.info("%s: %s already done in %s", self.experiment, point, done)
                    self.rows.append(self._row(point, done, "skipped", None))
                else:
                    self.rows.append(self._run_with_retries(point))
                bar.update(1)
                if self.on_point_done is not None:
                    try:
                        self.on_point_done(self.summary())
                    except Exception:
                        if self.strict:  # a batch run must not pass on a broken figure
                            raise
                        log.exception("on_point_done failed")  # interactive: keep going
        finally:
            bar.close()
        self._write()
        return self.summary()

    def _run_with_retries(self, point: dict[str, Any]) -> dict[str, Any]:
        """Run a point; a run that failed (not a bad parameter) is tried again up to
        ``retries`` times. Every attempt keeps its run directory, and the row says how many
        attempts it took (``attempts``) and why the earlier ones failed (``retried``)."""
        failures: list[str] = []
        while True:
            row = self._run_one(point)
            if row.get("state") == SUCCEEDED or len(failures) >= self.retries:
                break
            if str(row.get("error", "")).startswith("ParameterError"):
                break  # bad input fails the same way every time
            failures.append(f"{row.get('run_dir')}: {row.get('error')}")
            log.warning("%s: %s failed, trying again: %s", self.experiment, point, failures[-1])
        row["attempts"] = len(failures) + 1
        if failures:
            row["retried"] = "; ".join(failures)
        return row

    def _run_one(self, point: dict[str, Any]) -> dict[str, Any]:
        try:
            result = self.run_point(dict(point))
        except (KeyboardInterrupt, RunStopped, *self.raises):
            raise  # a person ended the sweep, or a bad point: no retry, no next point
        except Exception as exc:
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            log.warning("%s: point %s failed: %s", self.experiment, point, text)
            return self._row(point, _run_dir_of(exc), "failed", text)
        run_dir = _run_dir_of(result)
        state = (
            getattr(result, "state", None)
            if not isinstance(result, Mapping)
            else result.get("state")
        )
        state = getattr(state, "value", state)  # lab.cluster's RunState is an Enum of strings
        error = None if state in (None, SUCCEEDED) else f"run ended with state {state!r}"
        return self._row(point, run_dir, "ran", error)

    def _write(self) -> None:
        full = store.summarize_runs(
            self.experiment,
            self.results_root,
            group_by=self.group_by,
            warmup=self.warmup,
            write=False,
        )
        dirless = [
            r for r in self.rows if not r.get("run_dir") or not Path(str(r["run_dir"])).is_dir()
        ]
        if dirless:
            full = pd.concat([full, pd.DataFrame(dirless)], ignore_index=True)
        if "error" in full.columns:
            errors = {
                r["run_dir"]: r["error"] for r in self.rows if r.get("error") and r.get("run_dir")
            }
            mask = full["run_dir"].isin(errors) & full["error"].isna()
            full.loc[mask, "error"] = full.loc[mask, "run_dir"].map(errors)
        if len(full):
            store.write_summary(full, self.experiment, self.results_root)


class LiveFigure:
    """A plotly figure shown once and redrawn in place (papermill keeps its last state).

    It is displayed as the raw plotly mimebundle with a display id, and updated through
    the display handle; unlike a FigureWidget, the saved notebook keeps the figure.

    Args:
        build: turns a summary DataFrame into a figure; then the LiveFigure itself can be
            passed as ``on_point_done``.
    """

    def __init__(self, build: Callable[[pd.DataFrame], Any] | None = None) -> None:
        self.build = build
        self.handle: Any = None

    @staticmethod
    def bundle(fig: Any) -> dict[str, Any]:
        """The mimebundle of ``fig``: plotly JSON (JSON-clean) and a text fallback."""
        import plotly.io as pio

        spec = json.loads(pio.to_json(fig, validate=False))
        title = (spec.get("layout", {}).get("title") or {}).get("text") or "figure"
        return {
            "application/vnd.plotly.v1+json": {
                "data": spec.get("data", []),
                "layout": spec.get("layout", {}),
            },
            "text/plain": f"<plotly figure: {title}, {len(spec.get('data', []))} traces>",
        }

    def show(self, fig: Any) -> None:
        """Display ``fig`` the first time, update the same output afterwards."""
        from IPython.display import display

        data = self.bundle(fig)
        if self.handle is None:
            self.handle = display(data, raw=True, display_id=True)
        else:
            self.handle.update(data, raw=True)

    def __call__(self, summary: pd.DataFrame) -> None:
        if self.build is None:
            raise TypeError("LiveFigure needs build= to be used as on_point_done")
        self.show(self.build(summary))
