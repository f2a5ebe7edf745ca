"""Structure suite: per synthetic structure profile, the seven baselines, the search and random
search, so a search is judged on adapting to the data rather than on one click model.

    .venv/bin/python benchmarks/suite.py                                   # 1M rows, every profile and method
    .venv/bin/python benchmarks/suite.py --rows 300000 --methods baselines --seeds 2
    .venv/bin/python benchmarks/suite.py --rows 300000 --report-only       # rebuild the section

Profiles (PROFILES: a shape and a structure, `ctrnas prepare synthetic --profile SHAPE --structure NAME`):
each is built so another family should win (datasets/README.md says which does, as measured).
Methods:
  baselines  LR, FM, DLRM, DeepFM, xDeepFM, AutoInt+, DCN-v2 at training seeds 0..--seeds-1, trained with
             the demo recipe's final-stage settings (its `final.protocol`: until val stops improving, or NASRec's
             fixed epochs ending on the better val epoch).
  search     `recipes/synthetic-prefix.yaml` (the demo's search, its rungs prefixes of the final training) on
             the profile's data at search seeds 0..--seeds-1 through `ctrnas.api.run`, baselines left out; its
             FTE is the run's own (warm-up + search + top-k). A search is cached by its resolved recipe.
  (--own-seeds N) the search's own arch trained again at training seeds 1..N-1, as its final stage trains it,
             so the goal can also read its mean over the baselines' training seeds (1 FTE each, not counted).
  planted    (planted profiles) the planted arch itself (meta.json's) trained from scratch like the baselines,
             at the same training seeds: the oracle of the profile, its best model trained as everything else.
  random     random search at the search's FTE: floor(FTE) random subnets of the recipe's space, each trained
             like the final stage (1 FTE each), the best by val log loss is its pick (random search at equal
             compute; the demo recipe's `search.strategy=random` scores with the proxy, not the rungs).
Every training is cached under --out by (profile, model, seed, settings), so a stopped run resumes. The
section goes to benchmarks/sections/suite.md (or --section; a report that lacks a part the section shows goes to
<out>/section.md instead); `python benchmarks/_results.py` assembles it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
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

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)

# label -> (shape, structure)
PROFILES = {
    "criteo": ("criteo", "default"),
    "avazu-pairwise": ("avazu", "pairwise"),
    "criteo-crosses": ("criteo", "crosses"),
    "criteo-dense-gates": ("criteo", "dense-gates"),
    "kdd2012-deep": ("kdd2012", "deep"),
    "kdd2012-sparse-noise": ("kdd2012", "sparse-noise"),
    "kdd2012-dense-gates": ("kdd2012", "dense-gates"),
    "kdd2012-dense-by-category": ("kdd2012", "dense-by-category"),
    "kdd2012-crosses": ("kdd2012", "crosses"),
    # the logit is an arch of the search space with random weights (datasets/README.md, "Planted structures")
    "kdd2012-planted": ("kdd2012", "planted:0"),
    "kdd2012-planted-deep": ("kdd2012", "planted-deep:1"),
}
BASELINES = ("lr", "fm", "dlrm", "deepfm", "xdeepfm", "autoint+", "dcnv2")
# LR again at 2.5x and 8x the shared learning rate: its one-wide tables want a far larger step, and
# "gap closed" reads the LR best on validation (`lr_reference`), as a run's metrics do
LR_RATES = ("lr*2.5", "lr*8")
TRAINED = BASELINES + LR_RATES  # the default; --baselines also takes NAME*S for any of BASELINES ("fm*2.5")


def known_baseline(name: str) -> bool:
    """Whether --baselines may train `name`: one of BASELINES, or one at S times the shared lr ("fm*2.5")."""
    from ctrnas.errors import RecipeError
    from ctrnas.train.baseline_names import split_lr_scale

    try:
        return split_lr_scale(name)[0] in BASELINES
    except RecipeError:
        return False
METHODS = ("baselines", "search", "random", "planted")
NOTES = _results.notes_marker("suite.py")
RECIPE = "recipes/synthetic-prefix.yaml"  # the demo's search with rungs sized as shares of the final training


def _key(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def run_key(args, profile: str) -> str:
    """The key of a search (and its random control) on `profile`: the rows, the overrides, and the recipe as
    resolved (its content, not its path: an edited recipe is another search), less the per-seed parts, the
    worker counts (the same numbers at any) and the folders (a moved --out keeps its results)."""
    from ctrnas.config import to_dict

    recipe = to_dict(recipe_for(args, profile))
    for k in ("name", "output", "seed", "source", "final_train_keys"):
        recipe.pop(k, None)
    recipe["search"].pop("workers", None)
    recipe["final"].pop("workers", None)
    recipe["data"].pop("path", None)  # where --out puts the data: the rows and settings say what it is
    return _key([args.rows, args.set, profile, _set_only(_without_off_options(recipe))])


def _without_off_options(recipe: dict) -> dict:
    """`recipe` without options that are switched off, so a search is the same search before and after such an
    option was added to the recipe schema (the field probe changed every search key otherwise)."""
    search = recipe.get("search", {})
    if isinstance(search.get("field_probe"), dict) and not search["field_probe"].get("fraction"):
        search = {k: v for k, v in search.items() if k != "field_probe"}
        recipe = {**recipe, "search": search}
    evolution = search.get("evolution")
    # options added later, at their off values: local_sweep, lineages, lines_by_predictor, widths_only
    off = {"local_sweep": False, "lineages": 0, "lines_by_predictor": False, "widths_only": False}
    def is_off(k, v) -> bool:
        return k in off and type(v) is type(off[k]) and v == off[k]

    if isinstance(evolution, dict) and any(is_off(k, v) for k, v in evolution.items()):
        search = {**search, "evolution": {k: v for k, v in evolution.items() if not is_off(k, v)}}
        recipe = {**recipe, "search": search}
    multifidelity = search.get("multifidelity")  # the rungs' `promotion`, "auto" before it
    if isinstance(multifidelity, dict) and multifidelity.get("promotion") == "auto":
        search = {**search, "multifidelity": {k: v for k, v in multifidelity.items() if k != "promotion"}}
        recipe = {**recipe, "search": search}
    predictor = search.get("predictor")  # the predictor's `relative`
    if isinstance(predictor, dict) and predictor.get("relative") is False:
        recipe = {**recipe, "search": {**search, "predictor": {k: v for k, v in predictor.items()
                                                                if k != "relative"}}}
    space = recipe.get("space")  # the space's `branch_moves`
    if isinstance(space, dict) and space.get("branch_moves") is False:
        recipe = {**recipe, "space": {k: v for k, v in space.items() if k != "branch_moves"}}
    return recipe


def _set_only(obj):
    """`obj` without its None values: a recipe key added later and left unset is the same search as before."""
    if isinstance(obj, dict):
        return {k: _set_only(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_set_only(v) for v in obj]
    return obj


def _variant(args, seed: int = 0) -> str:
    """The folder suffix of runs with overrides: a search (or random control) resumed under other settings would
    be refused or continue another run's trainings, so each set of overrides gets its own folders; with
    --seed-trains a search seed above 0 trains at its own training seed, another run (seed 0 is the same run)."""
    return (f"-{_key(args.set)[:6]}" if args.set else "") + _trains_tag(args, seed).replace("+", "-")


def _trains_tag(args, seed: int) -> str:
    """The mark of a search seed that also moves the training seed (--seed-trains), in keys and folders."""
    return f"+t{seed}" if getattr(args, "seed_trains", False) and seed else ""


def search_key(args, profile: str, seed: int, kind: str = "search") -> str:
    """The cache key of search seed `seed` (kind "search" or "random", whose size follows that search's FTE)."""
    return f"{kind}{_trains_tag(args, seed)}@{seed}:{run_key(args, profile)}"


def own_key(args, profile: str, seed: int, train_seed: int) -> str:
    """The cache key of search seed `seed`'s own arch trained again at `train_seed` (run_own)."""
    return f"own{_trains_tag(args, seed)}@{seed}#{train_seed}:{run_key(args, profile)}"


def other_seeds(result: dict, n: int) -> list[int]:
    """Training seeds 0..n-1 but the one a search result's final stage trained at."""
    return [s for s in range(n) if s != result.get("train_seed", 0)]


def recipe_for(args, profile: str, seed: int = 0):
    """The demo recipe on `profile`'s data (one folder per profile and row count), search seed `seed`."""
    from ctrnas import api

    shape, structure = PROFILES[profile]
    out = Path(args.out)
    # --seed-trains: the warm-up, the rungs and the final stage train at the search seed, so two search seeds
    # are two replicates of the whole run (else they share every training's seed and differ in the search's draws)
    trains = [f"train.seed={seed}", f"final.train.seed={seed}"] if _trains_tag(args, seed) else []
    return api.load_recipe(ROOT / args.recipe, *[
        f"name={profile}-s{seed}{_variant(args, seed)}", f"output={out}/{profile}/{{name}}",
        f"data.path={out}/data/{profile}",
        f"data.synthetic.profile={shape}", f"data.synthetic.structure={structure}", f"data.synthetic.rows={args.rows}",
        f"seed={seed}", "threads=1", "train.progress=false", "final.baselines=[]",
        f"final.workers={args.workers}", f"search.workers={args.workers}", *trains, *args.set])


class Cache:
    """One JSON file per profile: training key -> result, saved after every training."""

    def __init__(self, args, profile: str):
        self.folder, self.name = Path(args.out) / profile, "trainings"
        self.data = self._load()

    def _load(self) -> dict:
        data = _results.load(self.folder, self.name)
        if data is not None and not isinstance(data, dict):
            raise SystemExit(f"damaged {self.folder / self.name}.json: not an object of training results; delete "
                             "it to run its trainings again, or restore it")
        return data or {}

    def get(self, key: str):
        return self.data.get(key)

    def put(self, key: str, value: dict) -> None:
        # re-read first: another process (baselines beside a search) may have added its own results since
        self.data = {**self._load(), **self.data, key: value}
        _results.save(self.folder, self.name, self.data)


def _settings(recipe, data) -> dict:
    """What a training's result depends on besides (model, seed): the final-stage settings and the data."""
    from ctrnas.config import to_dict

    train = {k: v for k, v in to_dict(recipe.final_train).items() if k not in ("seed", "progress")}
    rows = {k: getattr(recipe.final, k, None) for k in ("train_rows", "val_rows", "test_rows")}
    return {"train": train, "rows": rows, "source": data.meta.get("source"), "data": data.meta.get("settings")}


def run_baselines(args, profile: str, cache: Cache) -> None:
    from ctrnas import api
    from ctrnas.train.baseline_names import split_lr_scale
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.run import train_and_test

    recipe = recipe_for(args, profile)
    data = api.prepare_data(recipe)
    settings = _settings(recipe, data)
    rows = {k: v for k, v in settings["rows"].items() if v is not None}
    for seed in range(args.train_seeds):
        cfg = dataclasses.replace(recipe.final_train, seed=seed, progress=False)
        for name in args.baselines:
            key = f"baseline:{name}@{seed}:{_key(settings)}"
            if cache.get(key):
                continue
            t0 = time.perf_counter()
            bare, scale = split_lr_scale(name)
            model = build_baseline(bare, data.schema, cfg.embedding_dim, cfg.row_cap, cfg.seed)
            m = train_and_test(model, data.path, dataclasses.replace(cfg, lr=cfg.lr * scale), None, name, **rows)
            r = {"model": name, "seed": seed, "test": m["test"]["logloss"], "val": m.get("val", {}).get("logloss"),
                 "auc": m["test"].get("auc"), "seconds": time.perf_counter() - t0, "fte": 1.0,
                 "bayes": (m.get("bayes_logloss") or {}).get("test"), "constant": m.get("constant_logloss")}
            cache.put(key, r)
            print(f"{profile} {name} seed {seed}: test {r['test']:.5f} ({r['seconds']:.0f} s)", flush=True)


def planted_arch(data) -> dict | None:
    """The planted arch (JSON) of a planted profile's data, else None."""
    return (data.meta.get("click_model") or {}).get("planted", {}).get("arch")


def run_planted(args, profile: str, cache: Cache) -> None:
    """The planted arch trained from scratch at the baselines' training seeds, as the final stage trains an arch
    (its own template: LayerNorm by degree, the final stage's inits) with the baselines' settings."""
    from ctrnas import api

    recipe = recipe_for(args, profile)
    data = api.prepare_data(recipe)
    arch = planted_arch(data)
    if arch is None:
        return
    settings = _settings(recipe, data)
    folder = Path(args.out) / profile / "planted"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "arch.json"
    _results._atomic_write(path, json.dumps(arch))
    for seed in range(args.train_seeds):
        key = f"planted@{seed}:{_key(settings)}"
        if cache.get(key):
            continue
        t0 = time.perf_counter()
        cfg = dataclasses.replace(recipe.final_train, seed=seed, progress=False)
        m, out = api.train_model(data.path, cfg, arch=path, recipe=recipe, out_dir=folder / f"train-{seed}")
        (Path(out) / "model.pt").unlink(missing_ok=True)  # the numbers are kept, not the weights
        r = {"model": "planted", "seed": seed, "test": m["test"]["logloss"], "val": m.get("val", {}).get("logloss"),
             "auc": m["test"].get("auc"), "seconds": time.perf_counter() - t0, "fte": 1.0,
             "bayes": (m.get("bayes_logloss") or {}).get("test"), "constant": m.get("constant_logloss")}
        cache.put(key, r)
        print(f"{profile} planted arch seed {seed}: test {r['test']:.5f} ({r['seconds']:.0f} s)", flush=True)


def run_search(args, profile: str, cache: Cache) -> None:
    from ctrnas import api

    for seed in range(args.seeds):
        recipe = recipe_for(args, profile, seed)
        key = search_key(args, profile, seed)
        if cache.get(key):
            continue
        t0 = time.perf_counter()
        run = api.run(recipe, progress=False, echo=lambda *a, **k: None)
        m = run.metrics
        fte = m["compute"]["fte"]
        r = {"seed": seed, "train_seed": recipe.final_train.seed, "test": m["best"]["test_logloss"],
             "val": m["best"].get("val_logloss"),
             "label": m["best"].get("label"), "arch": m["best"].get("arch"),
             "fte": fte["total"] - fte.get("baselines", 0.0), "seconds": time.perf_counter() - t0,
             **search_facts(run, recipe.seed_names)}
        cache.put(key, r)
        print(f"{profile} search seed {seed}: test {r['test']:.5f}, {r['fte']:.2f} FTE ({r['seconds']:.0f} s); "
              f"{r['origin']}", flush=True)


def search_facts(run, given: tuple[str, ...] = ()) -> dict:
    """What a search run says about itself: the export's origin line, the search's own best (the best
    retrained candidate on validation that is not a shipped seed) with its origin, each retrained seed's
    numbers, the ladder's tau and the predictor's tau on unseen candidates; `given`: the recipe's `search.seeds`
    (its arch files are seeds too)."""
    from ctrnas.pipeline.origin import origin, shipped_names

    shipped = shipped_names(given)
    ok = [c for c in run.final.candidates if c.status == "ok" and c.arch is not None
          and math.isfinite(c.val.get("logloss", math.nan))]
    width_key = lambda c: dataclasses.replace(c.arch, emb_dim=None).key()  # noqa: E731
    own = [c for c in ok if width_key(c) not in shipped]
    best_own = min(own, key=lambda c: c.val["logloss"]) if own else None
    m = run.metrics["search"]
    pred = m.get("predictor") or {}
    return {
        "origin": run.metrics["origin"]["line"], "origin_kind": run.metrics["origin"]["kind"],
        "own": None if best_own is None else {
            "label": best_own.label, "test": best_own.test["logloss"], "val": best_own.val["logloss"],
            "key": best_own.arch.key(), "arch": best_own.arch.to_json(),
            "origin": origin(dataclasses.replace(run.final, best=best_own), run.search.result.history,
                             given=given)["line"]},
        "seeds": {shipped[width_key(c)]: {"test": c.test["logloss"], "val": c.val["logloss"]}
                  for c in ok if width_key(c) in shipped},
        "ladder": m.get("ladder"), "lineage": m.get("lineage"),
        "predictor": {k: pred.get(k) for k in ("unseen_tau", "unseen_n", "per_rung", "unseen_change_tau",
                                               "unseen_change_n", "relative", "importances")} if pred else None,
        "fte_by_stage": run.metrics["compute"]["fte"]}


def own_arch(run: Path, own: dict) -> dict:
    """The JSON of a search's own arch: kept in its result, or (results of older versions of this script) the
    run's history record of the arch its final stage trained under the own arch's label."""
    import csv

    if own.get("arch"):
        return own["arch"]
    with open(run / "final" / "models.csv", newline="") as f:
        key = next(r["arch_key"] for r in csv.DictReader(f) if r["label"] == own["label"])
    return next(r["arch"] for r in json.loads((run / "search" / "history.json").read_text()) if r["key"] == key)


def retrain(run: Path, arch: dict, seed: int) -> dict:
    """`arch` (its JSON) trained as `run`'s final stage trains, at training seed `seed`: val / test log loss."""
    from ctrnas.pipeline.data import open_data
    from ctrnas.pipeline.fitness.scratch import final_template, job_model, train_as_final
    from ctrnas.recipe import load_recipe
    from ctrnas.space import Arch

    recipe = load_recipe(run / "recipe.yaml", [f"final.train.seed={seed}"])
    data = open_data(recipe.data_dir)
    model = job_model(recipe, data, final_template(recipe, data, None), ("arch", Arch.from_json(arch)))
    v, t, seconds, _ = train_as_final(model, recipe, data)
    return {"val": v.get("logloss"), "test": t.get("logloss"), "seconds": seconds}


def run_own(args, profile: str, cache: Cache) -> None:
    """Each search seed's own arch trained again at training seeds 0..--own-seeds-1 but the run's own."""
    for seed in range(args.seeds):
        r = cache.get(search_key(args, profile, seed))
        if not r or not r.get("own"):
            continue
        run = Path(args.out) / profile / f"{profile}-s{seed}{_variant(args, seed)}"
        for s in other_seeds(r, args.own_seeds):
            key = own_key(args, profile, seed, s)
            if cache.get(key) is None:
                done = retrain(run, own_arch(run, r["own"]), s)
                cache.put(key, {"seed": s, **done})
                print(f"{profile} search seed {seed}: own arch at training seed {s}: test {done['test']:.5f}",
                      flush=True)


def run_random(args, profile: str, cache: Cache) -> None:
    """Random subnets at the search's FTE (one search seed each); skipped, with the reason, without it."""
    import numpy as np

    from ctrnas import api
    from ctrnas.space import get_space

    for seed in range(args.seeds):
        key = search_key(args, profile, seed, "random")
        if cache.get(key):
            continue
        search = cache.get(search_key(args, profile, seed))
        if search is None:
            print(f"{profile} random seed {seed}: skipped (its FTE is the search's: run --methods search first)")
            continue
        recipe = recipe_for(args, profile, seed)
        data = api.prepare_data(recipe)
        n = max(1, math.floor(search["fte"] + 1e-9))
        rng = np.random.default_rng([seed, 1000])
        space = get_space(recipe.space)
        folder = Path(args.out) / profile / f"random-s{seed}{_variant(args)}"
        folder.mkdir(parents=True, exist_ok=True)
        cfg = dataclasses.replace(recipe.final_train, seed=0, progress=False)
        t0, models = time.perf_counter(), []
        for i in range(n):
            arch = space.sample(rng)
            sub = f"{key}#{i}:{arch.key()}"
            if (done := cache.get(sub)) is None:
                path = folder / f"arch-{i}.json"
                _results._atomic_write(path, json.dumps(arch.to_json()))
                m, out = api.train_model(data.path, cfg, arch=path, recipe=recipe, out_dir=folder / f"train-{i}")
                done = {"test": m["test"]["logloss"], "val": m["val"]["logloss"] if "val" in m else None,
                        "seconds": m["train"]["seconds"]}
                (Path(out) / "model.pt").unlink(missing_ok=True)  # the weights are not needed, only the numbers
                cache.put(sub, done)
            models.append(done)
        best = min(models, key=lambda r: r["val"] if r["val"] is not None else math.inf)
        r = {"seed": seed, "n": n, "test": best["test"], "val": best["val"], "fte": float(n),
             "seconds": time.perf_counter() - t0}
        cache.put(key, r)
        print(f"{profile} random seed {seed}: best of {n} test {r['test']:.5f}", flush=True)


def collect(args, profile: str) -> dict:
    """method -> list of per-seed results found in the cache for these rows and settings."""
    cache = Cache(args, profile)
    this = run_key(args, profile)
    found: dict[tuple[str, int], dict] = {}  # (method, seed) -> the latest result (older settings come first)
    for key, r in cache.data.items():
        kind = key.split(":", 1)[0]
        trained = kind.startswith("baseline") or kind.startswith("planted")
        if "#" in key or r["seed"] >= (args.train_seeds if trained else args.seeds):
            continue
        if kind.startswith("baseline"):
            if known_baseline(r["model"]):
                found[r["model"], r["seed"]] = r
        elif kind.startswith("planted"):
            found["planted", r["seed"]] = r
        elif key.endswith(this) and ("+t" in kind) == bool(_trains_tag(args, r["seed"])):
            found[kind.split("@")[0].split("+")[0], r["seed"]] = r
    out: dict[str, list] = {}
    for (method, _), r in sorted(found.items(), key=lambda kv: kv[0][1]):
        out.setdefault(method, []).append(r)
    for r in out.get("search", []):  # the own arch's test log loss at training seeds 0, 1, ... (run_own)
        if r.get("own"):
            more = [cache.data.get(own_key(args, profile, r["seed"], s)) for s in other_seeds(r, args.train_seeds)]
            r["own"] = {**r["own"], "tests": [r["own"]["test"]] + [x["test"] for x in more if x]}
    return out


def _truth(args, profile: str) -> dict:
    """The profile's test Bayes optimum and best constant predictor's log loss (from its data's meta.json)."""
    import numpy as np

    from ctrnas.data.dataset import read_meta

    try:
        meta = read_meta(Path(args.out) / "data" / profile)
    except Exception:  # not generated yet (a report of an empty folder)
        return {"bayes": None, "constant": None}
    ctr = meta["splits"]["train"]["ctr"]  # the constant predictor: the training CTR, scored on test labels
    q = meta["splits"]["test"]["ctr"]
    return {"bayes": meta["bayes_logloss"]["test"],
            "constant": float(-(q * np.log(ctr) + (1 - q) * np.log1p(-ctr)))}


def _f(x, d=4) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{d}f}"


