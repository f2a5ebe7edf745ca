"""`ctrnas train` (from-scratch training of a baseline or an architecture) and `ctrnas warmup`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def _recipe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="prepared dataset folder (train/ val/ test/ + meta.json)")
    p.add_argument("--recipe", help="YAML with TrainConfig keys (at the top level or under 'train:')")
    p.add_argument("--out", help="output folder: checkpoint.pt, metrics.json, ... (re-running resumes)")
    p.add_argument("--seed", type=int, help="seed for weights, shuffling and sampling (default: recipe's, 0)")
    p.add_argument("--lr", type=float, help="Adagrad learning rate (default 0.12)")
    p.add_argument("--batch-size", type=int, help="training batch size (default 512)")
    p.add_argument("--epochs", type=int, help="epochs (default 1)")
    p.add_argument("--row-cap", type=int, help="cap every embedding table at this many rows (ids folded)")
    p.add_argument("--threads", type=int, help="torch intra-op threads (1 is fastest on busy shared cores)")
    p.add_argument("--checkpoint-every", type=int,
                   help="also checkpoint every N steps, so an interrupted run resumes mid-epoch (default: end only)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _train_config(args, **more):
    from ctrnas.config import from_dict, load_yaml
    from ctrnas.train.config import TrainConfig

    data, source = {}, "<defaults>"
    if args.recipe:
        data, source = load_yaml(args.recipe), args.recipe
        if "train" in data and isinstance(data["train"], dict):
            data = data["train"]
    cfg = from_dict(TrainConfig, data, source=source)
    over = {"seed": args.seed, "lr": args.lr, "batch_size": args.batch_size, "epochs": args.epochs,
            "row_cap": args.row_cap, "threads": args.threads, "checkpoint_every": args.checkpoint_every, **more}
    over = {k: v for k, v in over.items() if v is not None}
    if args.no_progress:
        over["progress"] = False
    return dataclasses.replace(cfg, **over)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train a baseline or an architecture from scratch; log loss and AUC on val and test",
        description="Train from scratch (Adagrad, cosine LR with linear warm-up, grad clip; NASRec defaults), "
                    "evaluate on val during training and on test at the end, write metrics.json.")
    _recipe_args(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--baseline", help="lr, fm, dlrm, deepfm, xdeepfm, autoint+, dcnv2")
    what.add_argument("--arch", help="architecture JSON (from search or `ctrnas export`)")
    p.add_argument("--space", default="nasrec-full", help="search space of --arch (default nasrec-full)")
    p.add_argument("--train-fraction", type=float, help="train on the first fraction of the train split only")
    p.add_argument("--eval-every", type=int, help="evaluate on val every N steps (default: at the end)")
    p.add_argument("--restore-best", action="store_true",
                   help="evaluate on val at every epoch end and end on the best epoch's weights")
    p.add_argument("--early-stop-patience", type=int,
                   help="stop after N evaluations without a lower val log loss")
    p.add_argument("--layernorm", choices=("off", "space"), default="off",
                   help="--arch: 'off' (default) trains without the ops' LayerNorms, as NASRec's stand-alone "
                        "training and `ctrnas run`'s final stage do; 'space' keeps the space's setting")
    p.add_argument("--embedding-init", choices=("torchrec", "nasrec"), default="torchrec",
                   help="--arch: embedding tables uniform +-sqrt(1/rows) as TorchRec and the baselines "
                        "(default, as the final stage) or Xavier-normal as NASRec")
    from ctrnas.distributed.commands import add_distributed_args

    add_distributed_args(p)  # --distributed / --sharding / --dist-backend (torchrun -m ctrnas train ...)
    p.set_defaults(func=_run_train)

    w = sub.add_parser(
        "warmup", help="warm up a NASRec supernet on the first FRACTION of the training data (0 = zero-shot)",
        description="Train the weight-sharing supernet with NASRec sampling on the first --fraction of the "
                    "train split (0: no training, 0.01: SiGeo's 1%% warm-up, 1.0: one epoch, one-shot). The "
                    "full-supernet phase lasts --full-ratio of the warm-up steps (see ctrnas.train.warmup).")
    _recipe_args(w)
    w.add_argument("--space", default="nasrec-full", help="nasrec-full or nasrec-small (default nasrec-full)")
    w.add_argument("--fraction", type=float, default=0.01, help="share of the train split (default 0.01)")
    w.add_argument("--full-ratio", type=float, default=0.2,
                   help="full-supernet probability decays to 0 over this share of the steps (default 0.2)")
    w.set_defaults(func=_run_warmup)


def _run_train(args) -> int:
    from ctrnas.data.dataset import load_schema
    from ctrnas.train.run import train_and_test

    cfg = _train_config(args, eval_every=args.eval_every, early_stop_patience=args.early_stop_patience,
                        restore_best=args.restore_best or None)
    schema = load_schema(args.data)
    if args.baseline:
        from ctrnas.train.baselines import build_baseline

        model, name, extra = build_baseline(args.baseline, schema, cfg.embedding_dim, cfg.row_cap, cfg.seed), \
            args.baseline, {}
    else:
        model, name, extra = _arch_model(args, schema, cfg)
    out = args.out or str(Path("runs") / f"train-{name.replace('+', 'plus')}-seed{cfg.seed}")
    if args.distributed:
        from ctrnas.distributed.commands import sharding_from_args, train_and_test_distributed

        m = train_and_test_distributed(model, args.data, cfg, out, name, sharding_from_args(args),
                                       train_fraction=args.train_fraction, extra=extra, backend=args.dist_backend)
        if m is not None:  # rank 0 only
            _print_metrics(m, out)
        return 0
    m = train_and_test(model, args.data, cfg, out, name, train_fraction=args.train_fraction, extra=extra)
    _print_metrics(m, out)
    return 0


def _arch_model(args, schema, cfg):
    import torch

    from ctrnas.errors import CtrnasError
    from ctrnas.space import get_space
    from ctrnas.space.arch import Arch
    from ctrnas.supernet.export import export
    from ctrnas.supernet.supernet import Supernet

    try:
        text = Path(args.arch).read_text()
    except OSError as e:
        raise CtrnasError(f"{args.arch}: cannot read architecture: {e.strerror}") from None
    arch = Arch.from_json(text)
    space = get_space(args.space).config
    if args.layernorm == "off":
        space = dataclasses.replace(space, layernorm=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        supernet = Supernet(schema, space, emb_dim=cfg.embedding_dim, row_cap=cfg.row_cap)
    model = export(supernet, arch, init="fresh", seed=cfg.seed, embedding_init=args.embedding_init)
    del supernet
    return model, f"arch-{arch.key()}", {"arch": arch.to_json(), "space": args.space,
                                                "layernorm": space.layernorm, "embedding_init": args.embedding_init}


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


def _run_warmup(args) -> int:
    import torch

    from ctrnas.config import to_dict
    from ctrnas.data.dataset import atomic_write_text, load_schema, versions
    from ctrnas.space.space import get_space
    from ctrnas.supernet.supernet import Supernet
    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.config import WarmupConfig
    from ctrnas.train.warmup import warmup

    cfg = _train_config(args)
    wcfg = WarmupConfig(fraction=args.fraction, full_supernet_ratio=args.full_ratio)
    schema = load_schema(args.data)
    space = get_space(args.space)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        supernet = Supernet(schema, space, emb_dim=cfg.embedding_dim, row_cap=cfg.row_cap)
    out = Path(args.out or f"runs/warmup-{space.name}-{args.fraction:g}-seed{cfg.seed}")
    train = None
    if wcfg.fraction > 0:
        train = dataset_batches(args.data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed,
                                fraction=wcfg.fraction)
    summary = warmup(supernet, space, train if train is not None else _Empty(), cfg, wcfg, out_dir=out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(supernet.state_dict(), out / "supernet.pt")
    record = {"data": args.data, "space": space.name, "warmup": dataclasses.asdict(wcfg), "summary": summary,
              "config": to_dict(cfg), "versions": versions()}
    atomic_write_text(out / "warmup.json", json.dumps(record, indent=2))
    print(f"warm-up {args.fraction:g} of the train split: {summary['steps']} steps, {summary['rows']} rows "
          f"({summary['full_supernet_steps']} full-supernet steps) in {summary['seconds']:.1f} s; "
          f"supernet: {out / 'supernet.pt'}")
    return 0


class _Empty:
    """No training rows (fraction 0)."""

    rows = 0

    def __len__(self) -> int:
        return 0

    def batches(self, start: int = 0, epoch: int = 0):
        return iter(())
