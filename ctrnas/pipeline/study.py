"""`ctrnas study ranking`: how well each proxy ranks CTR subnets after each warm-up (SiGeo Table 3, Fig. 2).

N random subnets of the recipe's space are trained from scratch (the final stage's training) and tested;
a supernet is warmed up at each fraction; every proxy scores every subnet on the same k batches after
the warm-up rows (as in a search); Kendall tau and Spearman rho of score vs *negated* test log loss (so
a proxy that ranks well has a positive correlation) come with seeded bootstrap intervals.
Trained results are cached in `trained.json`, so an interrupted study resumes without retraining.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np
from tqdm.auto import tqdm

from ctrnas.files import atomic_write_text
from ctrnas.pipeline.compare import setting_label
from ctrnas.pipeline.data import prepare_data
from ctrnas.pipeline.fitness.build import make_fitness, resource_counters
from ctrnas.pipeline.fitness.scratch import train_from_scratch
from ctrnas.pipeline.results import StudyResult
from ctrnas.pipeline.stages import new_supernet, warmup_config_for, warmup_stage
from ctrnas.recipe import Recipe
from ctrnas.space import get_space


def sample_archs(recipe: Recipe, n: int, max_tries: int = 100) -> list:
    """`n` distinct random architectures (when the space has that many), from the recipe seed."""
    space = get_space(recipe.space)
    rng = np.random.default_rng([recipe.seed, 0x5eed])
    out, seen, tries = [], set(), 0
    while len(out) < n and tries < n * max_tries:
        tries += 1
        a = space.sample(rng)
        if a.key() not in seen:
            seen.add(a.key())
            out.append(a)
    return out


def _cached_how(entry: dict, how: dict) -> dict:
    """How a cached model was trained; entries from before a fingerprint key existed get that key's old
    behaviour (no fingerprint at all: kept as is; no `embedding_init`: NASRec's Xavier-normal tables; no
    `dense_init`: NASRec's dense init; training settings added since: their defaults)."""
    from ctrnas.train.config import numeric_settings

    if "how" not in entry:
        return how
    was = {"embedding_init": "nasrec", "dense_init": "nasrec", **entry["how"]}
    return {**was, "train": numeric_settings(was["train"])} if isinstance(was.get("train"), dict) else was


def train_all(recipe, data, archs, supernet, cache_path: Path, progress: bool, workers: int = 1) -> dict[str, dict]:
    """Train every arch not in the cache from scratch (the final stage's training); with `workers` > 1 in
    that many spawned processes, or on the recipe's `execution` backend (`final.training_executor`: same
    results as serial)."""
    from ctrnas.pipeline.fitness.scratch import final_template, job_model
    from ctrnas.pipeline.final.workers import in_workers, training_executor
    from ctrnas.train.config import numeric_settings

    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    quiet = dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(recipe.final_train, progress=False)))
    # a cached result counts only if it was trained the way this recipe trains (entries without the
    # fingerprint predate it and are kept)
    how = {"train": numeric_settings(recipe.final_train),
           "train_rows": recipe.final.train_rows, "layernorm": recipe.final.layernorm,
           "embedding_init": recipe.final.embedding_init, "dense_init": recipe.final.dense_init}
    todo = [a for a in archs if not (a.key() in cache and _cached_how(cache[a.key()], how) == how)]
    todo = list({a.key(): a for a in todo}.values())
    template = final_template(recipe, data, supernet)  # the final stage's models: same tables and LayerNorms

    def keep(arch, val, test, sec) -> None:
        cache[arch.key()] = {"val": val, "test": test, "seconds": sec, "how": how}
        atomic_write_text(cache_path, json.dumps(cache, indent=1))

    bar = tqdm(total=len(todo), desc="train from scratch", unit="model", disable=not progress)
    if not in_workers(recipe, workers) or len(todo) <= 1:
        for a in todo:
            keep(a, *train_from_scratch(job_model(quiet, data, template, ("arch", a)), quiet, data, a.key()))
            bar.update()
    else:
        jobs = [(("arch", a), False, f"study subnet {a.key()}") for a in todo]
        with training_executor(quiet, data, template, workers, len(jobs)) as ex:
            for i, r in ex.imap(jobs, ordered=False):  # cached as each finishes, so a stopped study resumes
                keep(todo[i], r["val"], r["test"], r["seconds"])
                bar.update()
    bar.close()
    return cache