def best_two(res: dict, seed: int) -> list[str]:
    at = {k: next((r["test"] for r in v if r["seed"] == seed), None) for k, v in res.items() if k in BASELINES}
    return sorted((k for k, x in at.items() if x is not None), key=at.get)[:2]


def _tau(x) -> str:
    return "-" if x is None else f"{x:+.2f}"


def tau_null_sd(n: int) -> float:
    """Kendall's tau's sd over n untied pairs of independent ranks, sqrt(2(2n + 5) / (9n(n - 1))) (Kendall
    1938): how far one run's tau strays when nothing is ranked; about 0.25 at 10 candidates."""
    return math.sqrt(2 * (2 * n + 5) / (9 * n * (n - 1)))


def _tau_n(tau, n) -> str:
    """A run's tau with its count and the sd it would have by chance alone."""
    if tau is None or not n or n < 2:
        return f"{_tau(tau)} (n {n})"
    return f"{_tau(tau)} (n {n}, sd by chance {tau_null_sd(n):.2f})"


def search_table(summary) -> list[str]:
    """Per search seed: the export and where it came from, the search's own best (no shipped seed), the
    ladder's tau between rungs and to the final stage, the predictor's tau on unseen candidates."""
    rows = []
    for profile, res, _ in summary:
        for r in res.get("search", []):
            if "origin" not in r:
                continue  # a result of an older version of this script
            own = r.get("own") or {}
            ladder = " / ".join(f"{x['from']}->{x['to']} {_tau(x['tau'])} (n {x['n']})" for x in r.get("ladder") or [])
            pred = r.get("predictor") or {}
            unseen = _tau_n(pred.get('unseen_tau'), pred.get('unseen_n')) if pred else "-"
            rows.append(f"| {profile} | {r['seed']} | {_f(r['test'])} | {r['origin'].split(';')[0]} | "
                        f"{_f(own.get('test'))} | {(own.get('origin') or '-').split(';')[0]} | {r['fte']:.2f} | "
                        f"{ladder or '-'} | {unseen} |")
    if not rows:
        return []
    return ["", "The search per seed (test log loss; own: the best retrained candidate that is not a shipped seed):",
            "", "| profile | search seed | export | its origin | own | own's origin | FTE | ladder tau | "
            "predictor tau, unseen |", "|---|---|---|---|---|---|---|---|---|", *rows]


