"""`ctrnas warmup`: the run's warm-up stage on its own (same seeded supernet, same checkpoint format)."""

from __future__ import annotations

import argparse

from ctrnas.cli.common import check_exist, check_prepared
from ctrnas.cli.train import train_args, train_config


def register(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser(
        "warmup", help="warm up a NASRec supernet on the first FRACTION of the training data (0 = zero-shot)",
        description="Train the weight-sharing supernet with NASRec sampling on the first --fraction of the "
                    "train split (0: no training, 0.01: SiGeo's 1%% warm-up, 1.0: one epoch, one-shot). The "
                    "full-supernet phase lasts --full-ratio of the warm-up steps (see ctrnas.train.warmup). "
                    "Writes the ctrnas-supernet/1 checkpoint `ctrnas run` writes; re-running reuses it.")
    train_args(w)
    w.add_argument("--space", default="nasrec-full",
                   help="nasrec-full, nasrec-small or a YAML file of space fields (default nasrec-full)")
    w.add_argument("--fraction", type=float, default=0.01, help="share of the train split (default 0.01)")
    w.add_argument("--full-ratio", type=float, default=0.2,
                   help="full-supernet probability decays to 0 over this share of the steps (default 0.2)")
    w.set_defaults(func=_run_warmup)


def _run_warmup(args) -> int:
    check_prepared(args.data)
    check_exist(args.recipe)
    from ctrnas import api

    warm = api.warmup_supernet(args.data, train_config(args), args.space, args.fraction, args.full_ratio, args.out,
                                overwrite=args.overwrite)
    s = warm.summary
    print(f"warm-up {args.fraction:g} of the train split: {s['steps']} steps, {s['rows']} rows "
          f"({s.get('full_supernet_steps', 0)} full-supernet steps) in {s['seconds']:.1f} s; "
          f"supernet: {warm.checkpoint}")
    return 0
