"""`ctrnas vision correlate ...` and `ctrnas vision search ...`: NB201 on CIFAR (heavy imports in handlers)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ctrnas.errors import RecipeError
from ctrnas.search.strategies import strategy_names

# the table shipped in the package (ctrnas.vision.space.SHIPPED_TABLE, not imported here: the CLI starts fast)
DEFAULT_TABLE = str(Path(__file__).resolve().parents[1] / "vision" / "data" / "nb201_acc.csv")


def _floats(text: str, key: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise RecipeError("command line", key, f"expected comma-separated numbers, got {text!r}") from None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, metavar="DIR",
                   help="training images: the CIFAR-10 python release folder cifar-10-batches-py (docs/vision.md: "
                        "download step; it is pickled, so give only a copy you downloaded yourself), a "
                        "cifar-100-python folder, or a .npz (x uint8 NHWC, y)")
    p.add_argument("--table", default=DEFAULT_TABLE,
                   help="NB201 accuracy CSV (default: the table shipped with ctrnas, ctrnas/vision/data/README.md)")
    p.add_argument("--truth", default="cifar10", choices=["cifar10", "cifar100", "imagenet16", "cifar10_valid"])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--k", type=int, default=4, help="number of proxy batches (SiGeo Remark 2: 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (1 is fastest on shared cores)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (auto: CUDA when torch sees one)")
    p.add_argument("--out", default="runs/vision", help="output folder")


def register(sub) -> None:
    vision = sub.add_parser("vision", help="NAS-Bench-201 on CIFAR: proxy correlation and proxy-driven search")
    vsub = vision.add_subparsers(dest="vision_command", metavar="ACTION")

    c = vsub.add_parser("correlate", help="rank correlation of proxies with NB201 test accuracy (resumable)")
    _common(c)
    c.add_argument("--archs", type=int, default=300, help="number of sampled cells")
    c.add_argument("--proxies", default="sigeo,zico,synflow,nwot,params")
    c.add_argument("--warmup", default="0", help="warm-up fractions of the training images, e.g. 0,0.1")
    c.add_argument("--warmup-archs", type=int, default=None, help="cells (spread evenly) that get the warm-up levels")
    c.add_argument("--n-boot", type=int, default=1000)
    c.add_argument("--workers", type=int, default=1, help="processes sharing the device (each scores every n-th cell)")
    c.add_argument("--time-limit", type=float, default=None, help="seconds after which no new cell is started")
    c.set_defaults(func=_correlate)

    s = vsub.add_parser("search", help="evolution / random search in NB201 with a proxy as fitness")
    _common(s)
    s.add_argument("--proxy", default="sigeo")
    s.add_argument("--strategy", default="evolution", choices=strategy_names(by_rungs=False))
    s.add_argument("--seeds", default="0,1,2", help="search seeds (comma-separated)")
    s.add_argument("--population", type=int, default=16)
    s.add_argument("--generations", type=int, default=10)
    s.add_argument("--tournament", type=int, default=4)
    s.add_argument("--children", type=int, default=4)
    s.add_argument("--scores-csv", default=None, help="correlation CSV(s), comma-separated, to pre-fill the score cache")
    s.set_defaults(func=_search)
    vision.set_defaults(func=lambda args: vision.print_help() or 2)


def _correlate(args) -> int:
    from ctrnas.cli.common import check_exist

    check_exist(args.data, args.table)  # before torch is imported
    from ctrnas import api

    out = api.vision_correlate(data=args.data, table_path=args.table, out=args.out, archs=args.archs,
                               proxies=tuple(p for p in args.proxies.split(",") if p),
                               warmup=_floats(args.warmup, "warmup"), warmup_archs=args.warmup_archs,
                               truth=args.truth, batch_size=args.batch_size, k=args.k, seed=args.seed,
                               n_boot=args.n_boot, threads=args.threads,
                               device=args.device, workers=args.workers, time_limit=args.time_limit)
    print(out["text"])
    print(f"scores: {out['scores']}; summary: {out['summary']}; plot: {out['plot']}")
    return 0


def _search(args) -> int:
    from ctrnas.cli.common import check_exist

    check_exist(args.data, args.table)
    from ctrnas import api

    def report(s, o):
        print(f"seed {s}: chose {o.chosen} -> {o.chosen_accuracy:.2f}% (best {o.best_accuracy:.2f}%, "
              f"random choice {o.random_choice_accuracy:.2f}%; {o.scored} scored of {o.evaluations})")

    api.vision_search(data=args.data, table_path=args.table, out=args.out, proxy=args.proxy, strategy=args.strategy,
                      seeds=[int(v) for v in _floats(args.seeds, "seeds")], population=args.population,
                      generations=args.generations, tournament=args.tournament, children=args.children,
                      truth=args.truth, batch_size=args.batch_size, k=args.k, seed=args.seed,
                      scores_csv=args.scores_csv.split(",") if args.scores_csv else None, threads=args.threads,
                      report=report, device=args.device)
    return 0
