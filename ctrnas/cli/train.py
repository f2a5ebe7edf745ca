"""`ctrnas train`: from-scratch training of a baseline or an architecture."""

from __future__ import annotations

import argparse
from pathlib import Path

from ctrnas.cli.common import add_device_arg, add_distributed_args, check_exist, check_prepared, sharding_from_args


def train_args(p: argparse.ArgumentParser) -> None:
    """--data, --recipe, --out and the TrainConfig flags (shared with `ctrnas warmup`)."""
    p.add_argument("--data", required=True, help="prepared dataset folder (train/ val/ test/ + meta.json)")
    p.add_argument("--recipe", help="YAML with TrainConfig keys (at the top level or under 'train:'); `ctrnas "
                                    "train` given a run's recipe.yaml trains as its final stage (final.train, "
                                    "final.train_rows/val_rows/test_rows, final.layernorm, final.embedding_init, "
                                    "final.dense_init)")
    p.add_argument("--out", help="output folder: checkpoint.pt, metrics.json, ... (re-running resumes)")
    p.add_argument("--seed", type=int, help="seed for weights, shuffling and sampling (default: recipe's, 0)")
    p.add_argument("--lr", type=float, help="Adagrad learning rate (default 0.12)")
    p.add_argument("--batch-size", type=int, help="training batch size (default 512)")
    p.add_argument("--epochs", type=int, help="epochs (`train`: at most this many under the early-stop protocol, "
                                              "default 20; exactly this many with --protocol nasrec)")
    p.add_argument("--row-cap", type=int, help="cap every embedding table at this many rows (ids folded)")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: the recipe's, else 1: on busy "
                                               "shared cores more threads spin-wait, 5x slower measured)")
    p.add_argument("--checkpoint-every", type=int,
                   help="also checkpoint every N steps, so an interrupted run resumes mid-epoch (default: end only)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--overwrite", action="store_true",
                   help="write into an --out folder holding files ctrnas did not write (they are left in place; "
                        "a file of yours where ctrnas writes is refused even then)")
    add_device_arg(p)


def train_config(args, final: bool = False, eval_every: int | None = None, early_stop_patience: int | None = None,
                 restore_best: bool | None = None, protocol: str | None = None, ema: float | None = None):
    """The TrainConfig of --recipe with the flags given on top (shared with `ctrnas warmup`)."""
    from ctrnas import api

    return api.train_config(args.recipe, seed=args.seed, lr=args.lr, batch_size=args.batch_size, epochs=args.epochs,
                            row_cap=args.row_cap, threads=args.threads, checkpoint_every=args.checkpoint_every,
                            progress=False if args.no_progress else None, device=args.device, default_threads=1,
                            final=final, eval_every=eval_every, early_stop_patience=early_stop_patience,
                            restore_best=restore_best, protocol=protocol, overrides={"ema": ema})


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train a baseline or an architecture from scratch; log loss and AUC on val and test",
        description="Train from scratch (Adagrad, linear LR warm-up, grad clip) until val log loss stops "
                    "improving (evaluated four times an epoch; the LR halved at each evaluation without "
                    "improvement, stop after 4, end on the best weights), then test; write metrics.json. "
                    "--protocol nasrec: "
                    "NASRec's fixed --epochs on a cosine schedule.")
    train_args(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--baseline", help="lr, fm, dlrm, deepfm, xdeepfm, autoint+, dcnv2")
    what.add_argument("--arch", help="architecture JSON (a run's best_arch.json, `ctrnas export`) or a shipped "
                                     "name (dlrm-like, dcnv2-like, dcnv2-stacked, deepfm-like)")
    p.add_argument("--space",
                   help="search space of --arch: a preset name, a space YAML, or a recipe such as the run's "
                        "recipe.yaml (default: the --recipe run's space, else nasrec-full)")
    p.add_argument("--protocol", choices=("early-stop", "nasrec"),
                   help="how long to train: until val stops improving (early-stop, the default), or NASRec's fixed "
                        "--epochs on a cosine schedule (nasrec); default: the --recipe run's final.protocol")
    p.add_argument("--train-fraction", type=float, help="train on the first fraction of the train split only")
    p.add_argument("--eval-every", type=int,
                   help="evaluate on val every N steps at most (default: 2000 under early-stop, else at the end)")
    p.add_argument("--restore-best", action="store_true",
                   help="evaluate on val during training and end on the best evaluation's weights")
    p.add_argument("--early-stop-patience", type=int,
                   help="stop after N evaluations without a lower val log loss")
    p.add_argument("--ema", type=float,
                   help="evaluate and end on a moving average of the weights over N evaluation intervals "
                        "(docs/protocol.md; default: the recipe's, else 1 under the early-stop protocol; 0: off)")
    p.add_argument("--layernorm", choices=("off", "space", "on", "auto"),
                   help="--arch: the ops' LayerNorms: 'off' as NASRec's stand-alone training, 'space' the space's "
                        "setting, 'on', or 'auto' (on for models with a product term); default: the --recipe "
                        "run's final.layernorm, else off")
    p.add_argument("--embedding-init", choices=("torchrec", "nasrec"),
                   help="--arch: embedding tables uniform +-sqrt(1/rows) as TorchRec and the baselines, or "
                        "Xavier-normal as NASRec (default: the --recipe run's final.embedding_init, else torchrec)")
    p.add_argument("--dense-init", choices=("torchrec", "nasrec"),
                   help="--arch: dense weights as the baseline modules draw theirs (nn.Linear default, TorchRec "
                        "crossnet init), or Xavier-uniform as NASRec (default: the --recipe run's final.dense_init, "
                        "else torchrec, as the final stage)")
    add_distributed_args(p)  # --distributed / --sharding / --dist-backend (torchrun -m ctrnas train ...)
    p.set_defaults(func=_run_train)


def _run_train(args) -> int:
    check_prepared(args.data)
    check_exist(args.recipe)
    from ctrnas import api

    # a run's recipe.yaml: train as its final stage did (final.train, its rows, LayerNorm, embedding init)
    cfg = train_config(args, final=True, eval_every=args.eval_every, early_stop_patience=args.early_stop_patience,
                       restore_best=args.restore_best or None, protocol=args.protocol, ema=args.ema)
    m, out = api.train_model(args.data, cfg, baseline=args.baseline, arch=args.arch, space=args.space,
                             out_dir=args.out, train_fraction=args.train_fraction, layernorm=args.layernorm,
                             embedding_init=args.embedding_init, dense_init=args.dense_init,
                             distributed=args.distributed,
                             sharding=sharding_from_args(args), dist_backend=args.dist_backend, recipe=args.recipe,
                             overwrite=args.overwrite)
    if m is not None:  # under torchrun, rank 0 only
        _print_metrics(m, out)
    return 0


def _print_metrics(m: dict, out: str) -> None:
    t, test = m["train"], m["test"]
    line = f"{m['model']}: {t['steps']} steps, {t['rows']} rows, {t['samples_per_s']:.0f} samples/s"
    if test:
        line += f"; test logloss {test['logloss']:.5f} AUC {test['auc']:.5f}"
    bayes = (m.get("bayes_logloss") or {}).get("test")
    if bayes is not None:
        line += f" (Bayes optimum {bayes:.5f})"
    print(line)
    print(f"metrics: {Path(out) / 'metrics.json'}")