def lr_reference(res: dict) -> tuple[str | None, float | None]:
    """(name, mean test log loss) of the LR training "gap closed" reads: of LR at the shared learning rate and at
    LR_RATES, the one with the lowest mean validation log loss over its training seeds."""
    done = {k: res[k] for k in (BASELINES[0], *LR_RATES)
            if res.get(k) and all(r.get("val") is not None for r in res[k])}
    if not done:
        return None, None
    name = min(done, key=lambda k: statistics.fmean(r["val"] for r in done[k]))
    return name, statistics.fmean(r["test"] for r in done[name])


def with_baselines(res: dict, search: dict) -> tuple[str, float]:
    """What a search run would export with the baselines in its final stage (`final.choose_from: all`): the
    lowest validation log loss among its export and the baselines trained at its final stage's training seed (0
    unless --seed-trains moved it). Returns (name, test log loss)."""
    pool = [("search", search.get("val"), search["test"])]
    seed = search.get("train_seed", 0)
    pool += [(k, r["val"], r["test"]) for k in BASELINES for r in res.get(k, []) if r["seed"] == seed]
    name, _, test = min((p for p in pool if p[1] is not None), key=lambda p: p[1], default=pool[0])
    return name, test


def _pair(mean: float, x: float | None, pair: float | None) -> str:
    """The margin of the own arch's mean in units of the pair's sd (`goals`)."""
    return "-" if x is None or not pair else f"{(mean - x) / pair:+.1f} pair sd ({pair:.4f})"


