"""The multi-fidelity search against every baseline at a stated compute budget, for benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/mfsearch.py --rows 300000 --workers 2       # ~1 h of 2 idle CPU cores
    .venv/bin/python benchmarks/mfsearch.py --rows 1000000 --workers 15     # the full size: a 16-core box
    .venv/bin/python benchmarks/mfsearch.py --rows 300000 --report-only     # rebuild the section

What it runs (each part saves benchmarks/out/mfsearch/<rows>k/<part>.json; a re-run resumes):
  search-S    `ctrnas run recipes/synthetic.yaml` (the demo recipe: multi-fidelity evolution over ctrnas-small,
              seeded with dlrm-like / dcnv2-like) at search seed S, baselines left out; its found arch is
              retrained with training seed 1 for the seed noise.
  baselines   every baseline (LR, FM, DLRM, DeepFM, xDeepFM, AutoInt+, DCN-v2) at training seeds 0 and 1,
              trained exactly like the final stage.
  matched     when a found arch has its own embedding dim (`emb_dim`, a space with `emb_dims`): DLRM and DCN-v2
              at that dim, 2 training seeds, to show how much of the found model's lead is the table width.
  random-S    random search at equal compute: as many random ctrnas-small subnets (same space settings) as
              the search run's FTE (warm-up + search + its top-k final trainings), each trained like the final
              stage (1 FTE each); the one with the best val log loss is its pick.
The found model (mean of its two training seeds) has to be below every baseline (mean of two seeds) by more
than twice the seed noise, below random search, at <= 12 FTE. The seed noise of a comparison is that of the two
models compared (`pair_margins`: the standard error of the difference of their means); the report also gives
the older, stricter reading, one noise pooled over all models, which the least stable baseline sets.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)

SECTION = ROOT / "benchmarks/sections/mfsearch.md"
BASELINES = ("lr", "fm", "dlrm", "deepfm", "xdeepfm", "autoint+", "dcnv2")


def out_dir(args) -> Path:
    return Path(args.out or ROOT / "benchmarks/out/mfsearch") / f"{args.rows // 1000}k"


def recipe_for(args, seed: int, *extra: str):
    from ctrnas.recipe import load_recipe

    data = args.data or str(out_dir(args).parent / f"data-{args.rows // 1000}k")
    return load_recipe(ROOT / args.recipe, [
        f"name=search-s{seed}", f"output={out_dir(args)}/{{name}}", f"data.path={data}",
        f"data.synthetic.rows={args.rows}", f"seed={seed}", "train.progress=false", "threads=1",
        "final.baselines=[]", f"final.workers={args.workers}", f"search.workers={args.workers}", *args.set, *extra])


def quiet(recipe, train_seed: int):
    """The recipe whose final-stage training is silent and seeded with `train_seed`."""
    train = dataclasses.replace(recipe.final_train, progress=False, seed=train_seed)
    return dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, train=train))


def train_all(recipe, data, jobs: list, workers: int) -> list[dict]:
    """Train `jobs` [(kind, what, label)] like the final stage; their val/test metrics and seconds."""
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.pipeline.final.workers import training_executor
    from ctrnas.pipeline.stages import new_supernet

    template = final_template(recipe, data, new_supernet(recipe, data))
    with training_executor(recipe, data, template, workers, jobs=len(jobs)) as ex:
        results = ex.map([((kind, what), False, label) for kind, what, label in jobs])
    return [{"label": label, "val": r["val"]["logloss"], "test": r["test"]["logloss"],
             "test_auc": r["test"].get("auc"), "seconds": r["seconds"]} for (_, _, label), r in zip(jobs, results)]


def part_search(args, seed: int) -> dict:
    from ctrnas import api

    name = f"search-{seed}"
    if (done := _results.load(out_dir(args), name)) is not None:
        return done
    recipe = recipe_for(args, seed)
    t0 = time.perf_counter()
    run = api.run(recipe, progress=True)
    m = run.metrics
    best = m["best"]
    arch = run.final.best.arch  # None when a baseline was reported (fallback)
    retrain = train_all(quiet(recipe, 1), run.data, [("arch", arch, "found, seed 1")], 1) if arch else []
    out = {"seconds": time.perf_counter() - t0, "timings": m["timings"], "compute": m["compute"],
           "best": {k: best.get(k) for k in ("label", "arch_key", "val_logloss", "test_logloss", "test_auc")},
           "found_seed1": retrain[0] if retrain else None, "bayes": m.get("bayes_test_logloss"),
           "candidates": [{k: c.get(k) for k in ("label", "arch_key", "val_logloss", "test_logloss")}
                          for c in m["candidates"]], "arch": best.get("arch")}
    _results.save(out_dir(args), name, out)
    return out


def part_baselines(args) -> dict:
    from ctrnas import api

    if (done := _results.load(out_dir(args), "baselines")) is not None:
        return done
    recipe = recipe_for(args, 0)
    data = api.prepare_data(recipe)
    rows = {}
    for s in range(2):
        for r in train_all(quiet(recipe, s), data, [("baseline", b, b) for b in BASELINES], args.workers):
            rows.setdefault(r["label"], []).append(r)
    out = {"models": rows, "bayes": (data.bayes_logloss or {}).get("test")}
    _results.save(out_dir(args), "baselines", out)
    return out


def found_dims(args) -> list[int]:
    """Embedding dims of the found archs that differ from the recipe's (the `matched` part trains baselines there)."""
    recipe = recipe_for(args, 0)
    dims = set()
    for s in range(args.seeds):
        srch = _results.load(out_dir(args), f"search-{s}")
        dim = ((srch or {}).get("arch") or {}).get("emb_dim")
        if dim and dim != recipe.train.embedding_dim:
            dims.add(int(dim))
    return sorted(dims)


