"""Emulated clusters: one machine split into hosts with their own CPU share and shaped links.

Each host is a Linux network namespace with a veth pair onto a private bridge, a cgroup
CPU quota, and tc shaping on its link (both directions). ``prepare(cluster)`` creates them
and removes them afterwards; should the lab be killed, the cluster's keeper process
(lab.cluster.emulation.keeper) removes them within seconds;
``wrap_argv(host, argv)`` runs a command inside a host. ``prepare(cluster, sshd=True)``
(or ``emulated: {sshd: true}``) also starts an sshd in each host, for launchers such as
mpirun that start ranks over SSH; the cluster's ``extra["ssh_options"]`` then reach them by
address. Needs root, iproute2 and a cgroup cpu controller; ``missing()`` says which of them
is absent.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["cleanup_stale", "host_env", "missing", "prepare", "wrap_argv"]


def __getattr__(name: str) -> Any:
    """The public names, from lifecycle on first use: the keeper, which imports only the
    modules that remove a cluster, then starts without the ones that make one."""
    if name not in __all__:
        raise AttributeError(f"module 'lab.cluster.emulation' has no attribute {name!r}")
    return getattr(importlib.import_module("lab.cluster.emulation.lifecycle"), name)
