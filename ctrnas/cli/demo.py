"""`ctrnas demo`: recipes/synthetic.yaml end to end."""

from __future__ import annotations

import argparse

from ctrnas.cli.common import add_device_arg

DEMO_OUT = "runs/demo"  # what `make demo` writes and README's next commands read


def _demo(args) -> int:
    from ctrnas import api

    overrides = [f"output={args.out or DEMO_OUT}", *args.overrides]
    api.run(api.load_recipe(api.demo_recipe_path(), *overrides, device=args.device), progress=args.progress)
    return 0  # the run's last line names the report


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("demo", help="the demo: recipes/synthetic.yaml end to end (its time: README)",
                       description="Generate synthetic Criteo-shaped data with a known click model, warm up, "
                                   "search (evolution seeded with DLRM and DCN-v2, multi-fidelity short "
                                   "trainings), retrain the top-3 and the LR, DLRM and DCN-v2 baselines, and "
                                   "write a report.")
    d.add_argument("--out", metavar="DIR", help=f"results folder (default {DEMO_OUT})")
    d.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe value (repeatable)")
    d.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    add_device_arg(d)
    d.set_defaults(func=_demo)
