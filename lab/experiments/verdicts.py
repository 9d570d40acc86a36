"""Verdicts as data: what a figure claims, what the lab measured, and whether it holds.

A notebook's closing sentence is rendered from a ``Verdict`` and the same record is saved
beside its figure, so the sentence, the figure's caption and the reproduction report cannot
disagree. Statuses are computed by the caller from measured data, never typed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from lab.experiments.names import slug  # the name the report looks the verdict up by


class Status(StrEnum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    NOT_RESOLVED = "not resolved at this scale"
    NOT_MEASURED = "not measured here"


@dataclass(frozen=True)
class Verdict:
    """One figure's claim and what the lab found.

    Args:
        paper: e.g. "KungFu (OSDI'20)".
        figure: e.g. "Fig 8".
        claim: the claim in a few words, e.g. "noise-scale monitoring costs little".
        status: computed from the data.
        lab_value: the lab's number for the claim (None when not measured).
        lab_ci: its 95% half-width, when there is one.
        published_value: the paper's number, from a published-values table row.
        published_source: that row's source.
        unit: the unit both values are in.
        scale: "smoke" or "paper".
        hardware: where the lab's number was measured.
        why: the computed reason for the status, one sentence.
        runs: the run directories the lab's number comes from.
        precision: what the lab's number's precision rests on, in words, where ``lab_ci``
            cannot say it (e.g. "2 interleaved repeats, spread 4%"); every notebook states
            the precision it reached.
        rehearsal: the paper-scale path run on one CPU machine: never a verdict, whatever
            its status (a ``scale`` that names "rehearsal" says the same).
    """

    paper: str
    figure: str
    claim: str
    status: Status
    lab_value: float | None = None
    lab_ci: float | None = None
    published_value: float | None = None
    published_source: str | None = None
    unit: str = ""
    scale: str = "smoke"
    hardware: str = ""
    why: str = ""
    runs: tuple[str, ...] = field(default_factory=tuple)
    precision: str = ""
    rehearsal: bool = False

    def is_rehearsal(self) -> bool:
        """True for a rehearsal: it is kept apart and never shown as a verdict."""
        return self.rehearsal or "rehearsal" in self.scale.lower()

    def precision_sentence(self) -> str:
        """The precision the lab's number reached ("" when nothing was measured)."""
        if self.status is Status.NOT_MEASURED or self.lab_value is None:
            return ""
        if self.precision:
            return f"Precision: {self.precision}."
        if self.lab_ci is not None and math.isfinite(self.lab_ci):
            unit = f" {self.unit}" if self.unit else ""
            rel = (
                f" ({self.lab_ci / abs(self.lab_value):.0%} of the value)" if self.lab_value else ""
            )
            return f"Precision: ±{self.lab_ci:.2g}{unit} at 95%{rel}."
        return "Precision: no interval was computed for this number."

    def sentence(self) -> str:
        """The verdict as one sentence for the notebook's last cell."""

        def fmt(v: float | None, ci: float | None = None) -> str:
            if v is None:
                return "—"
            text = f"{v:.3g}"
            return f"{text} ± {ci:.2g}" if ci is not None else text

        unit = f" {self.unit}" if self.unit else ""
        parts = [f"{self.paper} {self.figure} — {self.claim}: {self.status.value}."]
        if self.lab_value is not None:
            parts.append(f"Lab: {fmt(self.lab_value, self.lab_ci)}{unit} ({self.scale} scale")
            parts[-1] += f", {self.hardware})." if self.hardware else ")."
        if self.published_value is not None:
            parts.append(f"Published: {fmt(self.published_value)}{unit} ({self.published_source}).")
        if self.why:
            parts.append(self.why)
        precision = self.precision_sentence()
        if precision:
            parts.append(precision)
        if self.is_rehearsal():
            parts.append("A rehearsal: its status is not a verdict.")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["runs"] = list(self.runs)
        d["precision_sentence"] = self.precision_sentence()
        return d


def save_verdict(verdict: Verdict, directory: str | Path) -> Path:
    """Write the verdict as JSON into ``directory`` (created) and return its path.

    A notebook's verdict goes through ``lab.experiments.conclude`` instead, which keeps it
    per scale beside the figure drawn from the same runs, where the report reads it.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{slug(verdict.figure)}.json"
    path.write_text(json.dumps(verdict.to_dict(), indent=2) + "\n")
    return path


def percent(value: float, ci: float | None = None, decimals: int = 0) -> str:
    """A share as verdict sentences print it, with its ± interval where there is one
    (``None`` or NaN: none), e.g. ``percent(0.873, 0.05)`` → ``'87% ± 5%'``."""
    text = f"{value:.{decimals}%}"
    if ci is None or math.isnan(ci):
        return text
    return f"{text} ± {ci:.{decimals}%}"
