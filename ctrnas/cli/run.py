"""`ctrnas run`, `ctrnas compare` and `ctrnas study ranking`: thin wrappers over `ctrnas.api`."""

from __future__ import annotations

import argparse


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _add_recipe_args(p: argparse.ArgumentParser, positional: bool) -> None:
    if positional:
        p.add_argument("recipe", metavar="RECIPE", help="recipe YAML (see recipes/)")
    else:
        p.add_argument("--recipe", "-r", required=True, metavar="RECIPE", help="recipe YAML (see recipes/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe value, e.g. --set warmup.fraction=0.1 --set search.workers=2 "
                        "(repeatable; VALUE is read as YAML)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")


def _run(args) -> int:
    from ctrnas import api

    recipe = api.load_recipe(args.recipe, *args.overrides)
    if args.distributed:  # under torchrun: every rank runs this; rank 0 alone gets a result and writes
        result = api.run(recipe, progress=args.progress, distributed=True,
                         sharding=None if args.sharding == "auto" else args.sharding,
                         dist_backend=args.dist_backend)
    else:
        result = api.run(recipe, progress=args.progress)
    if result is not None:
        print(f"report: {result.output_dir / 'summary.md'}")
    return 0


def _compare(args) -> int:
    from ctrnas import api

    recipe = api.load_recipe(args.recipe, *args.overrides)
    result = api.compare(recipe, args.fractions, progress=args.progress)
    print(f"table: {result.output_dir / 'compare.md'}")
    return 0


def _study_ranking(args) -> int:
    from ctrnas import api

    recipe = api.load_recipe(args.recipe, *args.overrides)
    result = api.ranking_study(recipe, args.archs, args.fractions, args.proxies, progress=args.progress,
                                workers=args.workers)
    print(f"report: {result.output_dir / 'summary.md'}")
    return 0


def demo_recipe_path():
    """recipes/synthetic.yaml of the source checkout (or of the current directory)."""
    from pathlib import Path

    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (root / "recipes" / "synthetic.yaml").is_file():
            return root / "recipes" / "synthetic.yaml"
    from ctrnas.errors import CtrnasError

    raise CtrnasError("recipes/synthetic.yaml not found: run `ctrnas demo` from the ctrnas checkout, or "
                      "`ctrnas run RECIPE` with a recipe of your own")


def _demo(args) -> int:
    from ctrnas import api

    overrides = ([f"output={args.out}"] if args.out else []) + args.overrides
    result = api.run(api.load_recipe(demo_recipe_path(), *overrides), progress=args.progress)
    print(f"report: {result.output_dir / 'summary.md'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("demo", help="the demo: recipes/synthetic.yaml end to end (~15 min on 2 cores)",
                       description="Generate synthetic Criteo-shaped data with a known click model, warm up, "
                                   "search with SiGeo, retrain the top-5 and baselines, and write a report.")
    d.add_argument("--out", metavar="DIR", help="results folder (default runs/synthetic)")
    d.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe value (repeatable)")
    d.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    d.set_defaults(func=_demo)

    p = sub.add_parser("run", help="run a recipe end to end: data, warm-up, search, retrain top-k, report",
                       description="Prepare data, warm up the supernet, search, train the top-k from scratch, "
                                   "export the best and write a report folder (see ctrnas.pipeline.report).")
    _add_recipe_args(p, positional=True)
    from ctrnas.distributed.commands import add_distributed_args

    # torchrun --nproc_per_node N -m ctrnas run RECIPE --distributed: the final stage's trainings sharded
    add_distributed_args(p)
    p.set_defaults(func=_run)

    c = sub.add_parser("compare", help="zero-shot / sub-one-shot / one-shot side by side on the same data",
                       description="Run the recipe at several warm-up fractions (default 0, 0.01, 1.0; 1.0 uses "
                                   "inherited-weight evaluation) and print test log loss, AUC and time per stage.")
    _add_recipe_args(c, positional=False)
    c.add_argument("--fractions", type=_floats, default=[0.0, 0.01, 1.0], metavar="F,F,..",
                   help="warm-up fractions (default 0,0.01,1.0)")
    c.set_defaults(func=_compare)

    s = sub.add_parser("study", help="studies: `study ranking` (proxy rank correlation vs trained models)")
    kinds = s.add_subparsers(dest="study", metavar="STUDY", required=True)
    r = kinds.add_parser("ranking", help="Kendall/Spearman of proxies vs from-scratch test log loss",
                         description="Train N random subnets from scratch, score each with the proxies after each "
                                     "warm-up fraction, report rank correlations with bootstrap intervals.")
    _add_recipe_args(r, positional=False)
    r.add_argument("--archs", type=int, default=50, metavar="N", help="random subnets to train (default 50)")
    r.add_argument("--fractions", type=_floats, default=[0.0, 0.01, 1.0], metavar="F,F,..",
                   help="warm-up fractions (default 0,0.01,1.0)")
    r.add_argument("--proxies", type=_names, default=["sigeo", "zico", "params", "naswot", "synflow"],
                   metavar="P,P,..", help="proxy names (and 'oneshot' for inherited-weight val loss)")
    r.add_argument("--workers", type=int, default=1, metavar="N",
                   help="train the subnets in N processes, one torch thread each (default 1; same results)")
    r.set_defaults(func=_study_ranking)
