"""Search benchmark on the synthetic Criteo profile (>= 1M rows), for benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/search.py                        # all parts, 1M rows (hours on 2 CPU cores)
    .venv/bin/python benchmarks/search.py --parts found --rows 1000000
    .venv/bin/python benchmarks/search.py --report-only          # rebuild the section from saved JSON

Parts (each saves benchmarks/out/search/<part>.json; re-running resumes: data, warm-ups, searches and
trained study models are reused):
  found     the found model's test log loss next to the Bayes optimum, every baseline, and random search with
            the same number of trained models (top_k random archs trained like the top-k); seed-to-seed noise
            from retraining the found model and LR with extra seeds; share of the LR-to-Bayes gap closed.
  settings  sub-one-shot (0.01) vs one-shot (1.0) [and zero-shot (0)]: total time and quality.
  data      only the dataset (run it first when the parts below run as parallel processes)
  ranking   the proxy-ranking study with N >= 50 subnets for sigeo, zico, params, naswot, synflow at 0, 0.01, 1.0.
The summary goes to stdout and to benchmarks/sections/search.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "benchmarks/out/search"

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)
SECTION = ROOT / "benchmarks/sections/search.md"


def base_recipe(args):
    from ctrnas.recipe import load_recipe

    return load_recipe(ROOT / "recipes/synthetic-nasrec.yaml", [
        f"name=bench-{args.rows // 1000}k", f"output={OUT}/{{name}}", f"data.path={OUT}/data-{args.rows // 1000}k",
        f"data.synthetic.rows={args.rows}", "train.progress=false", f"threads={args.threads}",
        f"final.train_rows={'null' if args.train_rows is None else args.train_rows}",
        f"final.baselines=[{args.baselines}]", f"search.top_k={args.top_k}", *args.set])


def _save(name: str, obj) -> None:
    _results.save(OUT, name, obj)


def _load(name: str):
    return _results.load(OUT, name)


def part_found(args) -> dict:
    """The full pipeline, random search with the same number of trained models, and seed noise."""
    from ctrnas import api
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.pipeline.final.workers import training_executor
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import sample_archs

    recipe = base_recipe(args)
    t0 = time.perf_counter()
    run = api.run(recipe, progress=False)
    out = {"run_seconds": time.perf_counter() - t0, "timings": run.timings, "metrics": run.metrics}
    data = run.data
    # random search, same number of from-scratch trainings as the top-k retrain
    rnd = dataclasses.replace(recipe, seed=recipe.seed + 1000)
    supernet = final_template(recipe, data, new_supernet(recipe, data))  # the final stage's models
    quiet = dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(recipe.final_train, progress=False)))
    archs = sample_archs(rnd, recipe.top_k)
    with training_executor(quiet, data, supernet, args.workers) as ex:  # same numbers as one process
        results = ex.map([(("arch", a), False, f"random subnet {a.key()}") for a in archs])
    trained = [{"arch_key": a.key(), "val": r["val"], "test": r["test"], "seconds": r["seconds"]}
               for a, r in zip(archs, results)]
    best_rnd = min(trained, key=lambda r: r["val"]["logloss"])
    out["random_search"] = {"models": trained, "best": best_rnd}
    # seed-to-seed noise: the found architecture and LR retrained with more training seeds
    noise = {"found": [run.final.best.test["logloss"]], "lr": []}
    for s in range(1, args.noise_seeds + 1):
        r_s = dataclasses.replace(quiet, final=dataclasses.replace(
            quiet.final, train=dataclasses.replace(quiet.final_train, seed=s)))
        with training_executor(r_s, data, supernet, args.workers) as ex:
            found, lr = ex.map([(("arch", run.final.best.arch), False, "the found arch"),
                                (("baseline", "lr"), False, "baseline lr")])
            noise["found"].append(found["test"]["logloss"])
            noise["lr"].append(lr["test"]["logloss"])
    lr0 = next((b["test_logloss"] for b in run.metrics["baselines"] if b["label"] == "lr"), None)
    if lr0 is not None:
        noise["lr"].insert(0, lr0)
    out["noise"] = noise
    _save("found", out)
    return out


def part_settings(args) -> dict:
    """The recipe at the other warm-up fractions; its own fraction is the found part's run (see
    `_found_setting_row`), so it is not run twice."""
    from ctrnas import api

    recipe = base_recipe(args)
    fractions = [float(x) for x in args.fractions.split(",") if float(x) != recipe.warmup.fraction]
    recipe = dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, baselines=()))
    out = {"table": api.compare(recipe, fractions, progress=False).table if fractions else []}
    _save("settings", out)
    return out


def _found_setting_row(args) -> dict | None:
    """The found part's run as a row of the settings table (its baselines' training time left out)."""
    from ctrnas.pipeline.compare import STAGES

    found = _load("found")
    if not found:
        return None
    m, frac = found["metrics"], base_recipe(args).warmup.fraction
    t = dict(m["timings"])
    t["final"] = t.get("final", 0.0) - sum(b["train_seconds"] for b in m["baselines"])
    t["total"] = sum(t.get(k, 0.0) for k in ("data", "warmup", "search", "final"))
    return {"setting": f"sub-one-shot-{frac:g}", "fraction": frac, "fitness": m["setting"]["fitness_name"],
            "test_logloss": m["best"]["test_logloss"], "test_auc": m["best"]["test_auc"],
            "val_logloss": m["best"]["val_logloss"], "arch_key": m["best"]["arch_key"],
            "evaluations": m["search"]["evaluations"], **{f"{k}_s": t.get(k, 0.0) for k in STAGES}}


def part_data(args) -> dict:
    """Only the dataset (run this first when the other parts are started as parallel processes)."""
    from ctrnas import api

    data = api.prepare_data(base_recipe(args))
    return {"path": str(data.path), "rows": {s: v["rows"] for s, v in data.meta["splits"].items()}}


def part_ranking(args) -> dict:
    from ctrnas import api
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import train_all, sample_archs

    recipe = base_recipe(args)
    recipe = dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, train_rows=args.study_train_rows))
    study_dir = recipe.output_dir / "study"
    study_dir.mkdir(parents=True, exist_ok=True)
    data = api.prepare_data(recipe)
    # the from-scratch trainings first (cached in trained.json; the study below reuses them) ...
    train_all(recipe, data, sample_archs(recipe, args.archs), new_supernet(recipe, data),
               study_dir / "trained.json", progress=True, workers=args.workers)
    if args.train_only:
        return {}
    # ... then reuse the settings part's warm-ups (same recipe, same fingerprint) instead of repeating a
    # full epoch, waiting up to --wait-warmups seconds for a settings process running beside this one
    deadline = time.time() + args.wait_warmups
    for f, label in ((0.01, "sub-one-shot-0.01"), (1.0, "one-shot")):
        src, dst = recipe.output_dir / "compare" / label / "warmup", study_dir / f"warmup-{f:g}"
        while not (src / "warmup.json").exists() and time.time() < deadline:
            time.sleep(30)
        if (src / "warmup.json").exists() and not dst.exists():
            os.symlink(src.resolve(), dst)
    res = api.ranking_study(recipe, args.archs, [0.0, 0.01, 1.0], args.proxies.split(","), progress=False)
    out = {"n": len(res.archs), "correlations": res.correlations, "seconds": res.seconds,
           "train_rows": args.study_train_rows}
    _save("ranking", out)
    return out


def _f(x, d=5):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{d}f}"


def _truth_text(args) -> str:
    """How the study's subnets were trained, and how well a second training seed reproduces their ranking
    (the ceiling for any proxy), when `study-seed1/trained.json` exists (made with
    `--set final.train.seed=1 --train-only` and copied there)."""
    from scipy import stats

    run = OUT / f"bench-{args.rows // 1000}k"
    path = run / "study" / "trained.json"
    if not path.exists():
        return ""
    a = json.loads(path.read_text())
    how = next(iter(a.values())).get("how")
    loss = sorted(v["test"]["logloss"] for v in a.values())
    t, rows = how["train"], how["train_rows"]
    text = (f"Truth: each subnet trained as the final stage trains: {t['epochs']} epoch(s)"
            f"{', ending on the better val epoch' if t['restore_best'] else ''}, lr {t['lr']}, batch "
            f"{t['batch_size']}, training seed {t['seed']}, {'all' if rows is None else format(rows, ',')} training "
            f"rows, LayerNorm {'off' if how['layernorm'] is False else 'as the space'}, embedding init "
            f"{how.get('embedding_init', 'nasrec')}; test log loss {loss[0]:.4f} (best) / "
            f"{statistics.median(loss):.4f} (median) / {loss[-1]:.4f} (worst).")
    b_path = run / "study-seed1" / "trained.json"
    if b_path.exists():
        b = json.loads(b_path.read_text())
        keys = [k for k in a if k in b]
        x, y = [a[k]["test"]["logloss"] for k in keys], [b[k]["test"]["logloss"] for k in keys]
        if len(keys) > 2:
            text += (f" Reproducibility of this truth: the same {len(keys)} subnets retrained with training seed 1 "
                     f"rank alike with Kendall τ {stats.kendalltau(x, y).statistic:.2f}, Spearman ρ "
                     f"{stats.spearmanr(x, y).statistic:.2f} (the ceiling for any proxy).")
    return text + "\n"


def _paired_text(args) -> str:
    """The goal's comparisons as paired bootstrap differences of Spearman ρ (the same subnets resampled for
    both sides): SiGeo after each warm-up against itself at 0, and SiGeo against ZiCo at 0.01."""
    import csv

    from ctrnas.vision.stats import spearman_difference

    path = OUT / f"bench-{args.rows // 1000}k" / "study" / "scores.csv"
    if not path.exists():
        return ""
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    truth = [-float(r["test_logloss"]) for r in rows]
    col = lambda c: [float(r[c]) for r in rows]  # noqa: E731
    pairs = [("sigeo@sub-one-shot-0.01", "sigeo@zero-shot"), ("sigeo@one-shot", "sigeo@zero-shot"),
             ("sigeo@sub-one-shot-0.01", "zico@sub-one-shot-0.01")]
    out = []
    for a, b in pairs:
        if a in rows[0] and b in rows[0]:
            d, (lo, hi), share = spearman_difference(col(a), col(b), truth)
            out.append(f"ρ({a}) − ρ({b}) = {d:+.3f} [{lo:+.3f}, {hi:+.3f}] ({share:.0%} of resamples > 0)")
    return ("Paired bootstrap differences (1000 resamples of the subnets): " + "; ".join(out) + ".\n") if out else ""


def _features_text(args) -> str:
    """What the trained loss and the scores at warm-up 0.01 follow, from the study's attribution table."""
    import csv

    from ctrnas.pipeline.study import feature_table

    path = OUT / f"bench-{args.rows // 1000}k" / "study" / "feature_correlations.csv"
    if not path.exists():
        return ""
    with open(path) as fh:
        rows = [{**r, "spearman": float(r["spearman"]), "p": float(r["p"])} for r in csv.DictReader(fh)]
    return feature_table(rows, top=6, setting="sub-one-shot-0.01") + "\n"


