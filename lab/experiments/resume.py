"""Resuming the measurement protocol's rounds from the runs already made.

The protocol (lab.experiments.protocol_runner) picks each next run from the values and the
seconds of the runs before it, so a pass over the same points is resumed by handing it
back, call by call, the runs an earlier pass made: every run a pass launches records in
its manifest's params the pass it belongs to (a hash of the points and the quantities they
are compared by, not of the stopping rule) and its call number. A later pass's call ``k``
gets the newest run recorded as call ``k`` when it is a run of the point asked for, and the
clock the pass reads is moved on by the seconds that run took then, so the budget is spent
as before and the pass stops where the earlier one did. A call with no such run takes a
finished run of its point made from the controls (lab.experiments.controls records
``from_controls``) that this replay has not handed back yet, newest first; only then is a
run launched. A run stopped from its view is never handed back.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.metrics import store
from lab.metrics.sweep import identity

PASS_KEY = "rounds_pass"
CALL_KEY = "rounds_call"
CONTROLS_KEY = "from_controls"
REPLAYED = ("succeeded", "failed", "timed_out")  # a stopped run measured nothing
GAP_S = 10.0  # seconds between two runs counted as the second's start-up, at most


def pass_id(points: Sequence[Mapping[str, Any]], compared: Sequence[Any]) -> str:
    """The name of a protocol over ``points`` (completed) comparing ``compared``."""
    text = json.dumps(
        [sorted(points, key=lambda p: json.dumps(p, sort_keys=True, default=str)),
         sorted(getattr(c, "name", str(c)) for c in compared)],
        sort_keys=True,
        default=str,
    )  # fmt: skip
    return hashlib.sha1(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Done:
    """A run handed back to the protocol instead of a launch (what run_one returns)."""

    run_dir: Path
    ok: bool
    state: str
    seconds: float
    made_by: str  # "pass" or "controls"


@dataclass(frozen=True)
class _Run:
    run_dir: Path
    params: Mapping[str, Any]
    state: str
    started: float
    ended: float
    seconds: float


def _epoch(value: Any) -> float:
    if isinstance(value, Mapping):
        value = value.get("epoch")
    return float(value) if isinstance(value, int | float) else 0.0


class Replay:
    """The runs of one experiment, handed back call by call (module docstring).

    Args:
        experiment: the run directories' group.
        pass_name: ``pass_id`` of the points and quantities.
        enabled: hand runs back at all (False: every call launches; runs are still tagged).
        results_root: the results root (default: ``store.results_root()``).
    """

    def __init__(
        self,
        experiment: str,
        pass_name: str,
        enabled: bool = True,
        results_root: Any = None,
    ) -> None:
        self.experiment = experiment
        self.pass_name = pass_name
        self.enabled = enabled
        self.results_root = results_root
        self.calls = 0
        self._offset = 0.0
        self._by_call: dict[int, _Run] | None = None
        self._loose: list[_Run] = []
        self._used: set[Path] = set()
        self._previous: _Run | None = None

    def clock(self) -> float:
        """Seconds for the protocol's budget: real time plus the replayed runs' seconds."""
        return time.monotonic() + self._offset

    def tags(self) -> dict[str, Any]:
        """What the run of the current call records in its params."""
        return {PASS_KEY: self.pass_name, CALL_KEY: self.calls}

    def take(self, point: Mapping[str, Any]) -> Done | None:
        """The run to hand back for the next call, which asks for ``point`` (completed as
        the manifests record it), or None: launch one (then call ``launched``)."""
        if not self.enabled:
            return None
        self._load()
        assert self._by_call is not None
        want = identity(point, sorted(point))
        run = self._by_call.get(self.calls)
        made_by = "pass"
        if run is None or identity(run.params, sorted(point)) != want or run.state not in REPLAYED:
            run, made_by = self._loose_run(want, sorted(point)), "controls"
        if run is None:
            return None
        self._used.add(run.run_dir)
        charge = run.seconds
        prev = self._previous
        if made_by == "pass" and prev is not None and prev.ended <= run.started:
            charge += min(run.started - prev.ended, GAP_S)  # its start-up then, as timed
        self._previous = run
        self._offset += charge
        self.calls += 1
        return Done(run.run_dir, run.state == "succeeded", run.state, charge, made_by)

    def launched(self) -> None:
        """The current call launched a run of its own."""
        self._previous = None
        self.calls += 1

    def _loose_run(self, want: Any, names: Sequence[str]) -> _Run | None:
        for run in self._loose:
            if run.run_dir not in self._used and identity(run.params, names) == want:
                return run
        return None

    def _load(self) -> None:
        if self._by_call is not None:
            return
        self._by_call = {}
        for run_dir in store.list_runs(self.experiment, self.results_root):
            manifest = store.read_manifest(run_dir)
            params = manifest.get("params") or {}
            run = _Run(
                run_dir=run_dir,
                params=params,
                state=str(manifest.get("state")),
                started=_epoch(manifest.get("started")),
                ended=_epoch(manifest.get("ended")),
                seconds=float(manifest.get("seconds") or 0.0),
            )
            if params.get(PASS_KEY) == self.pass_name and isinstance(params.get(CALL_KEY), int):
                self._by_call[params[CALL_KEY]] = run  # runs come oldest first: newest wins
            elif params.get(CONTROLS_KEY) and run.state == "succeeded":
                self._loose.append(run)
        self._loose.reverse()  # the newest run of a point first
