"""Learning-rate schedules for the early-stop protocol: variants of its "plateau" form (`ctrnas.train.config.
early_stopping` without the weights' moving average: the "plateau" schedule, val four times an epoch, patience 4, the
rate halved at each evaluation without improvement) that need no training length in advance, against it and NASRec's
2-epoch cosine (the caches of benchmarks/protocol.py).

    python benchmarks/schedules.py --data runs/data/avazu-pairwise-70k:dlrm:evals2,anneal \
        --data runs/data/avazu-pairwise-70k --variants evals4-p4-x0.5-t0

Variants named in a --data (tried on a few models) go to a candidates table; those of --variants get a table per
data with every model, and count toward the goal.

A variant's name is its parts joined by "-": "evalsK" evaluates K times per epoch (default 4), "pN" stops after N
evaluations without improvement (default 4), "xF" multiplies the rate by F at each of them (default 0.5), "tF"
counts an evaluation as an improvement only below the best val log loss x (1 - F) (default 1e-4; "t0": any),
"eF" multiplies the rate by F per epoch after the warm-up, step by step (default 1), "hN" halves it every N steps
after the warm-up, step by step (default none): decays that need no length in advance, measured here and not
shipped (the trainer below adds them), "emaF" evaluates, selects and ends on a moving average of the weights over F
evaluation intervals (`TrainConfig.ema`), "keep" goes on from the weights it has after a cut instead of the best
evaluation's (FuxiCTR's reduce-on-plateau; measured here and not shipped),
"anneal" ends with the trainer's final anneal (`TrainConfig.anneal`: from the best weights, "pN"'s N evaluation
intervals, at most an epoch, at a rate falling from the full rate to 0 by a cosine, kept only if val improves;
"anneal@best": from the rate the best evaluation was reached at); a name without it has none. "plateau", "nasrec" and
"cosine-10" are benchmarks/protocol.py's, read from (or written to) its caches.

Every training is cached under --out (one JSON each, with its val history), so an interrupted run resumes and the
section is rebuilt from the caches. The goal: within 1 pair sd (both models' seed sds together) of the better of
`nasrec` and `cosine-10`, at any size; the cost is the epochs trained, in FTE (2 epochs).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import notes_marker, publish, save  # noqa: E402
from protocol import cached, settings, train_one as protocol_run  # noqa: E402

MODELS = ("lr", "fm", "dlrm", "deepfm", "xdeepfm", "dcnv2")
PROTOCOL = ("nasrec", "cosine-10", "plateau")  # trained and cached by benchmarks/protocol.py


class Variant(NamedTuple):
    # a part not named keeps the early-stop protocol's setting (ctrnas.train.config: EVALS_PER_EPOCH, PATIENCE,
    # PLATEAU_FACTOR)
    evals: int = 4           # evaluations per epoch
    patience: int = 4
    factor: float = 0.5      # the rate's factor at each evaluation without improvement
    anneal: str | None = None  # None, "full" or "best": the final pass's starting rate
    threshold: float = 1e-4  # the least relative improvement an evaluation counts as one (min_improvement)
    decay: float = 1.0       # the rate's factor per epoch
    half_life: int = 0       # steps in which the rate halves; 0: none
    keep: bool = False       # a cut goes on from the weights it has, not the best evaluation's
    ema: float = 0.0         # the weights' moving average over that many evaluation intervals (TrainConfig.ema)


def parse(name: str) -> Variant:
    """The Variant a name spells ("evals4-p4-x0.5-anneal"); a clear error for a part it does not know."""
    v = Variant()
    for part in name.split("-"):
        if part.startswith("evals") and part[5:].isdigit() and int(part[5:]) >= 1:
            v = v._replace(evals=int(part[5:]))
        elif part.startswith("p") and part[1:].isdigit() and int(part[1:]) >= 1:
            v = v._replace(patience=int(part[1:]))
        elif part.startswith("x") and _positive(part[1:]) and float(part[1:]) <= 1:
            v = v._replace(factor=float(part[1:]))
        elif part.startswith("t") and (part[1:] == "0" or _positive(part[1:])) and float(part[1:]) < 1:
            v = v._replace(threshold=float(part[1:]))
        elif part.startswith("ema") and _positive(part[3:]):
            v = v._replace(ema=float(part[3:]))
        elif part.startswith("e") and _positive(part[1:]) and float(part[1:]) <= 1:
            v = v._replace(decay=float(part[1:]))
        elif part.startswith("h") and part[1:].isdigit() and int(part[1:]) >= 1:
            v = v._replace(half_life=int(part[1:]))
        elif part == "keep":
            v = v._replace(keep=True)
        elif part in ("anneal", "anneal@best"):
            v = v._replace(anneal="best" if part.endswith("@best") else "full")
        else:
            raise SystemExit(f"variant {name!r}: unknown part {part!r} "
                             "(evalsK, pN, xF, tF, eF, hN, emaF, keep, anneal, anneal@best)")
    return v


def _positive(s: str) -> bool:
    try:
        return float(s) > 0
    except ValueError:
        return False


def config(v: Variant, seed: int):
    """The TrainConfig of a variant: "plateau" with the variant's evaluations per epoch (the trainer cuts
    the epoch into that many equal parts), patience, factor, threshold and final anneal (its decays and `keep`:
    `extras`)."""
    from ctrnas.train.config import TrainConfig, early_stopping

    # sparse tables, as benchmarks/protocol.py's runs (fused gives the same to float rounding)
    base = early_stopping(TrainConfig(progress=False, threads=1, eval_batch_size=8192, seed=seed,
                                      embedding_update="sparse"))
    return dataclasses.replace(base, early_stop_patience=v.patience, plateau_factor=v.factor, evals_per_epoch=v.evals,
                               min_improvement=v.threshold, anneal=v.anneal is not None, ema=v.ema)


def extras(v: Variant) -> dict:
    """What a variant sets beyond its TrainConfig (its decays of the rate, "keep"), as its cache records them
    (nothing for a variant without)."""
    return {**({"epoch_decay": v.decay} if v.decay != 1.0 else {}),
            **({"half_life": v.half_life} if v.half_life else {}), **({"keep": True} if v.keep else {})}


def annealing_trainer():
    """The trainer, whose final anneal (`TrainConfig.anneal`) starts at the full rate, or with `from_best` at the
    rate the best evaluation was reached at ("anneal@best"), and whose rate after the warm-up decays by
    `epoch_decay` per epoch and halves every `half_life` steps, step by step ("eF", "hN"), and which with `keep`
    goes on from the weights it has after a cut ("keep")."""
    from ctrnas.train.config import lr_at
    from ctrnas.train.trainer import Trainer

    class AnnealingTrainer(Trainer):
        from_best = False  # set before fit, as the decays below
        epoch_decay = 1.0
        half_life = 0
        keep = False
        cuts_at_best = 0   # the rate's cuts before the best evaluation

        _selecting = False

        def _load_weights(self, weights):
            if not (self.keep and self._selecting):  # a cut's return to the best weights is `_select`'s only load
                super()._load_weights(weights)

        def _select(self):
            self._selecting = True
            try:
                stop = super()._select()
            finally:
                self._selecting = False
            if self.best is not None and self.best["step"] == self.step:
                self.cuts_at_best = self.cuts
            return stop

        def current_lr(self, total_steps):
            if self._annealing is None:
                return self._decayed(super().current_lr(total_steps))
            if not self.from_best:
                return super().current_lr(total_steps)
            start, steps = self._annealing
            cosine = dataclasses.replace(self.cfg, schedule="cosine", warmup_ratio=0.0, min_lr=0.0,
                                         lr=self.cfg.lr * self.cfg.plateau_factor ** self.cuts_at_best)
            return lr_at(cosine, self.step - start, steps)

        def _decayed(self, lr):
            t = self.step - math.ceil(self.cfg.warmup_ratio * self.epoch_steps)  # steps since the warm-up
            if t < 0:
                return lr
            decay = self.epoch_decay ** (t / self.epoch_steps)
            if self.half_life:
                decay *= 0.5 ** (t / self.half_life)
            return max(self.cfg.min_lr, lr * decay)

    return AnnealingTrainer


def train_one(data: Path, model: str, variant: str, seed: int, out: Path, protocol_out: Path) -> dict:
    """One training's test log loss, length and val history (from the cache when it is there; "plateau",
    "nasrec" and "cosine-10" from benchmarks/protocol.py's caches under `protocol_out`)."""
    if variant in PROTOCOL:
        return protocol_run(data, model, variant, seed, protocol_out / data.name / f"{model}-{variant}-{seed}.json")
    v = parse(variant)
    cfg = config(v, seed)
    cache = out / data.name
    hit = cached(cache / f"{model}-{variant}-{seed}.json", cfg, anneal=v.anneal, **extras(v))  # its settings of today
    if hit is not None:
        return hit
    from ctrnas.data.dataset import load_schema
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.run import split_batches

    _, train, val, test = split_batches(data, cfg)
    per_epoch = len(train)
    net = build_baseline(model, load_schema(data), dim=cfg.embedding_dim, seed=seed)
    trainer = annealing_trainer()(net, cfg)
    trainer.from_best = v.anneal == "best"
    trainer.epoch_decay, trainer.half_life, trainer.keep = v.decay, v.half_life, v.keep
    s = trainer.fit(train, val)
    r = {"test": None if trainer.diverged else trainer.evaluate(test).logloss,
         "val": (s["best"] or {}).get("logloss"),
         "epochs": s["steps"] / per_epoch,
         "best_epoch": (s["best"] or {}).get("step", s["steps"]) / per_epoch,
         "seconds": s["seconds"],
         "val_history": [{"epoch": h["step"] / per_epoch, "logloss": h["logloss"], **({"anneal": True} if
                          h.get("anneal") else {})} for h in s["val_history"]],
         "settings": {**settings(cfg), "anneal": v.anneal, **extras(v)}}
    save(cache, f"{model}-{variant}-{seed}", r)
    return r


