"""`ctrnas score`: score one architecture with training-free proxies and print values and terms."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score one architecture with training-free proxies (SiGeo, ZiCo, ...)",
        description="Score one NASRec architecture as the search scores it: the exported subnet of a supernet "
        "(a warmed-up checkpoint, or a fresh one for zero-shot) on the k training batches right after the "
        "warm-up rows, SiGeo's preset following the warm-up. Prints each proxy's value (higher is better) and "
        "its separate terms.",
    )
    p.add_argument("--data", metavar="DIR", help="prepared dataset folder (required unless --list)")
    p.add_argument("--arch", metavar="FILE", help="architecture JSON file (required unless --list)")
    p.add_argument("--proxies", default="sigeo,zico", metavar="LIST",
                   help="comma-separated proxy names (see --list); default sigeo,zico")
    p.add_argument("--supernet", metavar="CKPT", help="warmed-up supernet checkpoint (default: a fresh supernet)")
    p.add_argument("--space", default="nasrec-full",
                   help="space name or YAML, for a fresh supernet or an old bare state_dict checkpoint")
    p.add_argument("--emb-dim", type=int, default=None,
                   help="embedding dim, for a fresh supernet or an old bare state_dict checkpoint")
    p.add_argument("--seed", type=int, default=0,
                   help="the candidate's seed: fresh weights (zero-shot) and stochastic proxies (default 0)")
    p.add_argument("--batches", type=int, default=4, metavar="K", help="number of batches (default 4, SiGeo's k)")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--offset", type=int, default=None,
                   help="first training row to use (default: right after the rows the supernet was warmed up on, "
                        "as in the search, so no proxy batch was seen in training)")
    p.add_argument("--set", action="append", default=[], metavar="PROXY.OPTION=VALUE",
                   help="a proxy option, e.g. sigeo.preset=warmup_recsys (repeatable; values parsed as YAML)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--device", default="cpu",
                   help="cpu | cuda | cuda:N | auto: where the subnet is scored (default cpu, as the search's "
                        "scoring workers)")
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
    from ctrnas import api
    from ctrnas.errors import CtrnasError

    if args.list:
        print("\n".join(api.list_proxies()))
        return 0
    if not args.data or not args.arch:
        raise CtrnasError("--data and --arch are required (or use --list)")
    names = [n.strip() for n in args.proxies.split(",") if n.strip()]
    results = api.score_arch(args.data, args.arch, names, parse_options(args.set, names), supernet=args.supernet,
                             space=args.space, emb_dim=args.emb_dim, seed=args.seed, batches=args.batches,
                             batch_size=args.batch_size, offset=args.offset, json_path=args.json,
                             device=args.device)
    print(format_table(results))
    print("higher is better for every proxy (the search keeps the highest; a proxy that minimises a quantity "
          "reports its negative)")
    return 0
