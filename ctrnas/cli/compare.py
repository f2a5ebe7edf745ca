"""`ctrnas compare`: zero-shot / sub-one-shot / one-shot side by side on the same data."""

from __future__ import annotations

import argparse

from ctrnas.cli.common import add_recipe_args, floats


def _compare(args) -> int:
    from ctrnas import api
    from ctrnas.recipe import check_output

    recipe = api.load_recipe(args.recipe, *args.overrides, device=args.device)
    check_output(recipe, args.recipe, args.overrides)  # a recipe file writes only under the working folder
    result = api.compare(recipe, args.fractions, progress=args.progress, multifidelity=args.multifidelity,
                         random=args.random)
    print(f"table: {result.output_dir / 'compare.md'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compare", help="zero-shot / sub-one-shot / one-shot side by side on the same data",
                       description="Run the recipe at several warm-up fractions (default 0, 0.01, 1.0; 1.0 uses "
                                   "inherited-weight evaluation) and print test log loss, AUC and time per stage.")
    add_recipe_args(c, positional=False)
    c.add_argument("--fractions", type=floats, default=[0.0, 0.01, 1.0], metavar="F,F,..",
                   help="warm-up fractions (default 0,0.01,1.0)")
    c.add_argument("--multifidelity", action="store_true",
                   help="add the multi-fidelity search (search.strategy=multifidelity) as another setting")
    c.add_argument("--random", action="store_true",
                   help="add random search at the FTE of the costliest setting: that many random archs retrained "
                        "(the control a search must beat at equal compute)")
    c.set_defaults(func=_compare)
