"""File names from figure names: the one rule by which verdicts (``results/verdicts/``),
rendered figures and the report find a figure's files."""

from __future__ import annotations


def slug(text: str) -> str:
    """A file name from a figure's name: ``"Fig 14–15"`` -> ``"fig_14-15"``."""
    out = "".join(c.lower() if c.isalnum() else "_" for c in text.replace("–", "-"))
    return "_".join(p for p in out.split("_") if p) or "figure"
