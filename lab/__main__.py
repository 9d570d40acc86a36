"""``python -m lab``: the lab's command line; each subcommand lives beside what it runs."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# name -> module providing add_parser(subparsers) and main(args) -> int
SUBCOMMANDS = {
    "launch": "lab.cluster.cli",
    "notebooks": "lab.experiments.notebooks_cli",
    "profiles": "lab.cluster.profiles_cli",
    "bench": "lab.experiments.selfbench.cli",
    "report": "lab.experiments.report",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lab",
        description="distlab: launch ranks, run paper notebooks, benchmark the lab itself.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    # dest "subcommand": a subcommand's own arguments may be called "command" (launch's is)
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ImportError as e:  # a part that is not there yet must not break the rest
            sub.add_parser(name, help=f"(unavailable: {e})")
            continue
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:  # the PNG renderer's browser narrates every tab at INFO
        for chatty in ("kaleido", "choreographer"):
            logging.getLogger(chatty).setLevel(logging.WARNING)
    if not args.subcommand:
        parser.print_help()
        return 0
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.error(f"{args.subcommand} is unavailable in this installation")
    from lab.errors import LabError, RanksFailed

    try:
        return int(handler(args) or 0)
    except RanksFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except LabError as e:  # bad input, caught before anything started
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
