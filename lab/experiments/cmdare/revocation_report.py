"""Tables, figures and verdicts of the revocation notebook, from its runs and the
artifact's chief-rejoining and checkpoint data.

The notebook's one import: reading the runs (``revocation_tables``), drawing
(``revocation_figures``) and judging (``revocation_verdicts``) live in modules of their own,
one job each, and their names are re-exported here.
"""

from __future__ import annotations

from lab.experiments.cmdare.revocation_figures import (
    checkpoint_figure,
    chief_figure,
    worker_figure,
)
from lab.experiments.cmdare.revocation_tables import (
    CKPT_LR,
    HARDWARE,
    OUTSIDE_BEFORE_S,
    checkpoint_fits,
    chief_overheads,
    chief_restarts,
    lab_checkpoints,
    published_chief,
    revoked_ranks,
    worker_effects,
)
from lab.experiments.cmdare.revocation_verdicts import (
    LINEAR_R2,
    OUTSIDE_CHANGE,
    PUBLISHED_STEP_SECONDS,
    checkpoint_verdict,
    chief_verdict,
    outside_change,
    pooled_recovery,
    recovery_status,
    worker_verdict,
)

__all__ = [
    "CKPT_LR",
    "HARDWARE",
    "LINEAR_R2",
    "OUTSIDE_BEFORE_S",
    "OUTSIDE_CHANGE",
    "PUBLISHED_STEP_SECONDS",
    "checkpoint_figure",
    "checkpoint_fits",
    "checkpoint_verdict",
    "chief_figure",
    "chief_overheads",
    "chief_restarts",
    "chief_verdict",
    "lab_checkpoints",
    "outside_change",
    "pooled_recovery",
    "published_chief",
    "recovery_status",
    "revoked_ranks",
    "worker_effects",
    "worker_figure",
    "worker_verdict",
]
