"""`ctrnas prepare ...`: raw files or a synthetic profile -> a prepared dataset folder."""

from __future__ import annotations

import argparse

from ctrnas.data.synthetic_profiles import STRUCTURES

FORMAT_HELP = {
    "criteo": "Criteo Kaggle train.txt / Terabyte day_N (label, I1-I13, C1-C26; tab-separated; .gz accepted)",
    "avazu": "Avazu Kaggle train CSV with header (id, click, hour, C1, ..., C21)",
    "kdd2012": "KDD Cup 2012 track 2 training.txt (12 tab-separated fields; label = Click > 0)",
    "table": "your own CSV (with header) or Parquet log; name the columns with --label/--dense/--sparse",
}


def _csv_list(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


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
            "on_error", "max_rejects", "rows_per_shard", "block_size", "limit", "progress", "avazu_hour",
            "avazu_drop_id", "avazu_pseudo_dense", "kdd_profile", "kdd_expand_impressions", "pad_missing_trailing",
            "hash_table_size"]
    out = {k: getattr(args, k, None) for k in keys}
    if args.kind == "table":
        table = {"label": args.label, "dense": args.dense, "sparse": args.sparse, "delimiter": args.delimiter}
        table = {k: v for k, v in table.items() if v is not None}
        out["table"] = table or None
    return out


def _run_prepare(args) -> int:
    from ctrnas import api

    print(api.prepare_folder(args.kind, args.input, args.out, args.config, _overrides(args), overwrite=args.overwrite))
    return 0


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
        help="turn raw Criteo/Avazu/KDD12/table files (or a synthetic profile) into Parquet shards + meta.json",
        description="Prepare a dataset folder: train/ val/ test/ Parquet shards plus meta.json. Raw files are "
        "streamed (bounded memory); see datasets/README.md for where to get them.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, text in FORMAT_HELP.items():
        k = kinds.add_parser(kind, help=text, description=text)
        _add_common(k)
        k.set_defaults(func=_run_prepare)
        if kind == "avazu":
            k.add_argument("--avazu-hour", choices=["raw", "split"],
                           help="raw: hour as one category (default); split: hour_of_day, weekday, is_weekend")
            k.add_argument("--drop-id", dest="avazu_drop_id", action="store_const", const=True,
                           help="drop the per-impression id column (BARS x4)")
            k.add_argument("--no-pseudo-dense", dest="avazu_pseudo_dense", action="store_const", const=False,
                           help="omit NASRec's constant dense feature dense_0")
        if kind == "kdd2012":
            k.add_argument("--profile", dest="kdd_profile", metavar="FILE",
                           help="userid_profile.txt to join (adds sparse Gender, Age)")
            k.add_argument("--expand-impressions", dest="kdd_expand_impressions", action="store_const", const=True,
                           help="one row per impression instead of label = Click > 0")
        if kind == "table":
            k.add_argument("--label", help="label column (0/1)")
            k.add_argument("--dense", type=_csv_list, metavar="A,B,..", help="dense (numeric) columns")
            k.add_argument("--sparse", type=_csv_list, metavar="A,B,..", help="categorical columns")
            k.add_argument("--delimiter", help="CSV delimiter (default ',')")
    s = kinds.add_parser("synthetic", help="generate a synthetic dataset with known click model (the demo default)",
                         description="Synthetic Criteo/Avazu/KDD12-shaped data from a hidden click model; "
                         "meta.json records the Bayes-optimal log loss.")
    s.add_argument("--profile", choices=["criteo", "avazu", "kdd2012"], default="criteo",
                   help="the shape: fields, cardinalities, counts and CTR of that dataset")
    s.add_argument("--structure", default="default", metavar="NAME",
                   help="how the click model mixes its components (datasets/README.md): "
                        f"{', '.join(STRUCTURES)} (default: default, the demo's)")
    s.add_argument("--rows", type=int, default=1_000_000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", "-o", required=True, metavar="DIR")
    s.add_argument("--rows-per-shard", type=int, default=1_000_000)
    s.add_argument("--overwrite", action="store_true", help="replace a folder generated with other settings")
    s.set_defaults(func=_run_synthetic)