def report(args) -> str:
    lines = ["## Search: found model, settings, proxy ranking", "",
             f"Synthetic Criteo profile ({args.rows:,} rows, seed 0), recipe `recipes/synthetic-nasrec.yaml` "
             f"with the benchmark overrides in `benchmarks/search.py`; {platform.machine()}, "
             f"{os.cpu_count()} CPU cores, torch threads {args.threads}. {args.machine} Each run's "
             "`metrics.json` also records CPU seconds per stage (`cpu_seconds`).", ""]
    found = _load("found")
    partial = OUT / f"bench-{args.rows // 1000}k" / "metrics.json"
    if not found and partial.exists():  # the pipeline finished, random search / noise not yet
        m = json.loads(partial.read_text())
        found = {"metrics": m, "timings": m["timings"], "run_seconds": m["timings"].get("total", 0.0)}
    if found:
        m = found["metrics"]
        bayes = m.get("bayes_test_logloss")
        best = m["best"]["test_logloss"]
        lines += ["### (1) Found model vs Bayes optimum, baselines, random search", "",
                  "| model | test log loss | test AUC |", "|---|---|---|",
                  f"| Bayes optimum (click model) | {_f(bayes)} | - |",
                  f"| **found (evolution + SiGeo, best of top-{len(m['candidates'])})** | {_f(best)} | "
                  f"{_f(m['best']['test_auc'])} |"]
        if "random_search" in found:
            rb = found["random_search"]["best"]
            lines.append(f"| random search, best of {len(found['random_search']['models'])} trained | "
                         f"{_f(rb['test']['logloss'])} | {_f(rb['test']['auc'])} |")
        for b in m["baselines"]:
            lines.append(f"| {b['label']} | {_f(b['test_logloss'])} | {_f(b['test_auc'])} |")
        if "noise" in found:
            n = found["noise"]
            sd_f = statistics.stdev(n["found"]) if len(n["found"]) > 1 else None
            sd_l = statistics.stdev(n["lr"]) if len(n["lr"]) > 1 else None
            lines += ["", f"Seed-to-seed noise (std of test log loss over {len(n['found'])} training seeds): "
                          f"found {_f(sd_f)}, LR {_f(sd_l)}."]
        else:
            lines += ["", "Random search and the seed-noise retrainings had not finished when this was written."]
        lines += [
                  f"Share of the LR-to-Bayes gap closed by the found model: "
                  f"{'-' if m.get('gap_closed_vs_lr') is None else format(m['gap_closed_vs_lr'], '.1%')} "
                  "(goal: at least 50%).",
                  f"Pipeline wall time: {found['run_seconds']:.0f} s "
                  f"({', '.join(f'{k} {v:.0f} s' for k, v in found['timings'].items())}).", ""]
    settings = _load("settings")
    if settings:
        from ctrnas.pipeline.compare import markdown_table

        rows = list(settings["table"])
        own = _found_setting_row(args)
        if own is not None and all(r["setting"] != own["setting"] for r in rows):
            rows.append(own)
        rows.sort(key=lambda r: r["fraction"])
        t = {r["setting"]: r for r in rows}
        lines += ["### (2) Sub-one-shot vs one-shot", "",
                  "The sub-one-shot row is the run of part (1) (same recipe; its baselines' training time "
                  "is left out).", "", markdown_table(rows), ""]
        if "sub-one-shot-0.01" in t and "one-shot" in t:
            ratio = t["sub-one-shot-0.01"]["total_s"] / t["one-shot"]["total_s"]
            dq = t["sub-one-shot-0.01"]["test_logloss"] - t["one-shot"]["test_logloss"]
            a, b = t["sub-one-shot-0.01"], t["one-shot"]
            srch = (a["warmup_s"] + a["search_s"]) / max(b["warmup_s"] + b["search_s"], 1e-9)
            lines += [f"Sub-one-shot total time = {ratio:.0%} of one-shot (goal: <= 40%); warm-up + search "
                      f"alone (the part the settings differ in; the final stage trains the same number of "
                      f"models in both) = {srch:.0%}. Test log loss difference {dq:+.5f} (sub-one-shot minus "
                      f"one-shot).", ""]
    ranking = _load("ranking")
    if ranking:
        from ctrnas.pipeline.study import correlation_table

        rows = ranking.get("train_rows")
        lines += [f"### (3) Proxy ranking, N = {ranking['n']} random subnets trained from scratch "
                  f"({'all' if rows is None else format(rows, ',')} training rows each)", "",
                  _truth_text(args),
                  "Correlation of each proxy with the negated test log loss (higher = ranks better), 95% "
                  "bootstrap intervals.", "", correlation_table(ranking["correlations"]), "",
                  _paired_text(args), _features_text(args)]
    if not (found or settings or ranking):
        lines.append("No part has finished yet.")
    text = "\n".join(lines) + "\n"
    SECTION.parent.mkdir(parents=True, exist_ok=True)
    SECTION.write_text(text)
    return text