def stats(runs: list[dict]) -> tuple[float, float, float] | None:
    """(mean test log loss, its sd over seeds, mean epochs) of a protocol's runs; None if one diverged."""
    t = [r["test"] for r in runs]
    if not t or any(x is None for x in t):
        return None
    return statistics.fmean(t), statistics.stdev(t) if len(t) > 1 else math.nan, statistics.fmean(r["epochs"] for r in runs)


def margin(a: tuple, b: tuple) -> float:
    """a's mean minus b's in pair sd (both seed sds together); negative: a better."""
    pair = math.hypot(a[1], b[1])
    return (a[0] - b[0]) / pair if pair > 0 else math.nan


def better_other(st: dict) -> str | None:
    """The better (by mean) of `nasrec` and `cosine-10` among a model's stats, None if neither is there."""
    others = [p for p in ("nasrec", "cosine-10") if st.get(p)]
    return min(others, key=lambda p: st[p][0]) if others else None


def _order(model: str) -> tuple:
    return (MODELS.index(model) if model in MODELS else len(MODELS), model)


def cell(st: tuple | None) -> str:
    """"mean (sd) FTE" of a protocol's stats."""
    return "diverged" if st is None else f"{st[0]:.5f} ({st[1]:.5f}) {st[2] / 2:.2f}"


