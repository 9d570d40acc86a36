"""One small module per launcher, all behind lab.cluster.launchers.base.Launcher.

Every module in this folder is imported here, so a launcher registers itself with
``@register("name")`` and adding one is adding one file (CONTRIBUTING.md shows how).
Launchers are looked up here (``get_launcher``), where all of them are known; ``base``
knows none of them.
"""

import importlib
import pkgutil

from lab.cluster.launchers.base import LAUNCHERS, Launcher
from lab.errors import ParameterError

MODULES = tuple(
    importlib.import_module(f"{__name__}.{m.name}")
    for m in pkgutil.iter_modules(__path__)
    if m.name != "base"
)


def get_launcher(name: str) -> Launcher:
    """The launcher registered as ``name``; unknown names list the known ones."""
    try:
        return LAUNCHERS[name]()
    except KeyError:
        raise ParameterError("launcher", name, ", ".join(sorted(LAUNCHERS))) from None


__all__ = ["LAUNCHERS", "MODULES", "get_launcher"]
