"""`ctrnas run RECIPE`: every stage of a recipe, and the report folder."""

from __future__ import annotations

import argparse

from ctrnas.cli.common import add_distributed_args, add_recipe_args, sharding_from_args


def _run(args) -> int:
    from ctrnas import api
    from ctrnas.recipe import check_output

    recipe = api.load_recipe(args.recipe, *args.overrides, device=args.device)
    check_output(recipe, args.recipe, args.overrides)  # a recipe file writes only under the working folder
    if args.distributed:  # under torchrun: every rank runs this; rank 0 alone gets a result and writes
        api.run(recipe, progress=args.progress, distributed=True, sharding=sharding_from_args(args),
                dist_backend=args.dist_backend)
    else:
        api.run(recipe, progress=args.progress)  # its last line names the report
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a recipe end to end: data, warm-up, search, retrain top-k, report",
                       description="Prepare data, warm up the supernet, search, train the top-k from scratch, "
                                   "export the best and write a report folder (see ctrnas.pipeline.report).")
    add_recipe_args(p, positional=True)
    # torchrun --nproc_per_node N -m ctrnas run RECIPE --distributed: the final stage's trainings sharded
    add_distributed_args(p)
    p.set_defaults(func=_run)
