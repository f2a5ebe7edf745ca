"""Training benchmark on the synthetic Criteo profile (known Bayes-optimal log loss).

1. Every hand-crafted baseline trained for one epoch with the NASRec recipe: test log loss and AUC beside
   the Bayes optimum and the best constant predictor, and training samples/s (ratio against LR, run in
   the same process).
2. Embedding update paths: row-sparse gradients + sparse Adagrad (the default) vs dense gradients, step
   time of DLRM at batch 512 on the full-size tables, side by side.
3. Supernet warm-up wall time at 1% vs 100% of the training split (NASRec sampling, relative schedule).

Usage: python benchmarks/train.py [--rows 1000000] [--data DIR] [--threads 1] [--out benchmarks/sections/train.md]
The dataset is generated into --data when that folder has no meta.json, or regenerated when its meta.json
was written with other rows, seed or generator settings than the current defaults.

Seed-to-seed noise: run one process per training seed (`--train-seed S --json out/S.json`, each may skip
parts), then `--render out/0.json,out/1.json` writes one table with the per-seed log losses and their mean.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctrnas.data.dataset import load_schema, read_meta  # noqa: E402
from ctrnas.train.baselines import BASELINES, build_baseline  # noqa: E402
from ctrnas.train.batches import dataset_batches  # noqa: E402
from ctrnas.train.config import TrainConfig, WarmupConfig  # noqa: E402
from ctrnas.train.run import count_parameters, train_and_test  # noqa: E402
from ctrnas.train.trainer import Trainer  # noqa: E402


def ensure_data(path: Path, rows: int, seed: int) -> dict:
    from ctrnas.data.synthetic import generate, make_settings

    if (path / "meta.json").exists():
        old = read_meta(path)
        want = {**dataclasses.asdict(make_settings()), "split": list(make_settings().split)}
        if (old["source"].get("rows"), old["source"].get("seed"), old.get("settings")) != (rows, seed, want):
            # never removed here: the folder may be a dataset someone else generated (or a link to one)
            raise SystemExit(f"{path}: holds a dataset with other rows, seed or generator settings than "
                             f"--rows {rows} --seed {seed}; name another --data folder")
    if not (path / "meta.json").exists():

        t = time.perf_counter()
        generate("criteo", rows, seed, path)
        print(f"generated {rows} rows in {time.perf_counter() - t:.0f} s -> {path}", flush=True)
    return read_meta(path)


def bench_baselines(data: Path, names: list[str], cfg: TrainConfig) -> list[dict]:
    rows = []
    for name in names:
        model = build_baseline(name, load_schema(data), cfg.embedding_dim, cfg.row_cap, cfg.seed)
        m = train_and_test(model, data, cfg, None, name)
        r = {"model": name, "params": count_parameters(model)["total"], "test_logloss": m["test"]["logloss"],
             "test_auc": m["test"]["auc"], "samples_per_s": m["train"]["samples_per_s"],
             "seconds": m["train"]["seconds"], "bayes": m["bayes_logloss"]["test"],
             "constant": m["constant_logloss"], "seed": cfg.seed}
        rows.append(r)
        print(f"{name:9s} logloss {r['test_logloss']:.5f} AUC {r['test_auc']:.5f} "
              f"{r['samples_per_s']:.0f} samples/s ({r['seconds']:.0f} s)", flush=True)
    return rows


def bench_embedding_paths(data: Path, cfg: TrainConfig, steps: int) -> dict:
    """Median step time of DLRM with sparse vs dense embedding gradients, same batches, same process."""
    batches = []
    for b in dataset_batches(data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed).batches():
        batches.append(b)
        if len(batches) >= steps:
            break
    out = {}
    for mode in ("sparse", "dense"):
        model = build_baseline("dlrm", load_schema(data), cfg.embedding_dim, cfg.row_cap, cfg.seed)
        t = Trainer(model, TrainConfig(**{**cfg.__dict__, "embedding_update": mode}))
        times = []
        for b in batches:
            t0 = time.perf_counter()
            t.train_step(b, steps)
            times.append(time.perf_counter() - t0)
        times = sorted(times[3:])  # first steps allocate optimizer state
        out[mode] = times[len(times) // 2]
        print(f"embedding update {mode}: {out[mode] * 1e3:.1f} ms/step (median)", flush=True)
    return out


def bench_warmup(data: Path, space_name: str, fractions: list[float], cfg: TrainConfig, max_steps: int,
                 probe_steps: int) -> list[dict]:
    """Wall time of `warmup` per fraction: measured when it has at most `max_steps` steps, and, for every
    fraction, projected as n_full * t_full + n_sampled * t_sampled from medians of `probe_steps` timed
    full-supernet and sampled-subnet steps (n_full comes exactly from the seeded schedule)."""
    from ctrnas.space.space import get_space
    from ctrnas.supernet.io import build_supernet
    from ctrnas.train.warmup import step_choice, warmup

    schema, space = load_schema(data), get_space(space_name)

    def fresh():
        return build_supernet(schema, space, cfg.seed, cfg.embedding_dim, cfg.row_cap)

    probe = []
    for b in dataset_batches(data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed).batches():
        probe.append(b)
        if len(probe) >= 2 * probe_steps + 2:
            break
    t = Trainer(fresh(), cfg)
    per = {}
    rng = np.random.default_rng(cfg.seed)
    for kind in ("full", "sampled"):
        if kind == "full":
            t.forward = lambda m, b, s: m(b.dense_features, b.sparse_features, full=True)
        else:
            t.forward = lambda m, b, s: m(b.dense_features, b.sparse_features, arch=space.sample(rng))
        times = []
        for b in probe[: probe_steps + 1]:
            t0 = time.perf_counter()
            t.train_step(b, 10_000)
            times.append(time.perf_counter() - t0)
        per[kind] = sorted(times[1:])[len(times[1:]) // 2]  # the first step allocates optimizer state
        print(f"supernet {kind} step: {per[kind]:.2f} s (median of {probe_steps})", flush=True)

    rows = []
    n_train = read_meta(data)["splits"]["train"]["rows"]
    for f in fractions:
        steps = math.ceil(math.ceil(f * n_train - 1e-9) / cfg.batch_size)
        horizon = WarmupConfig().full_supernet_ratio * steps
        n_full = sum(step_choice(space, cfg.seed, s, horizon)[0] for s in range(math.ceil(horizon)))
        projected = n_full * per["full"] + (steps - n_full) * per["sampled"]
        measured = None
        if steps <= max_steps:
            net = fresh()
            src = dataset_batches(data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed, fraction=f)
            t0 = time.perf_counter()
            warmup(net, space, src, cfg, WarmupConfig(fraction=f))
            measured = time.perf_counter() - t0
        rows.append({"fraction": f, "steps": steps, "full_steps": n_full, "projected": projected,
                     "measured": measured})
        print(f"warm-up {f:g}: {steps} steps ({n_full} full), projected {projected:.0f} s, measured "
              f"{'-' if measured is None else f'{measured:.0f} s'}", flush=True)
    return rows, per


def markdown(args, meta, base, emb, wu) -> str:
    """`base`: baseline rows of one or more training seeds (each row has its `seed`)."""
    seeds = sorted({r.get("seed", args.train_seed) for r in base})
    lines = ["## Training engine (`benchmarks/train.py`)", "",
             f"Command: `{args.command}`", "",
             f"Data: synthetic Criteo profile, {meta['source']['rows']:,} rows (seed {meta['source']['seed']}), "
             f"train {meta['splits']['train']['rows']:,} / test {meta['splits']['test']['rows']:,}. "
             f"Recipe: NASRec defaults (Adagrad lr {args.lr}, eps 1e-2, batch {args.batch_size}, one epoch, "
             f"cosine with 10% linear warm-up, clip 5), embedding dim 16, sparse embedding updates, "
             f"torch threads {args.threads}, training seed(s) {', '.join(map(str, seeds))}. "
             f"Machine: {args.machine}.", ""]
    if base:
        by = {}
        for r in base:
            by.setdefault(r["model"], []).append(r)
        mean = {m: {k: float(np.mean([r[k] for r in rs])) for k in ("test_logloss", "test_auc", "samples_per_s")}
                for m, rs in by.items()}
        lr_sps = mean.get("lr", next(iter(mean.values())))["samples_per_s"]
        bayes, const = base[0]["bayes"], base[0]["constant"]
        multi = len(seeds) > 1
        head = "| model | params | test log loss" + (" (mean)" if multi else "")
        head += " | per seed | spread |" if multi else " |"
        lines += [head + " gap to Bayes | test AUC | train samples/s | vs LR |",
                  "|---|---:|---:|" + ("---:|---:|" if multi else "") + "---:|---:|---:|---:|"]
        for m, rs in by.items():
            mm = mean[m]
            gap = (mm["test_logloss"] - bayes) / bayes * 100
            row = f"| {m} | {rs[0]['params']:,} | {mm['test_logloss']:.5f} | "
            if multi:
                lls = [r["test_logloss"] for r in sorted(rs, key=lambda r: r["seed"])]
                spread = f"{(max(lls) - min(lls)) / mm['test_logloss'] * 100:.2f}%" if len(lls) > 1 else "-"
                row += " / ".join(f"{x:.5f}" for x in lls) + f" (seed {', '.join(str(r['seed']) for r in rs)})" \
                    if len(lls) == 1 else " / ".join(f"{x:.5f}" for x in lls)
                row += f" | {spread} | "
            lines.append(row + f"+{gap:.2f}% | {mm['test_auc']:.5f} | {mm['samples_per_s']:,.0f} | "
                         f"{mm['samples_per_s'] / lr_sps:.2f}x |")
        pad = "| | " if multi else ""
        lines += [f"| constant (train CTR) | 0 | {const:.5f} | {pad}+{(const - bayes) / bayes * 100:.2f}% | 0.5 | | |",
                  f"| **Bayes optimum** | | **{bayes:.5f}** | {pad}0 | | | |", ""]
        if multi:
            lines += ["Per seed: test log loss of training seeds " + " / ".join(map(str, seeds)) + "; spread = "
                      "(max - min) / mean of them (the training seed sets the initial weights and the batch "
                      "order; the data is the same). Models with one seed show it in brackets.", ""]
    if emb:
        lines += ["| embedding update (DLRM, batch %d) | ms/step (median) | speed-up |" % args.batch_size,
                  "|---|---:|---:|",
                  f"| dense gradients (baseline) | {emb['dense'] * 1e3:.1f} | 1.00x |",
                  f"| row-sparse gradients + sparse Adagrad | {emb['sparse'] * 1e3:.1f} | "
                  f"{emb['dense'] / emb['sparse']:.2f}x |", ""]
    if wu:
        wu, per = wu
        ref = wu[-1]
        lines += [f"Supernet ({args.warmup_space}) step at batch {args.batch_size}: full supernet "
                  f"{per['full']:.2f} s, sampled subnet {per['sampled']:.2f} s (medians). Projected time = "
                  "full steps x full-step time + sampled steps x sampled-step time; measured = a real "
                  f"`warmup()` run (done when it has at most {args.warmup_max_steps} steps).", "",
                  f"| warm-up ({args.warmup_space}) | steps | full-supernet steps | projected s | measured s | "
                  f"projected time vs {ref['fraction']:g} |", "|---|---:|---:|---:|---:|---:|"]
        for r in wu:
            m = "-" if r["measured"] is None else f"{r['measured']:.0f}"
            lines.append(f"| {r['fraction']:g} of train | {r['steps']:,} | {r['full_steps']:,} | "
                         f"{r['projected']:.0f} | {m} | {r['projected'] / ref['projected']:.4f}x |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--data", default=str(ROOT / "benchmarks" / "out" / "criteo-1m"))
    ap.add_argument("--seed", type=int, default=0, help="data seed (and training seed unless --train-seed)")
    ap.add_argument("--train-seed", type=int, default=None, help="seed of initial weights and batch order")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument("--render", default=None, help="comma list of --json files: merge them into --out, no runs")
    ap.add_argument("--baselines", default=",".join(BASELINES))
    ap.add_argument("--lr", type=float, default=0.12)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--emb-steps", type=int, default=40, help="steps timed per embedding path (0 = skip)")
    ap.add_argument("--warmup-space", default="nasrec-full")
    ap.add_argument("--warmup-fractions", default="0.01,1.0", help="comma list ('' = skip)")
    ap.add_argument("--warmup-max-steps", type=int, default=100, help="run warm-ups of at most this many steps")
    ap.add_argument("--probe-steps", type=int, default=5, help="timed supernet steps per kind")
    ap.add_argument("--machine", default="2 shared CPU cores (other jobs running), no GPU")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "sections" / "train.md"))
    args = ap.parse_args(argv)
    args.train_seed = args.seed if args.train_seed is None else args.train_seed
    args.command = shlex.join(["python", "benchmarks/train.py", *(sys.argv[1:] if argv is None else argv)])
    if args.render:
        runs = [json.loads(Path(f).read_text()) for f in args.render.split(",")]
        first = runs[0]
        for k in ("lr", "batch_size", "threads", "machine", "warmup_space", "warmup_max_steps"):
            setattr(args, k, first["args"][k])
        args.command = "; ".join(r["args"]["command"] for r in runs) + f"; {args.command}"
        meta, base = first["meta"], [row for r in runs for row in r["base"]]
        emb = next((r["emb"] for r in runs if r["emb"]), {})
        wu = next((r["wu"] for r in runs if r["wu"]), [])
    else:
        torch.set_num_threads(args.threads)
        data = Path(args.data)
        meta = ensure_data(data, args.rows, args.seed)
        cfg = TrainConfig(lr=args.lr, batch_size=args.batch_size, seed=args.train_seed, progress=False,
                          embedding_update="sparse")  # the tables as this section measured them
        names = [n for n in args.baselines.split(",") if n]
        base = bench_baselines(data, names, cfg) if names else []
        emb = bench_embedding_paths(data, cfg, args.emb_steps) if args.emb_steps else {}
        fr = [float(x) for x in args.warmup_fractions.split(",") if x]
        wu = bench_warmup(data, args.warmup_space, fr, cfg, args.warmup_max_steps, args.probe_steps) if fr else []
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps({"args": vars(args), "meta": meta, "base": base, "emb": emb,
                                                   "wu": wu}, indent=1))
    md = markdown(args, meta, base, emb, wu)
    print()
    from _results import notes_marker, publish

    publish(md + "\n", Path(args.out), notes_marker("train.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
