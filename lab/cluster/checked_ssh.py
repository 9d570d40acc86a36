"""An ``ssh`` that keeps host keys checked, for engines that run their own ssh with checking
turned off (horovodrun: ``ssh -o StrictHostKeyChecking=no HOST ...``, hard-coded).

Standalone and stdlib-only: a per-run ``ssh`` script (lab.cluster.host_keys.write_ssh_wrapper),
put first on the engine's PATH, runs it as::

    checked_ssh.py SSH N OPT1 ... OPTN ARGS...

It drops the options in ARGS that would weaken host-key checking (``StrictHostKeyChecking``,
``UserKnownHostsFile``, ``GlobalKnownHostsFile``) and execs ``SSH OPT1..OPTN ARGS``: the
lab's options (user, port and known_hosts through ``-F``, ``StrictHostKeyChecking=yes``)
come first, and ssh keeps the first value it sees for each setting.
"""

from __future__ import annotations

import os
import sys

DROPPED = ("stricthostkeychecking", "userknownhostsfile", "globalknownhostsfile")
# ssh's one-letter options that take an argument (ssh(1), OpenSSH 9)
WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")


def _dropped(setting: str) -> bool:
    name = setting.replace("=", " ").strip().split(" ")[0].lower()
    return name in DROPPED


def filtered(args: list[str]) -> list[str]:
    """``args`` without the ``-o`` options that weaken host-key checking. Options are read
    as ssh reads them: before the destination and again right after it, up to the command."""
    out: list[str] = []
    i, seen_host = 0, False
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("-") or len(arg) < 2:
            if seen_host or arg == "--":
                return out + args[i:]
            seen_host = True
            out.append(arg)
            i += 1
            continue
        if arg.startswith("-o"):
            value = arg[2:] if len(arg) > 2 else (args[i + 1] if i + 1 < len(args) else "")
            step = 1 if len(arg) > 2 else 2
            if not _dropped(value):
                out += args[i : i + step]
            i += step
            continue
        step = 1
        for j, letter in enumerate(arg[1:], start=1):
            if letter in WITH_ARG:
                step = 1 if j + 1 < len(arg) else 2
                break
        out += args[i : i + step]
        i += step
    return out


def main(argv: list[str]) -> int:
    ssh, count = argv[0], int(argv[1])
    first, rest = argv[2 : 2 + count], argv[2 + count :]
    os.execv(ssh, [ssh, *first, *filtered(rest)])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