def part_matched(args) -> dict:
    from ctrnas import api

    done = _results.load(out_dir(args), "matched") or {}
    for dim in found_dims(args):
        if str(dim) in done:
            continue
        # through the loader, so the final stage's training (which the baselines use) takes the width too
        recipe = recipe_for(args, 0, f"train.embedding_dim={dim}")
        assert recipe.final_train.embedding_dim == dim
        data = api.prepare_data(recipe)
        rows = {}
        for s in range(2):
            for r in train_all(quiet(recipe, s), data, [("baseline", b, b) for b in ("dlrm", "dcnv2")], args.workers):
                rows.setdefault(r["label"], []).append(r)
        done[str(dim)] = rows
        _results.save(out_dir(args), "matched", done)
    return done


def search_fte(search: dict) -> float:
    """The search run's cost without baselines: warm-up + search + its own final trainings."""
    f = search["compute"]["fte"]
    return f["total"] - f.get("baselines", 0.0)


def part_random(args, seed: int, search: dict) -> dict:
    from ctrnas import api
    from ctrnas.pipeline.study import sample_archs

    name = f"random-{seed}"
    if (done := _results.load(out_dir(args), name)) is not None:
        return done
    recipe = recipe_for(args, seed)
    data = api.prepare_data(recipe)
    n = max(1, math.floor(search_fte(search) + 1e-9))
    archs = sample_archs(dataclasses.replace(recipe, seed=recipe.seed + 1000), n)
    models = train_all(quiet(recipe, 0), data, [("arch", a, a.key()) for a in archs], args.workers)
    out = {"n": n, "fte": float(n), "models": models, "best": min(models, key=lambda r: r["val"])}
    _results.save(out_dir(args), name, out)
    return out


def pair_margins(mean: dict, std: dict, found: float, found_std: float | None) -> list[tuple[str, float, float]]:
    """(baseline, its mean minus the found mean, the pair's seed noise) for every baseline.

    The pair's noise is sqrt((sd_found^2 + sd_baseline^2) / 2): with two training seeds each, the standard
    error of the difference of the two means, so "margin > 2x noise" is a two-sigma test per comparison. A
    model with one seed (no sd) is taken to have the other's sd s, and its mean is one draw:
    sqrt(s^2 / 2 + s^2).
    """
    out = []
    for k, m in mean.items():
        a, b = found_std, std.get(k)
        if a is not None and b is not None:
            noise = math.sqrt((a * a + b * b) / 2)
        else:
            s = a if a is not None else b
            noise = 0.0 if s is None else s * math.sqrt(1.5)
        out.append((k, m - found, noise))
    return out


def _f(x, d=5):
    return "-" if x is None else f"{x:.{d}f}"


