"""One small module per launcher, all behind lab.cluster.launchers.base.Launcher.

Every module in this folder is imported here, so a launcher registers itself with
``@register("name")`` and adding one is adding one file (CONTRIBUTING.md shows how).
"""

import importlib
import pkgutil

from lab.cluster.launchers.base import LAUNCHERS, get_launcher

MODULES = tuple(
    importlib.import_module(f"{__name__}.{m.name}")
    for m in pkgutil.iter_modules(__path__)
    if m.name != "base"
)

__all__ = ["LAUNCHERS", "MODULES", "get_launcher"]
