"""Join an emulated host's cgroup, then exec a command (stdlib only; started with ``-I``).

    python -I enter.py --cgroup DIR [--cgroup DIR ...] [--env K=V ...] -- ip netns exec NS argv...

The process joins the cgroups (a host's cpu group and, on cgroup v1, its cpuacct twin)
*before* it execs, so the rank and all its children are
held to the host's CPU share. The cgroup is joined outside the namespace because
``ip netns exec`` remounts /sys, hiding the cgroup tree. ``--env`` values are defaults:
variables already set win.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        sys.exit("usage: enter.py --cgroup DIR [--env K=V ...] -- COMMAND...")
    cut = args.index("--")
    opts, command = args[:cut], args[cut + 1 :]
    cgroups, env = [], {}
    i = 0
    while i < len(opts):
        if opts[i] == "--cgroup" and i + 1 < len(opts):
            cgroups.append(opts[i + 1])
        elif opts[i] == "--env" and i + 1 < len(opts) and "=" in opts[i + 1]:
            key, _, value = opts[i + 1].partition("=")
            env[key] = value
        else:
            sys.exit(f"enter.py: unexpected argument {opts[i]!r}")
        i += 2
    if not command:
        sys.exit("enter.py: no command after --")
    for cgroup in cgroups:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    for key, value in env.items():
        os.environ.setdefault(key, value)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.exit(f"enter.py: cannot run {command[0]!r}: {e}")


if __name__ == "__main__":
    main()
