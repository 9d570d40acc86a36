"""``python -m lab profiles``: list the cluster profiles in env/clusters/ and what they hold."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("profiles", help="list cluster profiles (env/clusters/*.yaml)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from lab.cluster.inventory import load_profile, profile_names

    for name in ["local", *profile_names()]:
        cluster = load_profile(name)
        kind = "emulated" if cluster.emulated else ("local" if cluster.is_local else "remote")
        print(
            f"{name:16} {kind:9} {len(cluster.hosts)} hosts, {cluster.slots} slots  "
            f"{cluster.description}".rstrip()
        )
    return 0
