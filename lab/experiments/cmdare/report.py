"""Where the CM-DARE notebooks keep their verdicts: ``<results>/verdicts/cmdare/``."""

from __future__ import annotations

from pathlib import Path

from lab.experiments.verdicts import Verdict, save_verdict


def keep(verdict: Verdict) -> Path:
    """Save ``verdict`` beside the other CM-DARE verdicts and return its path."""
    from lab.metrics.store import results_root

    return save_verdict(verdict, Path(results_root()) / "verdicts" / "cmdare")
