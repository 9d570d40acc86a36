"""P3 (SysML'19) on torch: a synchronous parameter server whose schedules
(``baseline``, ``slicing``, ``p3``) differ only in how parameters travel.

Modules: ``schedule`` (pure: keys, placement, queue order), ``models``, ``config``
(checked settings and the rank command), ``transport`` (messages over TCP), ``ps`` (worker and
server roles), ``run`` (the rank program).
"""

from lab.bench.p3.config import P3Config as Config  # what lab.bench.flags checks a command with

__all__ = ["Config"]
