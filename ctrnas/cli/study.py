"""`ctrnas study ranking`: proxy rank correlation against subnets trained from scratch."""

from __future__ import annotations

import argparse

from ctrnas.cli.common import add_recipe_args, floats, names


def _study_ranking(args) -> int:
    from ctrnas import api
    from ctrnas.recipe import check_output

    recipe = api.load_recipe(args.recipe, *args.overrides, device=args.device)
    check_output(recipe, args.recipe, args.overrides)  # a recipe file writes only under the working folder
    result = api.ranking_study(recipe, args.archs, args.fractions, args.proxies, progress=args.progress,
                               workers=args.workers)
    print(f"report: {result.output_dir / 'summary.md'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("study", help="studies: `study ranking` (proxy rank correlation vs trained models)")
    kinds = s.add_subparsers(dest="study", metavar="STUDY", required=True)
    r = kinds.add_parser("ranking", help="Kendall/Spearman of proxies vs from-scratch test log loss",
                         description="Train N random subnets from scratch, score each with the proxies after each "
                                     "warm-up fraction, report rank correlations with bootstrap intervals.")
    add_recipe_args(r, positional=False)
    r.add_argument("--archs", type=int, default=50, metavar="N", help="random subnets to train (default 50)")
    r.add_argument("--fractions", type=floats, default=[0.0, 0.01, 1.0], metavar="F,F,..",
                   help="warm-up fractions (default 0,0.01,1.0)")
    r.add_argument("--proxies", type=names, default=["sigeo", "zico", "params", "naswot", "synflow"],
                   metavar="P,P,..", help="proxy names (and 'oneshot' for inherited-weight val loss)")
    r.add_argument("--workers", type=int, default=1, metavar="N",
                   help="train the subnets in N processes, one torch thread each (default 1; same results)")
    r.set_defaults(func=_study_ranking)
