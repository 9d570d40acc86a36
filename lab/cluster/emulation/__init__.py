"""Emulated clusters: one machine split into hosts with their own CPU share and shaped links.

Each host is a Linux network namespace with a veth pair onto a private bridge, a cgroup
CPU quota, and tc shaping on its link (both directions). ``prepare(cluster)`` creates them
and removes them afterwards (and removes what a killed run left behind);
``wrap_argv(host, argv)`` runs a command inside a host. ``prepare(cluster, sshd=True)``
(or ``emulated: {sshd: true}``) also starts an sshd in each host, for launchers such as
mpirun that start ranks over SSH; the cluster's ``extra["ssh_options"]`` then reach them by
address. Needs root, iproute2 and a cgroup cpu controller; ``missing()`` says which of them
is absent.
"""

from lab.cluster.emulation.lifecycle import cleanup_stale, host_env, missing, prepare, wrap_argv

__all__ = ["cleanup_stale", "host_env", "missing", "prepare", "wrap_argv"]
