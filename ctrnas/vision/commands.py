"""`ctrnas vision correlate ...` and `ctrnas vision search ...`: NB201 on CIFAR (heavy imports in handlers)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ctrnas.errors import RecipeError

DEFAULT_TABLE = "../shared/data/nb201/nb201_acc.csv"
DEFAULT_TRAIN = "../shared/data/cifar10/cifar10_train_first4000.npz"


def _floats(text: str, key: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise RecipeError("command line", key, f"expected comma-separated numbers, got {text!r}") from None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default=DEFAULT_TRAIN,
                   help="training images: a .npz (x uint8 NHWC, y), a cifar-10-batches-py or cifar-100-python folder")
    p.add_argument("--table", default=DEFAULT_TABLE, help="NB201 accuracy CSV (arch, cifar10_test, ...)")
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
    s.add_argument("--strategy", default="evolution", choices=["evolution", "random"])
    s.add_argument("--seeds", default="0,1,2", help="search seeds (comma-separated)")
    s.add_argument("--population", type=int, default=16)
    s.add_argument("--generations", type=int, default=10)
    s.add_argument("--tournament", type=int, default=4)
    s.add_argument("--children", type=int, default=4)
    s.add_argument("--scores-csv", default=None, help="correlation CSV(s), comma-separated, to pre-fill the score cache")
    s.set_defaults(func=_search)
    vision.set_defaults(func=lambda args: vision.print_help() or 2)


def _load(args):
    import torch

    from ctrnas.vision.cifar import NUM_CLASSES, read_cifar, to_tensor
    from ctrnas.vision.space import NB201Table

    if args.threads:
        torch.set_num_threads(args.threads)
    dataset = "cifar100" if args.truth == "cifar100" else "cifar10"
    x, y = to_tensor(read_cifar(args.data, "train", dataset), dataset)
    return x, y, NB201Table.load(args.table), NUM_CLASSES[dataset]


def _correlate(args) -> int:
    from ctrnas.device import resolve_device
    from ctrnas.vision.correlate import CorrelateConfig, format_markdown, plot_scatter, read_rows, summarize
    from ctrnas.vision.shards import run_sharded

    x, y, table, num_classes = _load(args)
    warmups = _floats(args.warmup, "warmup")
    cfg = CorrelateConfig(archs=args.archs, proxies=tuple(p for p in args.proxies.split(",") if p), warmup=warmups,
                          warmup_archs=args.warmup_archs, truth=args.truth, num_classes=num_classes,
                          batch_size=args.batch_size, k=args.k, seed=args.seed)
    out = Path(args.out)
    device = resolve_device(args.device)  # resolved once here, so a bad setting fails before any worker starts
    csv_path = run_sharded(cfg, x, y, table, out / "scores.csv", args.workers, str(device), args.time_limit,
                           threads=args.threads or 1)
    rows = read_rows(csv_path)
    summary = summarize(rows, table, list(cfg.proxies), list(warmups), args.truth, n_boot=args.n_boot, seed=args.seed)
    text = format_markdown(summary)
    (out / "summary.md").write_text(text + "\n")
    plot_scatter(rows, table, list(cfg.proxies), warmups[0], args.truth, out / "scatter.png")
    print(text)
    print(f"scores: {csv_path}; summary: {out / 'summary.md'}; plot: {out / 'scatter.png'}")
    return 0


def _search(args) -> int:
    from ctrnas.vision.search import ProxyFitness, cache_from_csv, run_search

    x, y, table, num_classes = _load(args)
    fitness = ProxyFitness(args.proxy, x, y, num_classes=num_classes, batch_size=args.batch_size, k=args.k,
                           seed=args.seed, device=args.device)
    cache = cache_from_csv(args.scores_csv.split(","), args.proxy) if args.scores_csv else None
    outcomes = []
    for s in (int(v) for v in _floats(args.seeds, "seeds")):
        o = run_search(fitness, table, strategy=args.strategy, seed=s, population=args.population,
                       generations=args.generations, tournament=args.tournament, children=args.children,
                       truth=args.truth, cache=cache)
        outcomes.append(o)
        print(f"seed {s}: chose {o.chosen} -> {o.chosen_accuracy:.2f}% (best {o.best_accuracy:.2f}%, "
              f"random choice {o.random_choice_accuracy:.2f}%; {o.scored} scored of {o.evaluations})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.json").write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    return 0
