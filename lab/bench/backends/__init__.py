"""One module per training engine; each exposes ``run(cfg) -> int`` (the exit code).

The table below is data, so the CLI can check ``--backend`` without importing an engine.
"""

from __future__ import annotations

from lab.errors import LabError

# backend name -> (module under lab.bench.backends, can run the gradient monitors)
BACKENDS: dict[str, tuple[str, bool]] = {
    "single": ("single", False),
    "horovod": ("horovod", True),
    "ps": ("ps", False),
    "mwms": ("mwms", True),
    "kungfu-sync": ("kungfu", True),
    "kungfu-async": ("kungfu", False),
    "kungfu-monitor": ("kungfu", True),  # KungFu's own monitoring optimizers
}


class EngineUnavailable(LabError):
    """The engine a backend needs is not installed on this node; the message says how."""
