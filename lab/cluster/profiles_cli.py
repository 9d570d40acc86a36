"""``python -m lab profiles``: list the cluster profiles in env/clusters/ and what they hold.

A profile that cannot be read is reported (on stderr, with why) and the listing goes on; the
exit status is then 1."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lab.errors import LabError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("profiles", help="list cluster profiles (env/clusters/*.yaml)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from lab.cluster.inventory import load_profile, profile_names

    invalid = 0
    for name in ["local", *profile_names()]:
        try:
            cluster = load_profile(name)
        except LabError as e:
            invalid += 1
            print(f"{name:16} invalid   {e}", file=sys.stderr, flush=True)
            continue
        kind = "emulated" if cluster.emulated else ("local" if cluster.is_local else "remote")
        kind = "slurm" if cluster.slurm is not None else kind
        print(
            f"{name:16} {kind:9} {len(cluster.hosts)} hosts, {cluster.slots} slots  "
            f"{cluster.description}".rstrip(),
            flush=True,
        )
    return 1 if invalid else 0
