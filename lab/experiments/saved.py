"""Where a figure's verdict and its figure are kept: one slot per room, figure and scale.

Each scale keeps its own latest verdict, so a paper-scale run does not replace the smoke one:
``verdicts/<room>/<scale>/<figure>.json`` beside ``figures/<room>/<scale>/<figure>.html``,
its ``.plotly.json`` (from which its PNG is rendered) and its ``.runs.json`` (the runs it was
drawn from). Those paths are the *latest*: relative links to files written once each, by
version, in a folder named after the figure (``verdicts/<room>/<scale>/<figure>/<version>.json``
...; lab.metrics.versions), so a later save never replaces an earlier one. A verdict and its
figure are written together or not at all, and both name their runs, so the report can tell
a figure drawn from other runs and refuse it.

A rehearsal (a scale naming "rehearsal", or a verdict flagged so) is never a verdict: it is
kept in the same shape under ``rehearsals/``, where the report does not read statuses.
Verdicts saved before scales had folders (``verdicts/<room>/<figure>.json``) are still
read, as the verdict of the scale their record names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.experiments.names import slug
from lab.metrics.versions import keep_plain, resolved, save_version

log = logging.getLogger(__name__)

FIGURE_JSON = ".plotly.json"  # a saved figure as data, from which its PNG is rendered
FIGURE_RUNS = ".runs.json"  # the runs a saved figure was drawn from
REHEARSALS = "rehearsals"
SCALE_ORDER = ("smoke", "paper")  # side by side in this order; other scales after, by name


def is_rehearsal(record: Mapping[str, Any]) -> bool:
    """True for a rehearsal's record: flagged, or at a scale that names a rehearsal."""
    return bool(record.get("rehearsal")) or "rehearsal" in str(record.get("scale", "")).lower()


def now() -> str:
    """The time a verdict is saved, as text that sorts in time order."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Slot:
    """The files of one figure at one scale.

    Args:
        base: the results root, or its ``rehearsals/`` folder.
        room: the paper's room.
        name: the figure's ``slug``.
        scale: the scale's ``slug``; "" for the layout before scales had folders.
    """

    base: Path
    room: str
    name: str
    scale: str

    def _folder(self, kind: str) -> Path:
        folder = self.base / kind / self.room
        return folder / self.scale if self.scale else folder

    @property
    def verdict(self) -> Path:
        return self._folder("verdicts") / f"{self.name}.json"

    @property
    def figure(self) -> Path:
        """The standalone interactive HTML."""
        return self._folder("figures") / f"{self.name}.html"

    @property
    def figure_json(self) -> Path:
        return self.figure.with_suffix(FIGURE_JSON)

    @property
    def figure_runs(self) -> Path:
        return self.figure.with_suffix(FIGURE_RUNS)


def png_of(figure_json: Path) -> Path:
    """The PNG rendered from a saved figure's plotly JSON: beside it, same name."""
    return figure_json.with_name(figure_json.name.removesuffix(FIGURE_JSON) + ".png")


def slot_for(root: Path, room: str, record: Mapping[str, Any]) -> Slot:
    """Where a verdict record (``Verdict.to_dict()``) is kept under ``root``."""
    base = root / REHEARSALS if is_rehearsal(record) else root
    return Slot(base, room, slug(str(record["figure"])), slug(str(record.get("scale") or "")))


@dataclass(frozen=True)
class Saved:
    """A verdict record read back, with where it lies and when it was saved.

    Args:
        slot: the figure's files at this scale (their latest paths).
        record: the verdict record.
        saved_at: when it was saved.
        path: the file it was read from: the version the latest link named then.
    """

    slot: Slot
    record: dict[str, Any]
    saved_at: str
    path: Path

    @property
    def scale(self) -> str:
        return str(self.record.get("scale") or self.slot.scale or "?")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None


def _saved(slot: Slot, latest: Path) -> Saved | None:
    path = resolved(latest)  # read once: a save that swaps the link meanwhile is not mixed in
    record = _read(path)
    if not isinstance(record, dict) or "status" not in record:
        return None
    stamp = record.get("saved_at")
    if not stamp:  # saved before verdicts carried their time
        stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="milliseconds")
    return Saved(slot, record, str(stamp), path)


def _scale_rank(saved: Saved) -> tuple[int, str]:
    scale = saved.slot.scale or slug(saved.scale)
    order = SCALE_ORDER.index(scale) if scale in SCALE_ORDER else len(SCALE_ORDER)
    return order, scale


def saved_scales(root: Path, room: str, figure: str, rehearsals: bool = False) -> list[Saved]:
    """The latest verdict of ``figure`` at each scale, smoke first, then paper, then others.

    Args:
        root: the results root.
        room: the paper's room.
        figure: the figure's name (``Verdict.figure``) or its slug.
        rehearsals: read the rehearsals instead of the verdicts.
    """
    name = slug(figure)
    base = root / REHEARSALS if rehearsals else root
    folder = base / "verdicts" / room
    found: dict[str, Saved] = {}
    for path in sorted(folder.glob(f"*/{name}.json")):
        saved = _saved(Slot(base, room, name, path.parent.name), path)
        if saved is not None:
            found[path.parent.name] = saved
    legacy = _saved(Slot(base, room, name, ""), folder / f"{name}.json")
    if legacy is not None and not rehearsals and not is_rehearsal(legacy.record):
        found.setdefault(slug(legacy.scale), legacy)  # a scale's own folder is newer
    return sorted(found.values(), key=_scale_rank)


def load_verdict(
    room: str, figure: str, scale: str = "smoke", results: str | Path | None = None
) -> dict[str, Any] | None:
    """The saved verdict record of ``figure`` at ``scale`` (None when there is none).

    Args:
        room: the paper's room.
        figure: the figure's name (``Verdict.figure``).
        scale: the scale it was measured at ("smoke", "paper" ...).
        results: the results root (default: ``lab.metrics.layout.results_root()``).
    """
    from lab.metrics.layout import results_root

    root = results_root(results)
    for saved in saved_scales(root, room, figure, rehearsals="rehearsal" in scale.lower()):
        if slug(saved.scale) == slug(scale):
            return saved.record
    return None


def figure_runs(figure: Path) -> list[str] | None:
    """The runs a saved figure (its ``.html``: one version, or a latest link) was drawn
    from, as its ``.runs.json`` beside it says (None when it names none)."""
    data = _read(figure.with_suffix(FIGURE_RUNS))
    runs = data.get("runs") if isinstance(data, dict) else data  # a bare list: older layout
    return [str(r) for r in runs] if isinstance(runs, list) else None


def save_slot(slot: Slot, files: Mapping[Path, str]) -> dict[Path, Path]:
    """Write a slot's files (keyed by their latest paths) as one new version, all or none,
    and link them in the order given (the verdict last); return each one's version file.

    Nothing written before is replaced: a plain file left from before versions (its PNG
    too, when a figure is among ``files``) is moved into the history as ``legacy``.
    """
    if slot.figure_json in files:
        keep_plain(png_of(slot.figure_json), slot.name)
    return save_version(files, stem=slot.name)