def screening(results: dict, main: list[str]) -> list[str]:
    """The variants tried on fewer models (those not in `main`): per model a row per variant, per data its
    test log loss, FTE and margin from the better other (and from "plateau")."""
    models = [m for by_model in results.values() for m, runs in by_model.items()
              if any(p not in main and p not in PROTOCOL for p in runs)]
    if not models:
        return []
    datas = [d for d, by_model in results.items()
             if any(p not in main and p not in PROTOCOL for runs in by_model.values() for p in runs)]
    lines = ["**Candidates**", "", "| model | variant | " + " | ".join(
        f"{Path(d).name} | vs better other; vs plateau" for d in datas) + " |", "|---|---|" + "---|---|" * len(datas)]
    for model in dict.fromkeys(models):
        names = ["plateau", *dict.fromkeys(p for d in datas for p in results[d].get(model, {})
                                             if p not in PROTOCOL)]
        for p in names:
            row = []
            for d in datas:
                runs = results[d].get(model, {})
                st = {q: stats(r) for q, r in runs.items()}
                o = better_other(st)
                if p not in runs or not st[p] or o is None:
                    row += ["-" if p not in runs else cell(st[p]), "-"]
                    continue
                vs = "" if p == "plateau" or not st.get("plateau") else f"; {margin(st[p], st['plateau']):+.1f}"
                row += [cell(st[p]), f"{margin(st[p], st[o]):+.1f} vs {o}{vs}"]
            lines.append(f"| {model} | {p} | " + " | ".join(row) + " |")
    return lines + [""]