def main() -> int:
    global OUT, SECTION
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="found,settings,ranking")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--train-rows", type=int, default=None,
                    help="rows per from-scratch training of the found part (default: the whole train split)")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--baselines", default="lr,fm,dlrm,deepfm,dcnv2")
    ap.add_argument("--noise-seeds", type=int, default=2)
    ap.add_argument("--fractions", default="0,0.01,1.0")
    ap.add_argument("--archs", type=int, default=50)
    ap.add_argument("--study-train-rows", type=int, default=None,
                    help="rows per study model training (default all, like the final stage)")
    ap.add_argument("--workers", type=int, default=1, help="models trained in N processes at once (study subnets, random search, seed noise)")
    ap.add_argument("--train-only", action="store_true",
                    help="ranking part: only train the study models (e.g. on a many-core machine), no scoring")
    ap.add_argument("--wait-warmups", type=float, default=0.0,
                    help="ranking: seconds to wait for the settings part's warm-ups to reuse")
    ap.add_argument("--proxies", default="sigeo,zico,params,naswot,synflow")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe overrides")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads; 1 because on shared cores OpenMP spinning costs far more than it gains")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--machine", default="", help="a sentence on the load during the runs, for the report")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/out/search)")
    ap.add_argument("--section", default=None, help="markdown section written at the end")
    args = ap.parse_args()
    OUT, SECTION = Path(args.out or OUT), Path(args.section or SECTION)

    import torch

    torch.set_num_threads(args.threads)
    if not args.report_only:
        for part in args.parts.split(","):
            t0 = time.perf_counter()
            {"data": part_data, "found": part_found, "settings": part_settings,
             "ranking": part_ranking}[part](args)
            print(f"part {part} done in {time.perf_counter() - t0:.0f} s", flush=True)
    print(report(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