def ranking_study(recipe: Recipe, n_archs: int = 50, fractions: Sequence[float] = (0.0, 0.01, 1.0),
                  proxies: Sequence[str] = ("sigeo", "zico", "params", "naswot", "synflow"),
                  n_boot: int = 1000, progress: bool = True, echo=print, workers: int = 1) -> StudyResult:
    """Train `n_archs` random subnets, score them with `proxies` after each warm-up fraction, correlate.

    A proxy named "oneshot" is the inherited-weight validation log loss (negated, so higher is better).
    `workers` > 1 trains the subnets in that many processes (same results as one).
    """
    from ctrnas.locks import folder_lock, reading
    from ctrnas.pipeline.run import set_threads

    set_threads(recipe)  # as `ctrnas run` does: the serial trainings use the recipe's thread count
    out = recipe.output_dir / "study"
    # one writer per study folder; a reader of the data folder (the data stage inside upgrades it to prepare)
    with folder_lock(out, "study ranking"), reading(recipe.data_dir, "study"):
        return _ranking_study(recipe, out, n_archs, fractions, proxies, n_boot, progress, echo, workers)


def _ranking_study(recipe, out, n_archs, fractions, proxies, n_boot, progress, echo, workers) -> StudyResult:
    from ctrnas.search import plots
    from ctrnas.search.fitness import candidate_seed
    from ctrnas.search.ranking import feature_correlations, rank_correlations
    from ctrnas.space.features import feature_matrix

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    data = prepare_data(recipe)
    seconds["data"] = time.perf_counter() - t0
    archs = sample_archs(recipe, n_archs)
    t0 = time.perf_counter()
    trained = train_all(recipe, data, archs, new_supernet(recipe, data), out / "trained.json", progress, workers)
    seconds["train"] = time.perf_counter() - t0
    test_loss = [trained[a.key()]["test"].get("logloss", math.nan) for a in archs]
    neg_loss = [-x for x in test_loss]

    scores: dict[str, dict[str, list[float]]] = {}
    rows = []
    for f in fractions:
        label = setting_label(float(f))
        rf = warmup_config_for(recipe, float(f))
        t0 = time.perf_counter()
        warm = warmup_stage(rf, data, out / f"warmup-{float(f):g}")
        seconds[f"warmup {label}"] = warm.seconds
        scores[label] = {}
        for name in proxies:
            t0 = time.perf_counter()
            kind = "oneshot" if name == "oneshot" else "proxy"
            fit, _ = make_fitness(rf, data, warm.supernet, kind, proxy=None if kind == "oneshot" else name,
                                  proxy_options=recipe.proxy.options if name == recipe.proxy.name else {})
            vals = []
            for i, a in enumerate(tqdm(archs, desc=f"{name} @ {label}", unit="arch", disable=not progress)):
                v = fit(a, candidate_seed(recipe.seed, i)).value
                vals.append(-v if kind == "oneshot" else v)
            seconds[f"score {name} {label}"] = time.perf_counter() - t0
            scores[label][name] = vals
            corr = rank_correlations(vals, neg_loss, n_boot=n_boot, seed=recipe.seed)
            k, s = corr["kendall"], corr["spearman"]
            rows.append({"fraction": float(f), "setting": label, "proxy": name, "kendall": k.estimate,
                         "kendall_low": k.low, "kendall_high": k.high, "spearman": s.estimate,
                         "spearman_low": s.low, "spearman_high": s.high, "n": k.n})
            plots.plot_score_vs_metric(vals, test_loss, out / "plots" / f"{name}-{float(f):g}.png",
                                       xlabel=f"{name} score", ylabel="test log loss (from scratch)",
                                       title=f"{name} after warm-up {float(f):g}")
    targets = {"test logloss": test_loss, **{f"{p}@{lab}": scores[lab][p] for lab in scores for p in scores[lab]}}
    names, matrix = feature_matrix(archs)
    features = feature_correlations(names, matrix, targets)
    _write(out, recipe, archs, trained, scores, rows, resource_counters(recipe, data)[0], (names, matrix, features))
    if echo is not None:
        # on the console, only the scores at the recipe's own warm-up (summary.md has every setting)
        own = setting_label(float(recipe.warmup.fraction))
        echo("\n" + correlation_table(rows) + "\n\n" + feature_table(features, top=5, setting=own))
    return StudyResult(archs, test_loss, scores, rows, out, seconds, features)