def goals(summary, train_seeds: int) -> list[str]:
    """The search's goals per profile: the best baseline (by mean test log loss over its training seeds) with its
    sd, and per search seed the export's and the search's own margin below it in units of that sd (a margin
    above 2 sd is a win beyond the training noise; a negative one is a loss), the FTE and the predictor's tau."""
    rows, wins, wins_mean, wins_pair, ties, fte_ok, tau_ok, n = [], 0, 0, 0, 0, True, 0, 0
    for profile, res, truth in summary:
        base = {k: [r["test"] for r in res[k]] for k in BASELINES if len(res.get(k, [])) >= 2}
        search = [r for r in res.get("search", []) if "origin" in r]
        if not base or not search:
            continue
        n += 1
        best = min(base, key=lambda k: statistics.fmean(base[k]))
        mean, sd = statistics.fmean(base[best]), statistics.stdev(base[best])
        lr = lr_reference(res)[1]
        gap = (lambda x: "-" if lr is None or truth["bayes"] is None or lr == truth["bayes"]
               else f"{100 * (lr - x) / (lr - truth['bayes']):.0f}%")
        margin = (lambda x: "-" if x is None else f"{mean - x:+.4f} ({(mean - x) / sd:+.1f} sd)" if sd > 0
                  else f"{mean - x:+.4f}")
        own = [(r.get("own") or {}).get("test") for r in search]
        tests = [(r.get("own") or {}).get("tests") or [] for r in search]  # the own arch at each training seed
        own_mean = [statistics.fmean(t) if len(t) >= len(base[best]) else None
                    for t in tests]  # over as many training seeds as the baseline's
        taus = [(r.get("predictor") or {}).get("unseen_tau") for r in search]
        wins += all(x is not None and mean - x > 2 * sd for x in own)
        wins_mean += all(x is not None and mean - x > 2 * sd for x in own_mean)
        # the pair's noise: the sd of one training of the baseline and of the own arch together (sqrt of the sum
        # of their variances over training seeds), so an own arch that varies more than the baseline needs more
        pair = [math.hypot(sd, statistics.stdev(t)) if len(t) >= 2 else None for t in tests]
        wins_pair += all(x is not None and p is not None and mean - x > 2 * p for x, p in zip(own_mean, pair))
        ties += all(with_baselines(res, r)[1] <= mean + 2 * sd for r in search)
        fte_ok &= all(r["fte"] <= 6.0 for r in search)
        tau_ok += all(t is not None and t >= 0.4 for t in taus)
        for r, x, xm, p, t in zip(search, own, own_mean, pair, taus, strict=True):
            name, test = with_baselines(res, r)
            rows.append(f"| {profile} | {best} {_f(mean)} (sd {_f(sd)}, {len(base[best])} seeds) | {r['seed']} | "
                        f"{_f(r['test'])}: {margin(r['test'])}, gap closed {gap(r['test'])} | "
                        f"{r['origin'].split(';')[0]} | {name} {_f(test)}: {margin(test)} | "
                        f"{_f(x)}: {margin(x)} | {_f(xm)}: {margin(xm)} | {_pair(mean, xm, p)} | {r['fte']:.2f} | "
                        f"{_tau(t)} |")
    if not rows:
        return []
    half = (n + 1) // 2
    return ["", f"The search's goals (margin = the best baseline's mean over its {train_seeds} training seeds minus the "
            "model's test log loss, and in units of that baseline's training-seed sd; with baselines = what the run "
            "exports with `final.baselines` on, i.e. the lower validation log loss of the search's export and the "
            "baselines at the final stage's training seed; own = the best retrained candidate that is not a "
            "shipped seed, at that training seed and as the mean over the baseline's training seeds (`--own-seeds`); "
            "gap closed = (LR - x) / (LR - Bayes), LR the training of lr, lr*2.5, lr*8 best on validation):", "",
            "| profile | best baseline | search seed | export: margin | export's origin | with baselines: margin | "
            "own: margin | own, mean over the training seeds: margin | the same in units of the pair's sd | FTE | "
            "predictor tau, unseen |",
            "|---|---|---|---|---|---|---|---|---|---|---|", *rows, "",
            f"- export (with baselines) no worse than the best baseline (within 2 sd) at every search seed: "
            f"{ties} of {n} profiles "
            f"-> {'met' if ties == n else 'not met'}",
            f"- own arch below the best baseline by more than 2 sd at both search seeds: {wins} of {n} profiles "
            f"(goal: at least {half}) -> {'met' if wins >= half else 'not met'}; its mean over the same training "
            f"seeds as the baseline's: {wins_mean} of {n}; by more than 2 pair sd (the sd of the baseline and of "
            f"the own arch over their training seeds, together): {wins_pair} of {n}",
            f"- search + top-k <= 6 FTE: {'met' if fte_ok else 'not met'}",
            f"- predictor tau on unseen candidates >= 0.4 at every search seed: {tau_ok} of {n} profiles "
            f"(goal: at least {half}) -> {'met' if tau_ok >= half else 'not met'}"]


