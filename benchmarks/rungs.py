"""Rungs study on the demo data: how well each fidelity of the multi-fidelity search ranks subnets.

    nice -n 5 .venv/bin/python benchmarks/rungs.py --parts truth --archs 24 --seed1 12 --workers 2
    nice -n 5 .venv/bin/python benchmarks/rungs.py --parts rungs
    .venv/bin/python benchmarks/rungs.py --report-only

Data: the demo's synthetic Criteo profile (300k rows, 240k training rows), copied to
benchmarks/out/rungs/data-300k. Space: the demo recipe's (`recipes/synthetic.yaml`: ctrnas-small, 7 blocks,
its widths). Parts (each saves benchmarks/out/rungs/<part>.json; re-running resumes):
  truth   N random subnets trained as the final stage trains (2 epochs, best val epoch, all training rows),
          training seed 0; the first M of them again with training seed 1 (the reproducibility ceiling).
  rungs   every rung of the ladder scored on the same subnets: SiGeo / ZiCo / params (and the normalised
          variants) after warm-up 0 / 0.01 / 1, inherited-weight one-shot after 50 / 500 fine-tuning steps,
          from-scratch short training on 1 / 5 / 20 % of the training rows; Kendall tau and Spearman rho
          against the truth, each with its cost per subnet in full-training equivalents (FTE).
  halving successive halving over the trained subnets, first rung SiGeo vs random at equal FTE (offline).
The section goes to benchmarks/sections/rungs.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)
import numpy as np  # noqa: E402

OUT = ROOT / "benchmarks/out/rungs"
SECTION = ROOT / "benchmarks/sections/rungs.md"


def base_recipe(args, *extra: str):
    from ctrnas.recipe import load_recipe

    return load_recipe(ROOT / "recipes/synthetic.yaml", [
        "name=rungs", f"output={OUT}/{{name}}", f"data.path={OUT}/data-300k", "train.progress=false",
        "threads=1", *args.set, *extra])


def truth_dir(seed: int) -> Path:
    return OUT / "rungs" / ("study" if seed == 0 else f"study-seed{seed}")


def part_truth(args) -> dict:
    """Train the subnets from scratch (cached in trained.json per training seed)."""
    from ctrnas import api
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import train_all, sample_archs

    out = {}
    for seed, n in ((0, args.archs), (1, args.seed1)):
        if n <= 0:
            continue
        recipe = base_recipe(args, f"final.train.seed={seed}")
        data = api.prepare_data(recipe)
        archs = sample_archs(base_recipe(args), args.archs)[:n]  # the same archs for both seeds
        d = truth_dir(seed)
        d.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        trained = train_all(recipe, data, archs, new_supernet(recipe, data), d / "trained.json",
                             progress=True, workers=args.workers)
        out[str(seed)] = {"n": len(archs), "seconds": time.perf_counter() - t0,
                          "train_seconds": sum(trained[a.key()]["seconds"] for a in archs)}
    _results.save(OUT, "truth", out)
    return out


PROXIES = ("sigeo", "zico", "sigeo_mmean", "sigeo_emean", "sigeo_norm", "zico_mmean", "zico_emean", "zico_norm")
# the normalised variants: the base proxy with its `normalise` option (docs/proxies.md, A14)
NORMALISE = {"mmean": "modules", "emean": "elements", "norm": "both"}


def proxy_and_options(name: str) -> tuple[str, dict]:
    base, _, variant = name.partition("_")
    return (base, {"normalise": NORMALISE[variant]}) if variant else (name, {})


def rung_list(args) -> list[tuple[str, str, float, int]]:
    """(label, kind, warm-up fraction, budget) of every rung measured: proxies after each warm-up, one-shot
    after a full and a 1% warm-up, short trainings on a share of the training rows."""
    out = [("params", "proxy:params", 0.0, 4)]
    out += [(f"{p}@{f:g}", f"proxy:{p}", f, 4) for f in (0.0, 0.01) for p in PROXIES]
    out += [(f"short-{pct:g}%", "short", 0.0, pct) for pct in (1, 5, 20)]
    out += [(f"{p}@1", f"proxy:{p}", 1.0, 4) for p in PROXIES]
    out += [(f"oneshot-{s}@{f:g}", "oneshot", f, s) for f in (1.0, 0.01) for s in (50, 500)]
    return out  # cheapest first: a run stopped by the clock still has the proxies and short trainings


def part_rungs(args) -> dict:
    """Score every subnet at every rung (cached per rung in rungs.json, so a stopped run resumes)."""
    from ctrnas import api
    from ctrnas.pipeline.data import split_rows
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.pipeline.fitness.rungs import ShortTrainingFitness
    from ctrnas.pipeline.fitness.build import make_fitness
    from ctrnas.pipeline.stages import new_supernet, warmup_config_for, warmup_stage
    from ctrnas.pipeline.study import sample_archs
    from ctrnas.search.fitness import candidate_seed

    recipe = base_recipe(args)
    data = api.prepare_data(recipe)
    archs = sample_archs(recipe, args.archs)
    done = _results.load(OUT, "rungs") or {"scores": {}, "seconds": {}, "warmup": {}}
    train_rows = split_rows(data, "train")
    warm = {}
    for label, kind, f, budget in rung_list(args):
        if label in done["scores"] or args.only not in label:
            continue
        if kind != "short" and f not in warm:
            w = warmup_stage(warmup_config_for(recipe, f), data, OUT / "rungs" / f"warmup-{f:g}")
            warm[f] = w.supernet
            done["warmup"][f"{f:g}"] = {"rows": int(w.rows), "seconds": w.seconds}
        rf = warmup_config_for(recipe, f)
        if kind.startswith("proxy:"):
            name, options = proxy_and_options(kind[6:])
            fit, _ = make_fitness(rf, data, warm[f], "proxy", proxy=name, proxy_options=options)
            sign, budget_of = 1.0, None
        elif kind == "oneshot":
            rf = dataclasses.replace(rf, oneshot=dataclasses.replace(rf.oneshot, finetune_steps=budget))
            fit, _ = make_fitness(rf, data, warm[f], "oneshot")
            sign, budget_of = -1.0, None
        else:
            val = min(recipe.oneshot.eval_rows, split_rows(data, "val"))
            fit = ShortTrainingFitness(recipe, data, final_template(recipe, data, new_supernet(recipe, data)), val)
            sign, budget_of = -1.0, max(1, train_rows * budget // 100)
        t0 = time.perf_counter()
        vals = {}
        for i, a in enumerate(archs):
            vals[a.key()] = sign * fit(a, candidate_seed(recipe.seed, i), budget_of).value
        done["scores"][label] = vals
        done["seconds"][label] = (time.perf_counter() - t0) / len(archs)
        _results.save(OUT, "rungs", done)
        print(f"{label}: {done['seconds'][label]:.2f} s per subnet", flush=True)
    return done


def _truth(seed: int) -> dict:
    p = truth_dir(seed) / "trained.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _unit(args) -> int:
    from ctrnas import api
    from ctrnas.pipeline.budget import final_samples

    recipe = base_recipe(args)
    return final_samples(recipe, api.prepare_data(recipe))


def _cost(args, kind: str, budget: int, unit: int, train_rows: int) -> float:
    """FTE of one subnet's score at this rung (budget.py's accounting: training samples / unit)."""
    from ctrnas.pipeline.fitness.rungs import rung_samples
    from ctrnas.search.multifidelity import RungConfig

    recipe = base_recipe(args)
    if kind == "proxy:params":
        return 0.0  # counts weights, reads no rows
    if kind == "short":
        return rung_samples(recipe, RungConfig("short"), max(1, train_rows * budget // 100)) / unit
    if kind == "oneshot":  # a fine-tuning sample goes backward through the last layer only: 1/3 of a sample
        from ctrnas.pipeline import budget as accounting

        return rung_samples(recipe, RungConfig("oneshot"), budget) * getattr(accounting, "FINETUNE_COST", 1 / 3) / unit
    return rung_samples(recipe, RungConfig("proxy"), budget) / unit


def table(args) -> tuple[str, list[dict]]:
    """The tau-per-rung table against the seed-0 truth, and its rows."""
    from ctrnas.search.ranking import rank_correlations

    done, truth = _results.load(OUT, "rungs"), _truth(0)
    unit, train_rows = _unit(args), _unit(args) // 2
    rows = []
    for label, kind, f, budget in rung_list(args):
        vals = (done or {}).get("scores", {}).get(label)
        if not vals:
            continue
        keys = [k for k in vals if k in truth]
        corr = rank_correlations([vals[k] for k in keys], [-truth[k]["test"]["logloss"] for k in keys],
                                 n_boot=1000, seed=0)
        warm = done["warmup"].get(f"{f:g}", {}).get("rows", 0) if kind != "short" else 0
        rows.append({"rung": label, "kind": kind, "fraction": f, "kendall": corr["kendall"],
                     "spearman": corr["spearman"], "n": len(keys), "fte": _cost(args, kind, budget, unit, train_rows),
                     "warmup_fte": warm / unit, "seconds": done["seconds"][label]})
    lines = ["| rung | Kendall τ [95% CI] | Spearman ρ [95% CI] | FTE per subnet | warm-up FTE (once) | s per subnet |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        k, s = r["kendall"], r["spearman"]
        lines.append(f"| {r['rung']} | {k.estimate:+.2f} [{k.low:+.2f}, {k.high:+.2f}] | {s.estimate:+.2f} "
                     f"[{s.low:+.2f}, {s.high:+.2f}] | {r['fte']:.4f} | {r['warmup_fte']:.3f} | {r['seconds']:.1f} |")
    return "\n".join(lines), rows


def variants_text() -> str:
    """Each normalised variant against `params` and against its own base proxy after the same warm-up:
    paired bootstrap differences of Spearman rho with the truth (the same subnets resampled for both)."""
    from ctrnas.vision.stats import spearman_difference

    done, truth = _results.load(OUT, "rungs") or {"scores": {}}, _truth(0)
    sc = done["scores"]
    if "params" not in sc:
        return ""
    keys = [k for k in sc["params"] if k in truth]
    neg = [-truth[k]["test"]["logloss"] for k in keys]
    col = lambda label: [sc[label][k] for k in keys]  # noqa: E731
    lines = ["| variant | Δρ vs params [95% CI] (share > 0) | Δρ vs its base proxy [95% CI] (share > 0) |",
             "|---|---|---|"]
    for label in sc:
        name, _, f = label.partition("@")
        if "_" not in name or not f:
            continue
        base = f"{name.split('_')[0]}@{f}"
        cells = []
        for other in ("params", base):
            d, (lo, hi), share = spearman_difference(col(label), col(other), neg)
            cells.append(f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}] ({share:.0%})")
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def reproducibility() -> str:
    from scipy import stats

    a, b = _truth(0), _truth(1)
    keys = [k for k in b if k in a]
    if len(keys) < 3:
        return "No second-seed truth yet."
    x, y = [a[k]["test"]["logloss"] for k in keys], [b[k]["test"]["logloss"] for k in keys]
    return (f"Seed-to-seed (the ceiling for any rung): the first {len(keys)} subnets retrained with training seed 1 "
            f"rank alike with Kendall τ {stats.kendalltau(x, y).statistic:+.2f}, Spearman ρ "
            f"{stats.spearmanr(x, y).statistic:+.2f}; mean |difference| of test log loss "
            f"{sum(abs(p - q) for p, q in zip(x, y)) / len(keys):.5f}.")


def halve(order: list[str], n_keep: int, short5: dict, short20: dict, val: dict, test: dict, top_k: int = 2):
    """Successive halving over the pool from a first-rung order (best first): the first `n_keep` get the
    5% training, the best half of them the 20% training, its best `top_k` the final training, and the
    lowest final val log loss is the pick. Returns (the pick's test log loss, its key, samples per rung)."""
    r1 = order[:n_keep]
    r2 = sorted(r1, key=lambda k: short5[k])[: math.ceil(len(r1) / 2)] if len(r1) > 1 else r1
    top = sorted(r2, key=lambda k: short20[k])[:top_k]
    pick = min(top, key=lambda k: val[k])
    return test[pick], pick, (len(r1), len(r2), len(top))


def part_halving(args) -> dict:
    """The first rung SiGeo (or another scored rung) vs random, over the trained pool (offline: the short
    trainings and the final trainings are the measured ones). Equal FTE: random spends the proxy rung's
    compute on more 5% trainings."""
    done, truth = _results.load(OUT, "rungs"), _truth(0)
    keys = [k for k in done["scores"]["short-5%"] if k in truth]
    s5, s20 = ({k: -done["scores"][r][k] for k in keys} for r in ("short-5%", "short-20%"))
    val = {k: truth[k]["val"]["logloss"] for k in keys}
    test = {k: truth[k]["test"]["logloss"] for k in keys}
    n = len(keys)
    table_rows = {r["rung"]: r for r in table(args)[1]}
    c5, c20 = table_rows["short-5%"]["fte"], table_rows["short-20%"]["fte"]
    n0 = math.ceil(n * args.keep)
    out = {"n": n, "keep": n0, "oracle": min(test.values()), "median": statistics.median(test.values()),
           "draws": args.draws, "firsts": {}}
    for label in args.first.split(","):
        if label not in done["scores"]:
            continue
        sc = done["scores"][label]
        order = sorted(keys, key=lambda k: -sc[k])
        loss, pick, sizes = halve(order, n0, s5, s20, val, test)
        r = table_rows[label]
        proxy_fte = r["fte"] * n + r["warmup_fte"]
        extra = min(n - n0, int(proxy_fte // c5))  # 5% trainings that compute buys
        fte = proxy_fte + sizes[0] * c5 + sizes[1] * c20 + sizes[2] * 1.0
        rng = np.random.default_rng(0)
        rnd = {"same": [], "equal_fte": []}
        for _ in range(args.draws):
            perm = [keys[i] for i in rng.permutation(n)]
            rnd["same"].append(halve(perm, n0, s5, s20, val, test)[0])
            rnd["equal_fte"].append(halve(perm, n0 + extra, s5, s20, val, test)[0])
        out["firsts"][label] = {
            "loss": loss, "pick": pick, "rank_in_pool": sorted(test.values()).index(loss) + 1, "fte": fte,
            "proxy_fte": proxy_fte, "extra_random": extra,
            **{f"random_{w}": {"mean": float(np.mean(v)), "std": float(np.std(v)), "p5": float(np.percentile(v, 5)),
                               "p95": float(np.percentile(v, 95)),
                               "share_not_worse": float(np.mean(np.asarray(v) <= loss))} for w, v in rnd.items()}}
    # every subnet to the 5% rung (no first rung): what a first rung saves
    loss, _, sizes = halve(sorted(keys, key=lambda k: s5[k]), n, s5, s20, val, test)
    out["no_first_rung"] = {"loss": loss, "fte": n * c5 + sizes[1] * c20 + sizes[2]}
    _results.save(OUT, "halving", out)
    return out


def halving_text(h: dict) -> str:
    lines = [f"Pool: the {h['n']} trained subnets (truth test log loss best {h['oracle']:.5f}, median "
             f"{h['median']:.5f}). Ladder: first rung keeps {h['keep']} of {h['n']}, then one epoch on 5% of the "
             "training rows (best half kept), then on 20% (best 2 kept), then the final training of those 2 "
             "(the lower val log loss is the pick). Random first rung: "
             f"{h['draws']} seeded draws.", "",
             "| first rung | found test log loss (rank in pool) | FTE | random, same promotions: mean ± sd [5-95%] | "
             "P(random ≤ it) | random at equal FTE (+n at 5%): mean ± sd | P(random ≤ it) |", "|---|---|---|---|---|---|---|"]
    for label, r in h["firsts"].items():
        a, b = r["random_same"], r["random_equal_fte"]
        lines.append(f"| {label} | {r['loss']:.5f} ({r['rank_in_pool']}) | {r['fte']:.2f} | {a['mean']:.5f} ± "
                     f"{a['std']:.5f} [{a['p5']:.5f}, {a['p95']:.5f}] | {a['share_not_worse']:.2f} | (+{r['extra_random']}) "
                     f"{b['mean']:.5f} ± {b['std']:.5f} | {b['share_not_worse']:.2f} |")
    nf = h["no_first_rung"]
    lines.append(f"| none (all to 5%) | {nf['loss']:.5f} | {nf['fte']:.2f} | | | | |")
    return "\n".join(lines)


def report(args) -> str:
    import platform

    truth = _truth(0)
    if not truth:
        return "No truth yet."
    how = next(iter(truth.values()))["how"]
    loss = sorted(v["test"]["logloss"] for v in truth.values())
    lines = ["## Rungs: which fidelity ranks subnets on the demo data", "",
             f"Demo data (synthetic Criteo profile, 300k rows, 240k training rows), the demo recipe's space "
             f"(`recipes/synthetic.yaml`: ctrnas-small, 7 blocks, its widths); {platform.machine()}, "
             f"{os.cpu_count()} CPU cores, torch threads 1. {args.machine} This replaces the 1M-row study of the search "
             "section at a size 2 cores can train: fewer subnets (so wider intervals), a smaller data set.", "",
             f"Truth: {len(truth)} random subnets (seed 0) trained as the final stage trains: "
             f"{how['train']['epochs']} epochs ending on the better val epoch, lr {how['train']['lr']}, batch "
             f"{how['train']['batch_size']}, all training rows, training seed 0; test log loss {loss[0]:.5f} (best) / "
             f"{statistics.median(loss):.5f} (median) / {loss[-1]:.5f} (worst); "
             f"{sum(v['seconds'] for v in truth.values()) / len(truth):.0f} s wall per training under that load. "
             + reproducibility(), "",
             "Correlation of each rung's score (one-shot and short trainings: negated val log loss) with the "
             "negated test log loss of the truth (higher = ranks better), 95% bootstrap intervals over the "
             "subnets. FTE per subnet: training samples the score processes / one final training's (240k rows x "
             "2 epochs), as `pipeline/budget.py` counts them; the warm-up is paid once per search. `@f`: after a "
             "warm-up on the fraction f of the training rows (0.01 = 2.4k rows = 5 steps; 1 = one epoch). "
             "SiGeo's preset follows the warm-up (zero-shot at 0, RecSys weights 1/1/1 after). `*_mmean`, "
             "`*_emean`, `*_norm`: term 1 averaged over modules, over each module's elements, both.", "",
             table(args)[0], "", "Normalised variants, paired bootstrap over the subnets (1000 resamples):", "",
             variants_text(), ""]
    h = _results.load(OUT, "halving")
    if h:
        lines += ["### What SiGeo contributes as a first rung (offline successive halving over the pool)", "",
                  halving_text(h), ""]
    text = "\n".join(lines) + "\n"
    keep = SECTION.read_text().split(READING, 1)[1] if SECTION.exists() and READING in SECTION.read_text() else ""
    _results._atomic_write(SECTION, text + (READING + keep if keep else ""))
    return text


READING = "### Reading (by hand; kept on re-render)"


def main() -> int:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="truth,rungs,halving")
    ap.add_argument("--archs", type=int, default=24)
    ap.add_argument("--seed1", type=int, default=12, help="subnets retrained with training seed 1")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe overrides")
    ap.add_argument("--keep", type=float, default=0.25, help="halving: share the first rung promotes")
    ap.add_argument("--first", default="sigeo@0.01,sigeo@0,sigeo@1,sigeo_norm@0.01,zico@0.01,params,short-1%,"
                                       "oneshot-50@1",
                    help="halving: first rungs compared with random")
    ap.add_argument("--draws", type=int, default=1000, help="halving: random first-rung draws")
    ap.add_argument("--only", default="", help="rungs: only the rungs whose label contains this")
    ap.add_argument("--machine", default="", help="a sentence on the load during the runs, for the report")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    OUT = Path(args.out or OUT)

    import torch

    torch.set_num_threads(1)
    if not args.report_only:
        for part in args.parts.split(","):
            t0 = time.perf_counter()
            {"truth": part_truth, "rungs": part_rungs, "halving": part_halving}[part](args)
            print(f"part {part} done in {time.perf_counter() - t0:.0f} s", flush=True)
    print(report(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
