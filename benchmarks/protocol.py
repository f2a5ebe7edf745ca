"""Training protocol: test log loss of the baselines under NASRec's fixed protocol, early stopping as
`ctrnas train` allowed it before (cosine over a 10-epoch cap), the early-stop protocol the final stage uses by
default (`ctrnas.train.config.early_stopping`) and the same without the weights' moving average ("plateau"), at
several data sizes and training seeds.

    python benchmarks/protocol.py --data runs/data/synthetic-criteo-70k --data runs/data/synthetic-criteo-300k \
        --data runs/data/avazu-pairwise-70k:lr,fm,dlrm,dcnv2:plateau,plateau@3,plateau@9,adam

Each --data folder is `ctrnas prepare synthetic --profile criteo|avazu [--structure pairwise] --rows N --seed 0`;
a protocol named again for the same folder and model is counted once.

The protocols "adam" and "adam@3" train the "plateau" protocol with Adam (at 1e-3 and 3e-3) in place of Adagrad,
for a table of their own: which optimizer trains each baseline family better.

`--workers N` trains N at a time (one process and one torch thread each; the same numbers as one at a time).
A training in progress checkpoints four times an epoch under --checkpoints, so a stopped run resumes it where it
was. Every training is cached under --out (one JSON each, with the settings it was trained with; committed under
benchmarks/results/), so an interrupted run resumes, the section is rebuilt from the caches, and a protocol whose
settings change trains again. The goal: the default is never worse than the better of "nasrec" and "cosine-10" by
more than 1 pair sd (both models' seed sds together), at any size; its cost is the epochs it trains, in FTE (2
epochs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import _atomic_write, notes_marker, publish, save  # noqa: E402

MODELS = ("lr", "fm", "dlrm", "deepfm", "xdeepfm", "dcnv2")


def protocols(name: str):
    """The TrainConfig of a protocol name; "plateau": the default without the weights' moving average (the
    trained weights evaluated and kept); "plateau@3": that at 3x the learning rate; "adam": "plateau" at Adam's
    usual rate and eps (FuxiCTR's and BARS's 1e-3 and 1e-8), "adam@3" at 3x that rate."""
    from ctrnas.train.config import TrainConfig, early_stopping

    # sparse tables, as every cached run was trained (fused gives the same to float rounding)
    base = TrainConfig(progress=False, threads=1, eval_batch_size=8192, embedding_update="sparse")
    name, _, scale = name.partition("@")
    cfg = {
        "nasrec": dataclasses.replace(base, epochs=2, restore_best=True),
        "cosine-10": dataclasses.replace(base, epochs=10, restore_best=True, early_stop_patience=2),
        "default": early_stopping(base),
        "plateau": dataclasses.replace(early_stopping(base), ema=0.0),
        "adam": dataclasses.replace(early_stopping(dataclasses.replace(base, lr=1e-3, eps=1e-8)), ema=0.0),
    }[name]
    return dataclasses.replace(cfg, lr=cfg.lr * float(scale)) if scale else cfg


def adam_trainer():
    """The trainer with Adam in place of Adagrad: torch's Adam on the dense parameters (betas 0.9, 0.999), lazy
    Adam (torch's SparseAdam) on the embedding tables' row-sparse gradients, the usual Adam for large tables.
    Adam lost this benchmark's measurement, so the project's trainer keeps Adagrad only and the measurement
    builds its Adam here (a subclass, the same training loop, schedule and selection)."""
    import torch

    from ctrnas.train.trainer import Trainer

    class AdamTrainer(Trainer):
        def __init__(self, model, cfg, *args, **kwargs):
            if cfg.embedding_update == "fused":
                raise ValueError("embedding_update: fused applies Adagrad inside the backward; Adam needs sparse")
            super().__init__(model, cfg, *args, **kwargs)

        def dense_optimizer(self, params):
            cfg = self.cfg
            return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.eps, weight_decay=cfg.weight_decay, fused=True)

        def embedding_optimizer(self, params, sparse):
            cfg = self.cfg
            if sparse:  # lazy: a row's moments and value change only in the steps that look it up
                return torch.optim.SparseAdam(params, lr=cfg.lr, eps=cfg.eps)
            return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.eps, weight_decay=cfg.weight_decay)

    return AdamTrainer


def settings(cfg) -> dict:
    """The settings that decide a training's numbers, as a cache records them (JSON types); of a recorded dict,
    with the keys added to TrainConfig since at their defaults (what it trained with then)."""
    from ctrnas.train.config import numeric_settings

    return json.loads(json.dumps(numeric_settings(cfg)))


def cached(cache: Path, cfg, **extra) -> dict | None:
    """The result cached at `cache` if it was trained with `cfg`'s settings (and the `extra` ones a script adds),
    else None: a training whose settings changed trains again."""
    from _results import load

    hit = load(cache.parent, cache.stem)
    was = hit.get("settings") if hit is not None else None
    if not isinstance(was, dict):
        return None
    recorded = {**settings({k: x for k, x in was.items() if k not in extra}), **{k: was.get(k) for k in extra}}
    return hit if recorded == {**settings(cfg), **extra} else None


def train_one(data: Path, model: str, protocol: str, seed: int, cache: Path, checkpoints: Path | None = None) -> dict:
    """One training's test log loss and length (read from `cache` when it was trained with the protocol's
    settings of today). With `checkpoints`, the training writes its checkpoint there four times an epoch and a
    stopped one resumes from it (the same numbers); the checkpoint goes once the result is cached."""
    cfg = dataclasses.replace(protocols(protocol), seed=seed)
    hit = cached(cache, cfg)
    if hit is not None:
        return hit
    from ctrnas.data.dataset import load_schema
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.run import split_batches
    from ctrnas.train.trainer import Trainer

    net = build_baseline(model, load_schema(data), dim=cfg.embedding_dim, seed=seed)
    _, train, val, test = split_batches(data, cfg)  # as `ctrnas.train.run.train_and_test`, with the trainer chosen
    folder = None if checkpoints is None else checkpoints / cache.parent.name / cache.stem
    if folder is not None:  # a run-only setting: the numbers do not depend on it
        cfg = dataclasses.replace(cfg, checkpoint_every=max(1, len(train) // 4))
    trainer = (adam_trainer() if is_optimizer(protocol) else Trainer)(net, cfg, folder)
    s = trainer.fit(train, val)
    per_epoch = len(train)
    out = {"test": None if trainer.diverged else trainer.evaluate(test).logloss,
           "val": (s["best"] or {}).get("logloss"),
           "epochs": s["steps"] / per_epoch,
           "best_epoch": (s["best"] or {}).get("step", s["steps"]) / per_epoch,
           "first_val": s["val_history"][0]["logloss"] if s["val_history"] else None,
           "seconds": s["seconds"], "settings": settings(cfg)}
    save(cache.parent, cache.stem, out)
    if folder is not None:
        shutil.rmtree(folder)  # this training's own checkpoint folder, written above
    return out


# rough CPU per epoch of each family, relative (benchmarks/RESULTS.md, "Where a training step's time goes"), and
# epochs of each protocol at most: only the order in which --workers hands the trainings out
FAMILY_COST = {"lr": 1, "fm": 1, "dlrm": 2, "deepfm": 2, "dcnv2": 4, "xdeepfm": 6}
LENGTH = {"nasrec": 2, "cosine-10": 10}


def _train_job(checkpoints, job: tuple) -> dict:
    return train_one(Path(job[0]), *job[1:], checkpoints=checkpoints)


def train_all(jobs: list[tuple], workers: int = 1, checkpoints: Path | None = None) -> list[dict]:
    """`train_one(data, model, protocol, seed, cache)` of every job, in job order; the jobs are handed out longest
    first (on `workers` processes), and each result is printed as it comes."""
    from ctrnas.execution import ExecutionConfig, make_executor

    costs = [FAMILY_COST.get(j[1], 2) * LENGTH.get(j[2].partition("@")[0], 5) for j in jobs]
    out: list = [None] * len(jobs)
    with make_executor(ExecutionConfig("processes" if workers > 1 else "serial", workers), _train_job,
                       checkpoints) as ex:
        for i, r in ex.imap_costliest_first(jobs, costs, ordered=False):
            job, out[i] = jobs[i], r
            test = "diverged" if r["test"] is None else f"{r['test']:.5f}"
            print(f"{Path(job[0]).name} {job[1]} {job[2]} seed {job[3]}: test {test}, {r['epochs']:.1f} epochs",
                  file=sys.stderr, flush=True)
    return out


def report(results: dict, command: str) -> str:
    lines = ["## Training protocol", "",
             f"Command: `python benchmarks/protocol.py {command}`", "",
             "Test log loss, mean over training seeds (sd); in brackets the epochs trained (its best epoch). "
             "`nasrec`: 2 epochs, cosine, the better epoch kept; `cosine-10`: cosine over 10 epochs, stop after 2 "
             "evaluations without improvement (what `ctrnas train` allowed before); `plateau`: early stopping "
             "(up to 20 epochs, val evaluated four times an epoch, stop after 4 evaluations without "
             "improvement; the LR constant after its warm-up, halved at each evaluation without improvement, which "
             "also returns to the best weights); `default`: the early-stop protocol, `plateau` with val scored on, "
             "and the training ending on, a moving average of the weights over one evaluation interval "
             "(`TrainConfig.ema`). Goal: `default` within 1 pair sd of "
             "the better of `nasrec` and `cosine-10`; its cost in FTE (one FTE: the 2 epochs of `nasrec`), the "
             "better other's beside it.", ""]
    ok, n = 0, 0
    for data, by_model in results.items():
        names = sorted({p for runs in by_model.values() for p in runs if not is_optimizer(p)}, key=column_order)
        lines += [f"**{data}**", "", "| model | " + " | ".join(names) + " | default vs best other (pair sd) | "
                  "FTE: default (best other) |", "|---|" + "---|" * (len(names) + 2)]
        block_ok, block_n, ftes = 0, 0, []
        for model, runs in by_model.items():
            cells, stats = [], {}
            for p in names:
                rs = runs.get(p, [])
                if not rs:
                    cells.append("-")
                    continue
                t = [r["test"] for r in rs]
                if any(x is None for x in t):  # diverged (the trainer stopped it): no test log loss
                    cells.append(f"diverged at {sum(x is None for x in t)} of {len(t)} seeds")
                    continue
                mean, sd = statistics.fmean(t), statistics.stdev(t) if len(t) > 1 else math.nan
                ep = statistics.fmean(r["epochs"] for r in rs)
                stats[p] = (mean, sd, ep)
                best = statistics.fmean(r["best_epoch"] for r in rs)
                cells.append(f"{mean:.5f} ({sd:.5f}) [{ep:.1f} ({best:.1f})]")
            v = verdict(stats)
            if v is None:
                lines.append(f"| {model} | " + " | ".join(cells) + " | - | - |")
                continue
            ok, n, block_ok, block_n = ok + v["met"], n + 1, block_ok + v["met"], block_n + 1
            ftes.append((v["fte"], v["other_fte"]))
            lines.append(f"| {model} | " + " | ".join(cells) + f" | {v['z']:+.1f} vs {v['other']} "
                         f"({'met' if v['met'] else 'not met'}) | {v['fte']:.2f} ({v['other_fte']:.2f}) |")
        lines.append("")
        if block_n:
            lines += [f"Goal met for {block_ok} of {block_n} models; the default trains "
                      f"{statistics.fmean(f for f, _ in ftes):.2f} FTE on average, the better other "
                      f"{statistics.fmean(f for _, f in ftes):.2f}.", ""]
        grid = [p for p in names if p.partition("@")[0] == "plateau"]
        if len(grid) > 1:
            rates = ", ".join(p.partition("@")[2] or "1" for p in grid)
            lines += [f"A learning rate per model from {{{rates}}} x 0.12, "
                      "chosen per seed by the val log loss at the first evaluation (measured, not shipped):", "",
                      "| model | chosen per seed | test | vs plateau (pair sd) |", "|---|---|---|---|"]
            for model, runs in by_model.items():
                if not all(len(runs.get(p, [])) == len(runs.get("plateau", [])) for p in grid):
                    continue
                def first(p, i):
                    x = runs[p][i]["first_val"]
                    return x if x is not None and math.isfinite(x) else math.inf

                picks = [min(grid, key=lambda p: first(p, i)) for i in range(len(runs["plateau"]))]
                t = [runs[p][i]["test"] for i, p in enumerate(picks)]
                d = [r["test"] for r in runs["plateau"]]
                sd = lambda x: statistics.stdev(x) if len(x) > 1 else math.nan  # noqa: E731
                pair = math.hypot(sd(t), sd(d))
                z = (statistics.fmean(t) - statistics.fmean(d)) / pair if pair > 0 else math.nan
                lines.append(f"| {model} | {', '.join(p.partition('@')[2] or '1' for p in picks)} | "
                             f"{statistics.fmean(t):.5f} ({sd(t):.5f}) | {z:+.1f} |")
            lines.append("")
    lines.append(f"Goal met for {ok} of {n} model-and-data pairs.")
    if any(is_optimizer(p) for by_model in results.values() for runs in by_model.values() for p in runs):
        lines += ["", *optimizer_report(results)]
    return "\n".join(lines) + "\n"


def column_order(protocol: str) -> tuple:
    """The protocol table's columns: the fixed protocol, the old early stopping, the default without and with
    the moving average, then the rest."""
    base = protocol.partition("@")[0]
    return ({"nasrec": 0, "cosine-10": 1, "plateau": 2, "default": 3}.get(base, 4), protocol)


def verdict(stats: dict) -> dict | None:
    """The default against the better (by mean) of `nasrec` and `cosine-10`: its margin in pair sd (both seed sds
    together; negative: the default better), whether that meets the goal (at most +1), and both FTEs (one FTE: 2
    epochs, the fixed protocol's length). `stats`: protocol -> (mean, sd, epochs). None without the default or
    another."""
    others = [p for p in ("nasrec", "cosine-10") if p in stats]
    if "default" not in stats or not others:
        return None
    o = min(others, key=lambda p: stats[p][0])
    pair = math.hypot(stats["default"][1], stats[o][1])
    z = (stats["default"][0] - stats[o][0]) / pair if pair > 0 else math.nan
    return {"other": o, "z": z, "met": math.isfinite(z) and z <= 1.0,
            "fte": stats["default"][2] / 2, "other_fte": stats[o][2] / 2}


def is_optimizer(protocol: str) -> bool:
    """A protocol of the optimizer table ("adam", "adam@3"), not of the protocol table."""
    return protocol.partition("@")[0] == "adam"


def optimizer_report(results: dict) -> list[str]:
    """The plateau protocol's Adagrad against Adam: test log loss per seed, mean, margin in pair sd, length."""
    lines = ["### Adagrad or Adam", "",
             "The `plateau` protocol with NASRec's Adagrad (lr 0.12, eps 1e-2) and with Adam, the optimizer of FuxiCTR "
             "and BARS (betas 0.9, 0.999, eps 1e-8; lazy Adam on the embedding tables): test log loss per training "
             "seed, their mean (sd), Adam minus Adagrad in pair sd (negative: Adam better), epochs trained and FTE "
             "(one FTE: 2 epochs). Adam is built by this script (`adam_trainer`), not a setting of the trainer: it "
             "lost."]
    better, worse, n = 0, 0, 0
    for data, by_model in results.items():
        # only the models trained with Adam too: the protocol table alone shows the rest
        by_model = {m: runs for m, runs in by_model.items() if any(is_optimizer(q) for q in runs)}
        if not by_model:
            continue
        lines += ["", f"**{data}, optimizers**", "",
                  "| model | optimizer | lr | test per seed | mean (sd) | vs Adagrad (pair sd) | epochs | FTE |",
                  "|---|---|---|---|---|---|---|---|"]
        for model, runs in by_model.items():
            ref = runs.get("plateau", [])
            for p in ["plateau"] + sorted(q for q in runs if is_optimizer(q)):
                rs = runs.get(p, [])
                if not rs or not ref:
                    continue
                label, lr = ("adagrad", 0.12) if p == "plateau" else ("adam", protocols(p).lr)
                t = [r["test"] for r in rs]
                if any(x is None for x in t):
                    lines.append(f"| {model} | {label} | {lr:g} | diverged at {sum(x is None for x in t)} of "
                                 f"{len(t)} seeds | - | - | - | - |")
                    continue
                mean, sd = statistics.fmean(t), statistics.stdev(t) if len(t) > 1 else math.nan
                margin = "-"
                a = [r["test"] for r in ref]
                if p != "plateau" and None not in a:
                    pair = math.hypot(sd, statistics.stdev(a) if len(a) > 1 else math.nan)
                    z = (mean - statistics.fmean(a)) / pair if pair > 0 else math.nan
                    margin = f"{z:+.1f}"
                    n = n + 1
                    better, worse = better + (math.isfinite(z) and z < -1.0), worse + (math.isfinite(z) and z > 1.0)
                ep = statistics.fmean(r["epochs"] for r in rs)
                lines.append(f"| {model} | {label} | {lr:g} | {', '.join(f'{x:.5f}' for x in t)} | {mean:.5f} "
                             f"({sd:.5f}) | {margin} | {ep:.1f} | {ep / 2:.2f} |")
    lines += ["", f"Adam better than Adagrad by more than 1 pair sd in {better} of {n} model, data and rate triples, "
                  f"worse by more than 1 pair sd in {worse}."]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", required=True,
                    help="prepared dataset folder, optionally with its own models and protocols: "
                         "PATH[:MODEL,..[:PROTOCOL,..]] (repeatable)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--protocols", default="nasrec,cosine-10,plateau,default")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1,
                    help="trainings at a time, one process and one torch thread each (the longest handed out first)")
    ap.add_argument("--checkpoints", default=str(HERE / "out" / "protocol-checkpoints"),
                    help="where a training in progress keeps its checkpoint (a stopped run resumes it)")
    ap.add_argument("--out", default=str(HERE / "results" / "protocol"),
                    help="the trainings' results, one JSON each (committed: the section is rebuilt from them)")
    ap.add_argument("--section", default=None,
                    help="markdown section (default benchmarks/sections/protocol.md; a run that lacks part of it "
                         "writes <out>/section.md instead)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    jobs, named = [], set()
    for spec in args.data:
        data, _, rest = spec.partition(":")
        models, _, protos = rest.partition(":")
        for model in (models or args.models).split(","):
            for p in (protos or args.protocols).split(","):
                if (data, model, p) in named:  # named by an earlier --data: its seeds are in
                    continue
                named.add((data, model, p))
                jobs += [(data, model, p, seed, Path(args.out) / Path(data).name / f"{model}-{p}-{seed}.json")
                         for seed in range(args.seeds)]
    results: dict = {}
    for (data, model, p, seed, _), r in zip(jobs, train_all(jobs, args.workers, Path(args.checkpoints))):
        results.setdefault(data, {}).setdefault(model, {}).setdefault(p, []).append(r)
    # a data folder's models in the usual order, however many --data entries named them
    order = {m: i for i, m in enumerate(MODELS)}
    results = {d: dict(sorted(by_model.items(), key=lambda kv: order.get(kv[0], len(order))))
               for d, by_model in results.items()}
    command = " ".join(f"--data {d}" for d in args.data) + f" --protocols {args.protocols} --seeds {args.seeds}"
    publish(report(results, command),
            Path(args.section or HERE / "sections" / "protocol.md"), notes_marker("protocol.py"),
            fallback=None if args.section else Path(args.out) / "section.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
