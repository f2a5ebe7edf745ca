"""`ctrnas score`: score one architecture with training-free proxies and print values and terms."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score one architecture with training-free proxies (SiGeo, ZiCo, ...)",
        description="Score one NASRec architecture, as a path through a supernet (a warmed-up checkpoint, or a "
        "fresh one for zero-shot), on the first k training batches. Prints each proxy's value (higher is "
        "better) and its separate terms.",
    )
    p.add_argument("--data", metavar="DIR", help="prepared dataset folder (required unless --list)")
    p.add_argument("--arch", metavar="FILE", help="architecture JSON file (required unless --list)")
    p.add_argument("--proxies", default="sigeo,zico", metavar="LIST",
                   help="comma-separated proxy names (see --list); default sigeo,zico")
    p.add_argument("--supernet", metavar="CKPT", help="warmed-up supernet checkpoint (default: a fresh supernet)")
    p.add_argument("--space", default="nasrec-full", help="space name or YAML, for a fresh supernet")
    p.add_argument("--emb-dim", type=int, default=None, help="embedding dim, for a fresh supernet")
    p.add_argument("--seed", type=int, default=0, help="initialisation seed of a fresh supernet")
    p.add_argument("--batches", type=int, default=4, metavar="K", help="number of batches (default 4, SiGeo's k)")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--offset", type=int, default=0,
                   help="first training row to use (put it after the warm-up rows, spec A9)")
    p.add_argument("--set", action="append", default=[], metavar="PROXY.OPTION=VALUE",
                   help="a proxy option, e.g. sigeo.preset=warmup_recsys (repeatable; values parsed as YAML)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--list", action="store_true", help="list the proxy names and exit")
    p.set_defaults(func=_run)


def parse_options(items: list[str], names: list[str]) -> dict[str, dict]:
    """`proxy.option=value` strings -> {proxy: {option: value}} (values parsed as YAML scalars)."""
    import yaml

    from ctrnas.errors import RecipeError

    out: dict[str, dict] = {n: {} for n in names}
    for item in items:
        key, sep, raw = item.partition("=")
        proxy, dot, option = key.partition(".")
        if not sep or not dot or not option:
            raise RecipeError("--set", item, "expected PROXY.OPTION=VALUE")
        if proxy not in out:
            raise RecipeError("--set", item, f"proxy '{proxy}' is not in --proxies")
        out[proxy][option] = yaml.safe_load(raw)
    return out


def format_table(results: dict) -> str:
    """Plain-text table: proxy, value, seconds, terms."""
    rows = [("proxy", "value", "time_s", "terms")]
    for name, r in results.items():
        terms = ", ".join(f"{k}={v:.6g}" for k, v in r.terms.items())
        rows.append((name, f"{r.value:.6g}", f"{r.meta['time_s']:.2f}", terms))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{a:<{widths[0]}}  {b:>{widths[1]}}  {c:>{widths[2]}}  {d}" for a, b, c, d in rows)


def _run(args) -> int:
    if args.list:
        from ctrnas.proxies import list_proxies

        print("\n".join(list_proxies()))
        return 0
    import torch
    import torch.nn.functional as F

    from ctrnas.data.loader import CtrBatchLoader
    from ctrnas.errors import ArchValidationError, CtrnasError
    from ctrnas.proxies import get_proxy
    from ctrnas.space import Arch

    if not args.data or not args.arch:
        raise CtrnasError("--data and --arch are required (or use --list)")
    names = [n.strip() for n in args.proxies.split(",") if n.strip()]
    options = parse_options(args.set, names)
    proxies = {n: get_proxy(n, **options[n]) for n in names}   # validates names and options before any work
    try:
        with open(args.arch) as f:
            arch = Arch.from_json(json.load(f))
    except OSError as e:
        raise CtrnasError(f"{args.arch}: cannot read architecture: {e.strerror}") from None
    except (json.JSONDecodeError, ArchValidationError) as e:
        raise CtrnasError(f"{args.arch}: {e}") from None
    if args.supernet:
        from ctrnas.supernet.io import load_supernet

        supernet, _ = load_supernet(args.supernet)
    else:
        from ctrnas.data.dataset import load_schema
        from ctrnas.supernet.commands import _space_arg
        from ctrnas.supernet.supernet import Supernet

        with torch.random.fork_rng():   # a seeded fresh init without touching the caller's RNG
            torch.manual_seed(args.seed)
            supernet = Supernet(load_schema(args.data), _space_arg(args.space), emb_dim=args.emb_dim)
    try:
        supernet.space.validate(arch)
    except ArchValidationError as e:
        raise CtrnasError(f"{args.arch}: {e}") from None
    loader = CtrBatchLoader(args.data, "train", args.batch_size, offset=args.offset, drop_last=True)
    batches = []
    for b in loader:
        batches.append(((b.dense_features, b.sparse_features), b.labels))
        if len(batches) == args.batches:
            break
    if len(batches) < args.batches:
        raise CtrnasError(f"{args.data}: only {len(batches)} full batches of {args.batch_size} training rows "
                          f"after offset {args.offset}; need {args.batches}")
    model = supernet.subnet(arch)
    results = {n: p.score(model, batches, F.binary_cross_entropy_with_logits) for n, p in proxies.items()}
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({n: {"value": r.value, "terms": r.terms, "time_s": r.meta["time_s"],
                           "options": r.meta["options"]} for n, r in results.items()}, f, indent=1)
    return 0