def _protocol_words(args) -> str:
    from ctrnas import api

    recipe = api.load_recipe(ROOT / args.recipe)
    if recipe.final.protocol == "nasrec":
        return f"NASRec's fixed {recipe.final_train.epochs} epochs ending on the better val epoch"
    return (f"until val stops improving, at most {recipe.final_train.epochs} epochs, patience "
            f"{recipe.final_train.early_stop_patience}")


def report(args) -> str:
    lines = ["## Structure suite: which baseline wins which click model", "",
             f"Synthetic structure profiles at {args.rows:,} rows (data seed 0, split 8/1/1), each model trained "
             f"like the demo's final stage (`{args.recipe}`: {_protocol_words(args)}, Adagrad lr 0.12, "
             f"batch 512, embedding dim 16); {platform.machine()}, {os.cpu_count()} CPU cores, torch threads 1. "
             f"{args.machine}", ""]
    if args.rows < 1_000_000:
        lines += [f"**Reduced run: {args.rows:,} rows instead of the full 1M, what the shared 2 CPU cores "
                  "allowed.**", ""]
    seeds = list(range(args.train_seeds))
    head = "| profile (shape/structure) | Bayes | constant | " + " | ".join(BASELINES) + \
           " | best two, " + " / ".join(f"seed {s}" for s in seeds) + " | same order |"
    lines += ["Test log loss per training seed (" + " / ".join(str(s) for s in seeds) + "):", "", head,
              "|---|" + "---|" * (len(BASELINES) + 4)]
    winners, summary = {}, []
    for profile in args.profiles:
        res = collect(args, profile)
        truth = _truth(args, profile)
        if res:
            summary.append((profile, res, truth))
        if not any(k in res for k in BASELINES):
            continue
        cells = [" / ".join(_f(r["test"]) for r in res.get(k, [])) or "-" for k in BASELINES]
        tops = [t for t in (best_two(res, s) for s in seeds) if t]  # a profile may have fewer seeds
        same = len(tops) > 1 and all(t == tops[0] and len(t) == 2 for t in tops)
        if tops and tops[0]:
            winners[profile] = (tops[0][0], same)
        shape, structure = PROFILES[profile]
        lines.append(f"| {profile} ({shape}/{structure}) | {_f(truth['bayes'])} | {_f(truth['constant'])} | "
                     + " | ".join(cells) + " | " + " / ".join(" > ".join(t) for t in tops) + " (best first) | "
                     + ("yes" if same else "no") + " |")
    lines.append("")
    stable = {w for w, same in winners.values() if same}
    lines += [f"Goal (at least 3 profiles whose best baseline differs, each with the same order of its best two "
              f"at every training seed): {len(stable)} distinct winners over the profiles with a stable order "
              f"({', '.join(sorted(stable)) or '-'}) -> {'met' if len(stable) >= 3 else 'not met'}.", ""]
    lines += ["Per method (mean and sd over seeds: training seeds for the baselines, search seeds for the search "
              "and random search); gap closed = (LR - x) / (LR - Bayes), LR the training of lr, lr*2.5 and lr*8 "
              "(LR at 1, 2.5 and 8 times the shared learning rate) best on validation, named per profile below; "
              "wall = seconds per seed:", "",
              "| profile | method | test log loss | sd | gap closed | FTE | wall s |", "|---|---|---|---|---|---|---|"]
    for profile, res, truth in summary:
        lr = lr_reference(res)[1]
        bayes = truth["bayes"]
        rates = sorted((k for k in res if k not in TRAINED and known_baseline(k)), key=lambda k: (k.split("*")[0], k))
        for method in [BASELINES[0], *LR_RATES, *BASELINES[1:], *rates, "planted", "search", "random"]:
            v = [r for r in res.get(method, []) if r.get("test") is not None]
            if not v:
                continue
            mean = statistics.fmean(r["test"] for r in v)
            sd = statistics.stdev(r["test"] for r in v) if len(v) > 1 else None
            gap = None if lr is None or bayes is None or lr == bayes else 100 * (lr - mean) / (lr - bayes)
            lines.append(f"| {profile} | {method} | {_f(mean)} | {_f(sd)} | "
                         f"{'-' if gap is None else f'{gap:.1f}%'} | {statistics.fmean(r['fte'] for r in v):.2f} | "
                         f"{statistics.fmean(r['seconds'] for r in v):.0f} |")
    refs = [f"{profile} {name}" for profile, res, _ in summary if (name := lr_reference(res)[0])]
    if refs:
        lines += ["", f"LR, the reference of gap closed: {', '.join(refs)}."]
    lines += search_table(summary)
    lines += goals(summary, args.train_seeds)
    missing = [m for m in ("search", "random") if not any(m in res for _, res, _ in summary)]
    if missing:
        lines += ["", f"Not run for this table: {' and '.join(missing)} (`--methods search,random` adds them; the "
                  "search costs about 5.8 FTE per seed)."]
    extra = "".join(f" --set {x}" for x in args.set)
    extra = (f" --recipe {args.recipe}" if args.recipe != RECIPE else "") + \
        (f" --own-seeds {args.own_seeds}" if getattr(args, "own_seeds", 0) else "") + extra
    lines[4:4] = [f"Command: `nice .venv/bin/python benchmarks/suite.py --rows {args.rows} --seeds {args.seeds} "
                  f"--train-seeds {args.train_seeds} --profiles {','.join(args.profiles)} "
                  f"--methods {','.join(args.methods)}{extra}`", ""]  # above the tables, after the setup
    return "\n".join(lines + [""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--baselines", default=",".join(TRAINED),
                    help="which baselines (default: all seven, and LR at 2.5x and 8x the learning rate; NAME*S "
                         "trains any at S times the learning rate)")
    ap.add_argument("--seeds", type=int, default=2, help="search seeds (and random search's)")
    ap.add_argument("--train-seeds", type=int, default=None,
                    help="the baselines' training seeds (default: --seeds; two seeds underestimate the noise)")
    ap.add_argument("--workers", type=int, default=1, help="the search's and final stage's workers")
    ap.add_argument("--own-seeds", type=int, default=0,
                    help="with --methods search: train each search's own arch again at training seeds 0..N-1 "
                         "(but its run's own)")
    ap.add_argument("--seed-trains", action="store_true",
                    help="a search seed above 0 also trains (warm-up, rungs, final stage) at that training seed")
    ap.add_argument("--recipe", default=RECIPE, help="the search's recipe (its final stage trains every model)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe overrides")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/out/suite-<rows/1000>k)")
    ap.add_argument("--section", default=None, help="markdown section (default benchmarks/sections/suite.md)")
    ap.add_argument("--machine", default="", help="a sentence on the load during the runs, for the report")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    args.profiles = [p for p in args.profiles.split(",") if p]
    args.train_seeds = args.train_seeds or args.seeds
    args.methods = [m for m in args.methods.split(",") if m]
    args.baselines = [b for b in args.baselines.split(",") if b]
    for what, given, known in (("--profiles", args.profiles, PROFILES), ("--methods", args.methods, METHODS),
                               ("--baselines", args.baselines, TRAINED)):
        bad = [x for x in given if x not in known and not (what == "--baselines" and known_baseline(x))]
        if bad:
            ap.error(f"{what}: unknown {', '.join(bad)}; known: {', '.join(known)}")
    if args.seed_trains and args.seeds > args.train_seeds:
        ap.error(f"--seed-trains: search seed {args.seeds - 1} trains at training seed {args.seeds - 1}, where no "
                 f"baseline is trained (--train-seeds {args.train_seeds})")
    args.out = Path(args.out or ROOT / f"benchmarks/out/suite-{args.rows // 1000}k")
    if not args.report_only:
        for profile in args.profiles:
            cache = Cache(args, profile)
            if "baselines" in args.methods:
                run_baselines(args, profile, cache)
            if "search" in args.methods:
                run_search(args, profile, cache)
                run_own(args, profile, cache)
            if "random" in args.methods:
                run_random(args, profile, cache)
            if "planted" in args.methods:
                run_planted(args, profile, cache)
    _results.publish(report(args), Path(args.section or ROOT / "benchmarks/sections/suite.md"), NOTES,
                     fallback=None if args.section else Path(args.out) / "section.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