def report(results: dict, variants: list[str], command: str) -> str:
    lines = ["## Learning-rate schedules", "",
             f"Command: `python benchmarks/schedules.py {command}`", "",
             "Variants of `plateau` (the early-stop protocol without the weights' moving average) that need no "
             "training length in advance, against it and the better "
             "(by mean) of `nasrec` and `cosine-10` (benchmarks/protocol.py's caches). `evalsK`: val evaluated K "
             "times per epoch (default 4), so patience and each cut count those evaluations; "
             "`pN`: stop after N evaluations without improvement (default 4); `xF`: the rate times F at each of them "
             "(default 0.5; each returns to the best weights); `tF`: an evaluation improves only below the best "
             "x (1 - F) (default 1e-4; `t0`: any lower val log loss); `eF`: the rate times F per epoch after the "
             "warm-up, step by step (an exponential decay; default none); `hN`: the rate halved every N steps "
             "after the warm-up, step by step (default none); `keep`: each cut goes on from the weights it has, not "
             "the best evaluation's (FuxiCTR's reduce-on-plateau); `emaF`: val scores, and the training ends "
             "on, a moving average of the weights over F evaluation intervals (`TrainConfig.ema`); `anneal`: the "
             "final anneal, after the stop "
             "patience evaluation intervals (one epoch here) from the best weights at a rate falling from 0.12 to 0 "
             "by a cosine, kept only if val improves (`anneal@best`: from the rate the best evaluation was reached "
             "at). Cells: test log loss, mean over training seeds (sd), and "
             "the FTE trained (one FTE: 2 epochs; evaluations not counted); margins in pair sd (both seed sds "
             "together; negative: better). Goal: within 1 pair sd of the better other.", ""]
    lines += screening(results, variants)
    met_all: dict = {}
    for data, by_model in results.items():
        shown = [p for p in PROTOCOL if any(p in runs for runs in by_model.values())]
        present = [p for p in variants if any(p in runs for runs in by_model.values())]
        if not present:
            continue
        cols = shown + present
        lines += [f"**{data}**", "", "| model | " + " | ".join(cols) + " | better other | " +
                  " | ".join(f"{p} vs it" for p in ["plateau", *present]) + " |",
                  "|---|" + "---|" * (len(cols) + 2 + len(present))]
        ftes: dict = {}
        for model, runs in sorted(by_model.items(), key=lambda kv: _order(kv[0])):
            if not any(p in runs for p in present):
                continue
            st = {p: stats(runs[p]) for p in cols if p in runs}
            o = better_other(st)
            row = [cell(st[p]) if p in runs else "-" for p in cols] + [o or "-"]
            for p in ["plateau", *present]:
                if not st.get(p) or o is None:
                    row.append("-")
                    continue
                z = margin(st[p], st[o])
                met = math.isfinite(z) and z <= 1.0
                n = met_all.setdefault(p, [0, 0])
                n[0], n[1] = n[0] + met, n[1] + 1
                ftes.setdefault(p, []).append(st[p][2] / 2)
                vs = "" if p == "plateau" or not st.get("plateau") else \
                    f"; {margin(st[p], st['plateau']):+.1f} vs plateau"
                row.append(f"{z:+.1f}{'' if met else ' (not met)'}{vs}")
            lines.append(f"| {model} | " + " | ".join(row) + " |")
        lines += ["", "Mean FTE: " + ", ".join(f"`{p}` {statistics.fmean(f):.2f}" for p, f in ftes.items()) + ".", ""]
    if met_all:
        lines.append("Goal met: " + "; ".join(f"`{p}` {k} of {n}" for p, (k, n) in met_all.items()) +
                     " model-and-data pairs.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", required=True,
                    help="prepared dataset folder, optionally with its own models and variants: "
                         "PATH[:MODEL,..[:VARIANT,..]] (repeatable)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--variants", default="evals4-p4-x0.5-t0")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "results" / "schedules"))
    ap.add_argument("--protocol-out", default=str(HERE / "results" / "protocol"),
                    help="benchmarks/protocol.py's caches, for plateau, nasrec and cosine-10")
    ap.add_argument("--section", default=None,
                    help="markdown section (default benchmarks/sections/schedules.md; a run that lacks part of it "
                         "writes <out>/section.md instead)")
    args = ap.parse_args(argv)
    for spec in args.data:  # every name checked before the first training
        for p in (spec.split(":") + ["", ""])[2].split(",") if spec.count(":") >= 2 else args.variants.split(","):
            if p and p not in PROTOCOL:
                parse(p)
    import torch

    torch.set_num_threads(1)
    results: dict = {}
    for spec in args.data:
        data, _, rest = spec.partition(":")
        models, _, names = rest.partition(":")
        names = (names or args.variants).split(",")
        for model in (models or args.models).split(","):
            for p in [*PROTOCOL, *names]:
                if p in results.get(data, {}).get(model, {}):
                    continue
                for seed in range(args.seeds):
                    r = train_one(Path(data), model, p, seed, Path(args.out), Path(args.protocol_out))
                    results.setdefault(data, {}).setdefault(model, {}).setdefault(p, []).append(r)
                    test = "diverged" if r["test"] is None else f"{r['test']:.5f}"
                    print(f"{Path(data).name} {model} {p} seed {seed}: test {test}, {r['epochs']:.2f} epochs",
                          file=sys.stderr, flush=True)
    models = "" if args.models == ",".join(MODELS) else f" --models {args.models}"
    command = " ".join(f"--data {d}" for d in args.data) + f"{models} --variants {args.variants} --seeds {args.seeds}"
    variants = [p for p in args.variants.split(",") if p not in PROTOCOL]
    publish(report(results, variants, command),
            Path(args.section or HERE / "sections" / "schedules.md"), notes_marker("schedules.py"),
            fallback=None if args.section else Path(args.out) / "section.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
