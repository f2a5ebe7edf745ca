"""`ctrnas prepare ...`: raw files or a synthetic profile -> a prepared dataset folder."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="turn raw Criteo/Avazu/KDD12/table files (or a synthetic profile) into Parquet shards + meta.json",
        description="Prepare a dataset folder: train/ val/ test/ Parquet shards plus meta.json.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    del kinds  # filled in by the readers (criteo, avazu, kdd2012, table, synthetic)