def _fmt_ci(est: float, lo: float, hi: float) -> str:
    if not math.isfinite(est):
        return "-"
    ci = f" [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) else ""
    return f"{est:.3f}{ci}"


def correlation_table(rows: list[dict]) -> str:
    lines = ["| warm-up | proxy | Kendall τ [95% CI] | Spearman ρ [95% CI] | n |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['fraction']:g} | {r['proxy']} | {_fmt_ci(r['kendall'], r['kendall_low'], r['kendall_high'])}"
                     f" | {_fmt_ci(r['spearman'], r['spearman_low'], r['spearman_high'])} | {r['n']} |")
    return "\n".join(lines)


def feature_table(features: list[dict], top: int = 8, setting: str | None = None) -> str:
    """The `top` architecture features by |rho| with the test log loss, with each proxy's rho beside it
    (only the scores after warm-up `setting`, e.g. "sub-one-shot-0.01", when the study has that setting)."""
    if setting is not None and any(r["target"].endswith(f"@{setting}") for r in features):
        features = [r for r in features if r["target"] == "test logloss" or r["target"].endswith(f"@{setting}")]
    loss = sorted((r for r in features if r["target"] == "test logloss" and math.isfinite(r["spearman"])),
                  key=lambda r: -abs(r["spearman"]))[:top]
    cols = list(dict.fromkeys(r["target"] for r in features if r["target"] != "test logloss"))
    by = {(r["feature"], r["target"]): r["spearman"] for r in features}
    lines = ["What the trained loss and the scores follow (Spearman rho over the subnets; rho > 0 with the loss: "
             "the feature makes models worse, so a proxy that ranks well has the opposite sign there):", "",
             "| feature | test logloss (p) | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for r in loss:
        vals = " | ".join(f"{by.get((r['feature'], c), math.nan):+.2f}" for c in cols)
        lines.append(f"| {r['feature']} | {r['spearman']:+.2f} ({r['p']:.3f}) | {vals} |")
    return "\n".join(lines)


def _write(out: Path, recipe, archs, trained, scores, rows, count_params, feats) -> None:
    cols = [f"{p}@{lab}" for lab in scores for p in scores[lab]]
    with open(out / "scores.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arch_key", "params", "val_logloss", "test_logloss", *cols, "arch"])
        for i, a in enumerate(archs):
            t = trained[a.key()]
            w.writerow([a.key(), count_params(a), t["val"].get("logloss"), t["test"].get("logloss"),
                        *[scores[lab][p][i] for lab in scores for p in scores[lab]], json.dumps(a.to_json())])
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()} for r in rows]
    atomic_write_text(out / "correlations.json", json.dumps(clean, indent=1))
    names, matrix, features = feats
    with open(out / "features.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arch_key", *names])
        w.writerows([a.key(), *m] for a, m in zip(archs, matrix))
    with open(out / "feature_correlations.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["feature", "target", "spearman", "p", "n"])
        w.writeheader()
        w.writerows(features)
    text = (f"# Proxy-ranking study `{recipe.name}`\n\n{len(archs)} random subnets of `{recipe.space.name}` trained "
            "from scratch; correlation of each proxy with the negated test log loss (higher = ranks better).\n\n"
            + correlation_table(rows) + "\n\n" + feature_table(features)
            + "\n\nScatter plots: `plots/<proxy>-<fraction>.png`; data: `scores.csv`, `features.csv`, "
            "`feature_correlations.csv`.\n")
    atomic_write_text(out / "summary.md", text)
