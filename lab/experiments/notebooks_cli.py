"""``python -m lab notebooks``: the command line over lab.experiments.notebooks.

It turns ``--only``/``--scale``/``--cluster``/``-p``/``-y`` into one call of
``run_notebooks`` (or ``rehearse`` with ``--rehearse``), prints the summary table and
rewrites the report; the runner itself stays a Python API that the tests call.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from lab.errors import ParameterError
from lab.experiments.notebook_parameters import parse_parameters
from lab.experiments.notebooks import (
    DEFAULT_TIMEOUT_S,
    NOTEBOOK_DIR,
    SCALES,
    discover,
    rehearse,
    run_notebooks,
    summary_table,
)
from lab.experiments.rehearsing import DEFAULT_TIMEOUT_S as REHEARSAL_TIMEOUT_S


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "notebooks",
        help="execute notebooks with papermill into results/notebooks/",
        description="Execute every notebook (or those matching --only) at the given scale.",
    )
    p.add_argument("--scale", choices=SCALES, default=None, help="default: smoke")
    p.add_argument(
        "--rehearse",
        action="store_true",
        help="paper scale on this machine's rehearsal cluster, cut to a step budget "
        "(lab.experiments.rehearsing); kept under results/rehearsals/, never a verdict",
    )
    p.add_argument(
        "--lanes",
        type=int,
        default=1,
        help="with --rehearse: notebooks rehearsed at once (default 1; make rehearse: 2)",
    )
    p.add_argument(
        "--cluster", default=None, help="cluster profile name or path (default: each notebook's)"
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="run only notebooks whose path under notebooks/ matches (repeatable)",
    )
    p.add_argument(
        "--timeout", type=float, default=None, help="seconds allowed per cell (default 900)"
    )
    p.add_argument("--out", type=Path, default=None, help="where executed notebooks go")
    p.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a parameter (VALUE read as YAML: 4, [1, 2], ResNet50); repeatable",
    )
    p.add_argument("-y", "--yaml", default=None, help="parameters as a YAML mapping")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    paths = discover(NOTEBOOK_DIR, args.only)
    if not paths:
        print(f"no notebooks match {args.only or '*'} under {NOTEBOOK_DIR}")
        return 1
    parameters = parse_parameters(args.parameter, args.yaml)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    logging.getLogger("papermill").setLevel(logging.WARNING)  # the bar says which one runs
    if args.lanes != 1 and not args.rehearse:
        raise ParameterError("lanes", args.lanes, "1 (lanes are for --rehearse)")
    if args.rehearse:
        if args.scale == "smoke" or args.out is not None:
            raise ParameterError("rehearse", "with --scale smoke or --out", "--scale paper")
        timeout = args.timeout or REHEARSAL_TIMEOUT_S
        results = rehearse(
            paths, args.cluster, timeout=timeout, parameters=parameters, lanes=args.lanes
        )
    else:
        results = run_notebooks(
            paths,
            out_dir=args.out,
            scale=args.scale or "smoke",
            cluster=args.cluster,
            timeout=args.timeout or DEFAULT_TIMEOUT_S,
            parameters=parameters,
        )
    print(summary_table(results))
    from lab.experiments.report import write_report

    print(f"report: {write_report()}")
    return 0 if all(r.ok for r in results) else 1