def report(args) -> str:
    o = out_dir(args)
    base = _results.load(o, "baselines")
    searches = [(s, _results.load(o, f"search-{s}"), _results.load(o, f"random-{s}")) for s in range(args.seeds)]
    searches = [t for t in searches if t[1] is not None]
    if base is None or not searches:
        return "(no results yet)"
    bayes = base["bayes"] or searches[0][1]["bayes"]
    mean = {k: statistics.fmean(r["test"] for r in v) for k, v in base["models"].items()}
    std = {k: statistics.stdev([r["test"] for r in v]) for k, v in base["models"].items() if len(v) > 1}
    for s, srch, _ in searches:
        if srch["found_seed1"]:
            std[f"found-{s}"] = statistics.stdev([srch["best"]["test_logloss"], srch["found_seed1"]["test"]])
    # seed noise: the pooled (root mean square) std over two training seeds of every model here
    noise = math.sqrt(statistics.fmean(v * v for v in std.values())) if std else 0.0
    lr = mean["lr"]
    best_base = min((k for k in mean), key=mean.get)

    def gap(x):
        return "-" if bayes is None else f"{100 * (lr - x) / (lr - bayes):.1f}%"

    lines = [f"Synthetic Criteo profile, {args.rows:,} rows; recipe `{args.recipe}` (multi-fidelity evolution over "
             "ctrnas-small seeded with dlrm-like / dcnv2-like, top-k retrained), final-stage training for every "
             f"model. {args.machine}", "",
             "| model | test log loss (train seed 0) | seed 1 | gap to Bayes closed | FTE |", "|---|---|---|---|---|",
             f"| Bayes optimum (click model) | {_f(bayes)} | | 100% | |"]
    for k in BASELINES:
        v = base["models"].get(k, [])
        lines.append(f"| {k} | {_f(v[0]['test'] if v else None)} | {_f(v[1]['test'] if len(v) > 1 else None)} "
                     f"| {gap(mean[k]) if k in mean else '-'} | 1 |")
    verdicts = []
    for s, srch, rnd in searches:
        s0 = srch["best"]["test_logloss"]
        s1 = srch["found_seed1"]["test"] if srch["found_seed1"] else None
        found = statistics.fmean([s0] + ([s1] if s1 is not None else []))  # mean over training seeds
        fte = search_fte(srch)
        lines.append(f"| **found, search seed {s}** ({srch['best']['label']}) | {_f(s0)} | {_f(s1)} | "
                     f"{gap(found)} | {fte:.2f} |")
        if rnd:
            lines.append(f"| random search seed {s}, best val of {rnd['n']} | {_f(rnd['best']['test'])} | | "
                         f"{gap(rnd['best']['test'])} | {rnd['fte']:.0f} |")
        margin = min(mean[k] for k in mean) - found
        pairs = pair_margins(mean, std, found, std.get(f"found-{s}"))
        closest = min(pairs, key=lambda p: p[1] - 2 * p[2])
        verdicts.append(f"search seed {s}: found {_f(found)} (mean of its training seeds); per pair (the noise "
                        f"of the two models compared): closest {closest[0]} {_f(mean[closest[0]])}, margin "
                        f"{closest[1]:+.5f} vs 2x noise {2 * closest[2]:.5f} -> "
                        f"{'met' if all(m > 2 * n for _, m, n in pairs) else 'not met'} for every baseline; "
                        f"pooled over all models: best baseline {best_base} {_f(mean[best_base])}, margin "
                        f"{margin:+.5f} vs 2x noise {2 * noise:.5f} -> {'met' if margin > 2 * noise else 'not met'}; "
                        f"vs random search "
                        f"{_f(rnd['best']['test']) if rnd else '-'} (training seed 0, as the found {_f(s0)}) -> "
                        f"{'met' if rnd and s0 < rnd['best']['test'] else 'not met'}; {fte:.2f} FTE "
                        f"({'<=' if fte <= 12 else '>'} 12); wall {srch['seconds']:.0f} s")
    matched = _results.load(o, "matched") or {}
    for dim, rows in sorted(matched.items(), key=lambda kv: int(kv[0])):
        for k, v in rows.items():
            lines.append(f"| {k} at embedding dim {dim} (not a baseline: the found model's table width) | "
                         f"{_f(v[0]['test'])} | {_f(v[1]['test'] if len(v) > 1 else None)} | "
                         f"{gap(statistics.fmean(r['test'] for r in v))} | 1 |")
    lines += ["", f"Seed noise: the pooled std over two training seeds of every model above = {noise:.5f} "
              f"(largest single std: {max(std, key=std.get)} {max(std.values()):.5f}).", ""]
    lines += [f"- {v}" for v in verdicts]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seeds", type=int, default=2, help="search seeds")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--recipe", default="recipes/synthetic.yaml")
    ap.add_argument("--data", default=None, help="dataset folder (default out/data-<rows>k; made if missing)")
    ap.add_argument("--parts", default="baselines,search,random,matched")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe overrides")
    ap.add_argument("--out", default=None)
    ap.add_argument("--machine", default="")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--section", default=None, help="also write the section here (e.g. benchmarks/sections/mfsearch.md)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if not args.report_only:
        if "baselines" in parts:
            part_baselines(args)
        for s in range(args.seeds):
            if "search" in parts or "random" in parts:
                srch = part_search(args, s)
                if "random" in parts:
                    part_random(args, s, srch)
        if "matched" in parts:
            part_matched(args)
    text = report(args)
    print(text)
    if args.section:
        _results._atomic_write(Path(args.section), text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
