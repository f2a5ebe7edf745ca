"""`ctrnas prepare ...`: raw files or a synthetic profile -> a prepared dataset folder."""

from __future__ import annotations

import argparse

from ctrnas.data.readers.formats import csv_list as _csv_list, format_names, get_format
from ctrnas.data.synthetic_profiles import structure_names


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", "-i", nargs="+", required=True, metavar="PATH", help="raw input file(s), read in order")
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="output dataset folder")
    p.add_argument("--config", metavar="FILE",
                   help="YAML with PrepareConfig fields (or a recipe whose `data:` section has them); flags override")
    g = p.add_argument_group("transforms")
    g.add_argument("--dense-transform", choices=["log1p", "log_square", "none"],
                   help="log1p: ln(max(x,0)+1) (NASRec, default); log_square: floor(ln(x)^2) for x>2 (AutoCTR/BARS)")
    g.add_argument("--sparse-encoding", choices=["hash", "vocab"],
                   help="hash: 1 + key mod (buckets-1) (NASRec, default); vocab: min-count vocabulary with an OOV id")
    g.add_argument("--hash-buckets", type=int, metavar="N", help="per-field cap of hashed ids (default 1000000)")
    g.add_argument("--min-count", type=int, metavar="N", help="vocab: keep values seen >= N times (default 10)")
    g.add_argument("--hash-table-size", choices=["data", "buckets"],
                   help="data: a hashed field with fewer distinct ids than buckets gets a table of that size "
                        "(default); buckets: every table has --hash-buckets rows")
    g = p.add_argument_group("split")
    g.add_argument("--split", choices=["stratified", "random", "order"],
                   help="stratified: StratifiedKFold(10, shuffle, seed) folds 0-7/8/9 (default); random; "
                        "order: by file order/time")
    g.add_argument("--split-ratios", type=lambda s: [float(x) for x in _csv_list(s)], metavar="TR,VA,TE",
                   help="default 0.8,0.1,0.1 (tenths for stratified)")
    g.add_argument("--seed", type=int, help="split seed (default 2018, the AutoCTR/NASRec split)")
    g = p.add_argument_group("input handling")
    g.add_argument("--on-error", choices=["raise", "skip"],
                   help="raise (default): stop at the first malformed row naming file, line, field; "
                        "skip: count rejects per reason and keep the first ones in rejects.tsv")
    g.add_argument("--max-rejects", type=int, metavar="N", help="rows kept in rejects.tsv (default 1000)")
    g.add_argument("--rows-per-shard", type=int, metavar="N", help="rows per Parquet shard (default 1000000)")
    g.add_argument("--block-size", type=int, metavar="BYTES", help="raw bytes parsed per chunk (default 16 MiB)")
    g.add_argument("--limit", type=int, metavar="N", help="stop after N accepted rows")
    g.add_argument("--pad-missing-trailing", action="store_const", const=True,
                   help="read a row with too few fields as if its missing trailing fields were empty (some public "
                        "Criteo samples strip them); counted in meta.json rows.padded")
    g.add_argument("--overwrite", action="store_true",
                   help="replace a folder prepared from other inputs/settings; files ctrnas did not write are kept")
    g.add_argument("--no-progress", dest="progress", action="store_const", const=False, help="no progress bar")


def _overrides(args) -> dict:
    keys = ["dense_transform", "sparse_encoding", "hash_buckets", "min_count", "split", "split_ratios", "seed",
            "on_error", "max_rejects", "rows_per_shard", "block_size", "limit", "progress", "pad_missing_trailing",
            "hash_table_size"]
    out = {k: getattr(args, k, None) for k in keys}
    sections: dict[str, dict] = {}  # a format's options into a nested section ("table.label": table: {label})
    for o in get_format(args.kind).options:
        value = getattr(args, o.dest.replace(".", "__"), None)
        if "." in o.dest:
            section, key = o.dest.split(".", 1)
            sections.setdefault(section, {})
            if value is not None:
                sections[section][key] = value
        else:
            out[o.dest] = value
    out.update({k: v or None for k, v in sections.items()})
    return out


def _run_prepare(args) -> int:
    from ctrnas import api
    from ctrnas.errors import RecipeError

    try:
        summary = api.prepare_folder(args.kind, args.input, args.out, args.config, _overrides(args),
                                     overwrite=args.overwrite)
    except RecipeError as e:
        raise _naming_the_flag(e, args.kind) from None
    print(summary)
    return 0


def _naming_the_flag(e, kind: str):
    """A required setting left out, said as the flag that gives it (`--label COLUMN`), not as a config key."""
    from ctrnas.errors import CtrnasError

    option = next((o for o in get_format(kind).options if o.dest == e.key), None)
    if option is None or not e.reason.startswith("missing required key"):
        return e
    metavar = option.kwargs.get("metavar", option.dest.rsplit(".", 1)[-1].upper())
    return CtrnasError(f"prepare {kind} needs {option.flags[0]} {metavar} ({option.help}; "
                       f"or {e.key} in a --config file)")


def _run_synthetic(args) -> int:
    from ctrnas import api

    meta = api.generate_synthetic(args.profile, args.rows, args.seed, args.out, args.rows_per_shard,
                                  overwrite=args.overwrite, structure=args.structure)
    splits = meta.get("splits", {})
    rows = ", ".join(f"{s} {splits[s].get('rows', 0):,}" for s in ("train", "val", "test") if s in splits)
    what = args.profile if args.structure == "default" else f"{args.profile} ({args.structure} structure)"
    print(f"Generated synthetic {what} data (seed {args.seed}) into {args.out}: {rows} rows.")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="turn raw Criteo/Avazu/KDD12/libfm/table files (or a synthetic profile) into Parquet shards + meta.json",
        description="Prepare a dataset folder: train/ val/ test/ Parquet shards plus meta.json. Raw files are "
        "streamed (bounded memory); see datasets/README.md for where to get them.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind in format_names():
        fmt = get_format(kind)
        k = kinds.add_parser(kind, help=fmt.help, description=fmt.help)
        _add_common(k)
        k.set_defaults(func=_run_prepare)
        for o in fmt.options:
            extra = {} if "." not in o.dest else {"metavar": o.dest.rsplit(".", 1)[1].upper()}
            k.add_argument(*o.flags, dest=o.dest.replace(".", "__"), help=o.help, **{**extra, **o.kwargs})
    s = kinds.add_parser("synthetic", help="generate a synthetic dataset with known click model (the demo default)",
                         description="Synthetic Criteo/Avazu/KDD12-shaped data from a hidden click model; "
                         "meta.json records the Bayes-optimal log loss.")
    s.add_argument("--profile", choices=["criteo", "avazu", "kdd2012"], default="criteo",
                   help="the shape: fields, cardinalities, counts and CTR of that dataset")
    s.add_argument("--structure", default="default", metavar="NAME",
                   help="how the click model mixes its components (datasets/README.md): "
                        f"{structure_names()} (default: default, the demo's)")
    s.add_argument("--rows", type=int, default=1_000_000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", "-o", required=True, metavar="DIR")
    s.add_argument("--rows-per-shard", type=int, default=1_000_000)
    s.add_argument("--overwrite", action="store_true", help="replace a folder generated with other settings")
    s.set_defaults(func=_run_synthetic)
