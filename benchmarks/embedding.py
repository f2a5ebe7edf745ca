"""Embedding search: per-table widths against the uniform width, in four parts.

    .venv/bin/python benchmarks/embedding.py --rows 100000 --parts baselines      # widths 8 / 16 / 32
    .venv/bin/python benchmarks/embedding.py --parts throughput                    # mixed vs uniform steps/s
    .venv/bin/python benchmarks/embedding.py --parts rss --rss-rows 1000000        # peak RSS, 1M rows
    .venv/bin/python benchmarks/embedding.py --rows 100000 --parts search          # the recipe's front
    .venv/bin/python benchmarks/embedding.py --rows 100000 --report-only           # rebuild the section

Parts:
  baselines   the strong baselines of each structure-suite profile (PROFILES) at table widths 8 / 16 / 32,
              training seeds 0..--seeds-1, trained like benchmarks/suite.py trains them (the demo recipe's final
              stage); width-16 results are read from suite.py's cache (--suite-out, never written) when
              present. The profile's data is copied from --suite-out (or generated).
  throughput  training steps of one arch (dlrm-like) on Criteo-shaped synthetic data through the project's
              Trainer (batch 512, one torch thread): uniform width 16, mixed widths of the same table bytes
              (common width 32), and uniform 32; the variants alternate --reps times, and the report gives the
              ratio of examples/s per repetition (median and range).
  rss         peak RSS of one final-stage training at --rss-rows Criteo-format rows (as benchmarks/predict.py
              measures it), the dlrm-like arch at uniform width 16 and with mixed widths, in fresh processes.
  search      `--recipe` (recipes/embedding.yaml) on each profile at search seeds 0..--seeds-1 through
              `ctrnas.api.run`; reads each run's front.json and reports the front next to the baselines, the
              two goals, the fields the search dropped against the profile's noise fields, and a plot.
Every result is cached under --out (default benchmarks/out/embedding-<rows/1000>k), so a stopped run resumes.
The section goes to benchmarks/sections/embedding.md (or --section; a report that lacks a part the section shows
goes to <out>/section.md instead, so a partial run erases nothing); `python benchmarks/_results.py` assembles it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)
import suite  # noqa: E402

# profile -> its strongest baselines in the structure suite (benchmarks/suite.py; dense-by-category's and
# crosses' at 1M rows, the others' at 100k)
PROFILES = {
    "kdd2012-sparse-noise": ("dcnv2", "autoint+", "dlrm"),
    "avazu-pairwise": ("deepfm", "fm", "dlrm"),
    "kdd2012-dense-by-category": ("xdeepfm", "dlrm"),
    "kdd2012-crosses": ("deepfm", "dlrm"),
    "kdd2012-deep": ("dlrm", "dcnv2"),
}
WIDTHS = (8, 16, 32)
PARTS = ("baselines", "throughput", "rss", "search")
TP_ARCHS = ("dlrm-like", "dcnv2-like")  # shipped archs (ctrnas/space/archs) the throughput part can time
RECIPE = "recipes/embedding.yaml"
SUITE_RECIPE = "recipes/synthetic.yaml"


class Cache(suite.Cache):
    """One JSON file per part or profile under --out: key -> result, saved after every result."""

    def __init__(self, args, name: str):
        self.folder, self.name = Path(args.out), name
        self.data = self._load()


def _suite_args(args, recipe: str = SUITE_RECIPE):
    return argparse.Namespace(out=args.out, recipe=recipe, rows=args.rows, workers=1, set=list(args.set))


def _data(args, profile: str):
    """The profile's prepared data under --out: copied from suite.py's folder when it has it (same source)."""
    from ctrnas import api

    mine, theirs = Path(args.out) / "data" / profile, Path(args.suite_out) / "data" / profile
    if not (mine / "meta.json").exists() and (theirs / "meta.json").exists():
        tmp = mine.with_name(f".{profile}.copy")
        shutil.rmtree(tmp, ignore_errors=True)  # a copy of ours stopped half-way
        shutil.copytree(theirs, tmp)
        os.replace(tmp, mine)
    recipe = suite.recipe_for(_suite_args(args), profile)
    if (mine / "meta.json").exists():  # used as it is: suite.py's copy may predate a change of the source record
        from ctrnas.pipeline.data import open_data

        return recipe, open_data(mine)
    return recipe, api.prepare_data(recipe)


def noise_fields(data) -> tuple[list[str], list[str]]:
    """(signal fields, noise fields) of a synthetic profile, as its generator recorded them."""
    cm = data.meta.get("click_model") or {}
    return list(cm.get("signal_fields") or []), list(cm.get("noise_fields") or [])


def _embedding_bytes(model) -> int:
    from ctrnas.pipeline.fitness.scratch import embedding_params

    return 4 * embedding_params(model)


# ---------------------------------------------------------------------------------------------- baselines


def _import_suite(args, profile: str, cache: Cache, settings_key: str) -> None:
    """Width-16 trainings from suite.py's cache (read only) made with the same settings (those of other
    settings, e.g. an older TrainConfig, are trained here again), tagged with where they came from."""
    theirs = _results.load(Path(args.suite_out) / profile, "trainings") or {}
    for key, r in theirs.items():
        if not key.startswith("baseline:") or r["model"] not in PROFILES[profile] or r["seed"] >= args.seeds \
                or r["model"] not in args.baselines or not key.endswith(settings_key):
            continue
        mine = f"baseline:{r['model']}@{r['seed']}:w16"
        if mine not in cache.data:
            cache.put(mine, {**r, "width": 16, "from": f"{args.suite_out}/{profile}/trainings.json"})


def run_baselines(args, profile: str) -> None:
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.run import train_and_test

    recipe, data = _data(args, profile)
    cache = Cache(args, f"{profile}-baselines")
    rows = {k: v for k, v in suite._settings(recipe, data)["rows"].items() if v is not None}
    if 16 in args.widths:
        _import_suite(args, profile, cache, suite._key(suite._settings(recipe, data)))
    for seed in range(args.seeds):
        for width in args.widths:
            cfg = dataclasses.replace(recipe.final_train, seed=seed, progress=False, embedding_dim=width)
            for name in [b for b in PROFILES[profile] if b in args.baselines]:
                key = f"baseline:{name}@{seed}:w{width}"
                if cache.get(key):
                    continue
                t0 = time.perf_counter()
                model = build_baseline(name, data.schema, width, cfg.row_cap, seed)
                nbytes = _embedding_bytes(model)
                m = train_and_test(model, data.path, cfg, None, name, **rows)
                r = {"model": name, "seed": seed, "width": width, "test": m["test"]["logloss"],
                     "val": m.get("val", {}).get("logloss"), "auc": m["test"].get("auc"),
                     "embedding_bytes": nbytes, "seconds": time.perf_counter() - t0,
                     "settings": suite._key(suite._settings(dataclasses.replace(
                         recipe, train=dataclasses.replace(recipe.train, embedding_dim=width)), data))}
                cache.put(key, r)
                print(f"{profile} {name} width {width} seed {seed}: test {r['test']:.5f} "
                      f"({r['seconds']:.0f} s)", flush=True)
    # the width-16 entries from suite.py lack the table bytes: count them on a fresh model
    for key, r in list(cache.data.items()):
        if "embedding_bytes" not in r:
            model = build_baseline(r["model"], data.schema, r["width"], recipe.final_train.row_cap, 0)
            cache.put(key, {**r, "embedding_bytes": _embedding_bytes(model)})


def baseline_table(args, profile: str) -> dict:
    """(model, width) -> {"test", "val" (means), "sd" (of test over seeds), "seeds", "embedding_bytes"}."""
    cache = Cache(args, f"{profile}-baselines")
    out: dict[tuple[str, int], dict] = {}
    for r in cache.data.values():
        if r["seed"] < args.seeds and r["width"] in args.widths and r["model"] in args.baselines \
                and r.get("test") is not None:
            out.setdefault((r["model"], r["width"]), {"runs": []})["runs"].append(r)
    for v in out.values():
        runs = sorted(v.pop("runs"), key=lambda r: r["seed"])
        tests = [r["test"] for r in runs]
        vals = [r["val"] for r in runs if r.get("val") is not None]
        v.update(tests=tests, test=statistics.fmean(tests), sd=statistics.stdev(tests) if len(tests) > 1 else None,
                 val=statistics.fmean(vals) if vals else None, seeds=[r["seed"] for r in runs],
                 embedding_bytes=runs[0].get("embedding_bytes"),
                 imported=any("from" in r for r in runs))
    return out


# --------------------------------------------------------------------------------------------- throughput


def same_bytes_widths(rows: list[int], base: int = 16) -> list[int]:
    """Widths 8 / 16 / 32 per table with the table bytes of the uniform width `base` (16) or just under it:
    every table starts at 8, then, largest first, each is widened to 32, or else to 16, while the total stays
    at or under the uniform total (greedy: exact when the small tables can fill the rest)."""
    budget = (base - 8) * sum(rows)
    widths = [8] * len(rows)
    for i in sorted(range(len(rows)), key=lambda i: (-rows[i], i)):
        for w in (32, 16):
            if (w - 8) * rows[i] <= budget:
                widths[i], budget = w, budget - (w - 8) * rows[i]
                break
    return widths


PADDED = "the same mix, its ops on the padded tokens (`export(compact=False)`)"


def throughput(args) -> dict:
    """Seconds per `--steps` training steps of each variant, alternated `--reps` times."""
    import torch

    from ctrnas.data.synthetic import generate
    from ctrnas.pipeline.data import open_data
    from ctrnas.space.baselines import baseline_arch
    from ctrnas.supernet import export
    from ctrnas.supernet.io import build_supernet
    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.config import TrainConfig
    from ctrnas.train.trainer import Trainer

    torch.set_num_threads(1)
    folder = Path(args.out) / "data" / f"criteo-{args.tp_rows}"
    if not (folder / "meta.json").exists():
        generate("criteo", args.tp_rows, 0, folder, overwrite=True)
    data = open_data(folder)
    schema = data.schema
    rows = list(schema.cardinalities)
    mixed = same_bytes_widths(rows, 16)
    names = list(schema.sparse_names)
    base = baseline_arch(args.tp_arch)
    space_cfg = {"base": "ctrnas-small", "table_dims": [0, 4, 8, 16, 32]}

    def tables(widths, common):
        return tuple(sorted((n, w) for n, w in zip(names, widths) if w != common))

    same = dataclasses.replace(base, table_dims=tables(mixed, 32))
    variants = {  # label -> (common width, arch)
        "uniform 16": (16, base),
        "uniform 16, a second copy (noise control)": (16, base),
        "mixed 8/16/32, same bytes (common 32)": (32, same),
        "uniform 32": (32, base),
        "tables of 16 padded to 32 (common 32)": (32, dataclasses.replace(base, table_dims=tables([16] * len(names),
                                                                                                   32))),
        "mixed 4/8/16 (common 16)": (16, dataclasses.replace(
            base, table_dims=tables(list(rss_widths(names, rows).values()), 16))),
    }
    variants[PADDED] = (32, same)  # what `ctrnas.supernet.compact` saves
    batches = list(dataset_batches(folder, "train", 512, shuffle=True, seed=0,
                                   limit=512 * (args.steps + 5)).batches())
    models = {}
    for label, (dim, arch) in variants.items():
        space = {**space_cfg, "table_dims": [w for w in space_cfg["table_dims"] if w <= dim]}
        model = export(build_supernet(schema, space, 0, dim, None), arch, init="fresh", seed=0,
                       compact=label != PADDED)
        trainer = Trainer(model, TrainConfig(batch_size=512, threads=1, progress=False, embedding_dim=dim,
                                              embedding_update="sparse"))
        for b in batches[:5]:  # warm-up: first-call allocations and the optimizer state
            trainer.train_step(b, 10 ** 6)
        models[label] = {"trainer": trainer, "embedding_bytes": model.stem.embedding_bytes(), "dim": dim,
                         "widths": dict(zip(names, model.stem.widths)), "padded": model.stem.mixed}
    times = {label: [] for label in variants}
    cpu = {label: [] for label in variants}
    stem_times = {label: [] for label in variants}
    timed = batches[5:5 + args.steps]
    for rep in range(args.reps):
        # rotated, so each variant takes every place and no variant runs twice in a row (one that follows
        # itself finds its tables and optimizer state in the cache: ~10% faster, seen with reversed orders)
        order = list(variants)[rep % len(variants):] + list(variants)[:rep % len(variants)]
        for label in order:
            trainer = models[label]["trainer"]
            t0, c0 = time.perf_counter(), time.process_time()
            for b in timed:
                trainer.train_step(b, 10 ** 6)
            times[label].append(time.perf_counter() - t0)
            cpu[label].append(time.process_time() - c0)  # CPU seconds: less disturbed by other processes
            # the stem alone (lookups and the tokens' layout), forward and backward, on the same batches; a
            # model that dots the lookups side by side lays them out in its interaction: its stem is the lookups
            stem = trainer.model.stem
            run = stem.lookups if getattr(trainer.model, "side_by_side", False) else stem
            c0 = time.process_time()
            for b in timed:
                run(b.sparse_features).sum().backward()
                stem.zero_grad(set_to_none=True)
            stem_times[label].append(time.process_time() - c0)
        print(f"rep {rep}: " + ", ".join(f"{k} {times[k][-1]:.2f} s" for k in variants), flush=True)
    return {"arch": args.tp_arch, "rows": args.tp_rows, "steps": args.steps, "batch": 512, "reps": args.reps,
            "variants": {label: {k: v for k, v in m.items() if k != "trainer"} | {"seconds": times[label],
                                                                                   "cpu_seconds": cpu[label],
                                                                                   "stem_seconds": stem_times[label]}
                         for label, m in models.items()},
            "load": os.getloadavg()}


# ----------------------------------------------------------------------------------------------------- rss

RSS_CHILD = """
import json, sys
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.pipeline.data import open_data
from ctrnas.pipeline.final.memory import job_sizes, tensor_bytes, worker_bytes
from ctrnas.pipeline.fitness.scratch import final_template, job_model, train_as_final
from ctrnas.recipe import recipe_from_dict
from ctrnas.space import Arch
path, out, buckets, train_rows, arch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
arch = Arch.from_json(json.loads(arch))
meta = prepare("criteo", [path], out + "/data", PrepareConfig(hash_buckets=buckets, progress=False), overwrite=True)
# benchmarks/predict.py's child: the final template, then one model exported from it and trained with the
# recipe defaults on the first train_rows rows; the space searches table widths (0..16, common width 16)
recipe = recipe_from_dict({"name": "rss", "data": {"path": out + "/data"},
                           "space": {"base": "ctrnas-small", "table_dims": [0, 4, 8, 16]},
                           "train": {"progress": False}, "final": {"train_rows": train_rows}})
data = open_data(out + "/data")
template = final_template(recipe, data, None)
what = ("arch", arch)
size_ = job_sizes(recipe, data, template, [what])[0]
held = tensor_bytes(*(template.values() if isinstance(template, dict) else [template]))
estimate = worker_bytes(size_.training_bytes(recipe.final_train), held)
model = job_model(recipe, data, template, what)
val, test, seconds, trainer = train_as_final(model, recipe, data)
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"table_rows": sum(f["cardinality"] for f in meta["schema"]["sparse"]), "peak_rss_mib":
                  round(hwm / 1024), "estimate_mib": round(estimate / 2**20), "steps": trainer.step,
                  "embedding_bytes": model.stem.embedding_bytes(), "estimate_table_bytes": 4 * size_.table_params,
                  "test_logloss": test["logloss"],
                  "widths": dict(zip(model.stem.names, model.stem.widths))}))
"""


def rss_widths(names: list[str], rows: list[int]) -> dict[str, int]:
    """The mixed arch of the RSS run: the larger the table, the narrower (rows >= 100k: 4, >= 10k: 8, else 16)."""
    return {n: 4 if r >= 100_000 else 8 if r >= 10_000 else 16 for n, r in zip(names, rows)}


def rss(args) -> dict:
    from prep import generate_criteo

    from ctrnas.data.prepare import prepare
    from ctrnas.data.prepare_config import PrepareConfig
    from ctrnas.space.baselines import baseline_arch

    work = Path(args.out) / "rss"
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"criteo-{args.rss_rows}.tsv"
    if not path.exists():
        generate_criteo(path, args.rss_rows)
    # the table sizes of the prepared data decide the mixed widths: prepare once here (same as the children's)
    meta = prepare("criteo", [str(path)], work / "sizes", PrepareConfig(hash_buckets=args.buckets, progress=False),
                   overwrite=True)
    names = [f["name"] for f in meta["schema"]["sparse"]]
    card = [f["cardinality"] for f in meta["schema"]["sparse"]]
    widths = rss_widths(names, card)
    base = baseline_arch("dlrm-like")
    archs = {"uniform 16": base,
             "mixed 4/8/16": dataclasses.replace(base, table_dims=tuple(sorted((n, w) for n, w in widths.items()
                                                                               if w != 16)))}
    if args.rss_arch:  # a searched arch (e.g. a run's best_arch.json): its own blocks and widths
        from ctrnas.space import Arch

        found = Arch.from_json(json.loads(Path(args.rss_arch).read_text()))
        archs["found's blocks, uniform 16"] = dataclasses.replace(found, emb_dim=None, table_dims=())
        archs[f"found ({Path(args.rss_arch).name})"] = found
    out = {}
    for label, arch in archs.items():
        (work / "run").mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", RSS_CHILD, str(path), str(work / "run"), str(args.buckets),
                               str(args.train_rows), json.dumps(arch.to_json())], capture_output=True, text=True,
                              env=env)
        if done.returncode:
            raise SystemExit(f"rss {label}: {done.stderr[-2000:]}")
        out[label] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"rss {label}: {out[label]}", flush=True)
    return {"rows": args.rss_rows, "buckets": args.buckets, "train_rows": args.train_rows, "runs": out,
            "arch_file": str(args.rss_arch or ""), "load": os.getloadavg()}


# ------------------------------------------------------------------------------------------------- search


def search_recipe(args, profile: str, seed: int):
    """`--recipe` on the profile's data (as suite.py points the demo recipe at it), search seed `seed`; the
    run's own baselines are left out (this script trains them at every width)."""
    from ctrnas import api

    _, data = _data(args, profile)
    shape, structure = suite.PROFILES[profile]
    out = Path(args.out)
    tag = "" if (args.recipe, args.search_set, args.set) == (RECIPE, [], []) else \
        "-" + suite._key([args.recipe, args.set, args.search_set])[:6]  # another search: another run folder
    return api.load_recipe(ROOT / args.recipe, *[
        f"name={profile}-s{seed}{tag}", f"output={out}/{profile}/{{name}}", f"data.path={data.path}",
        "data.synthetic=null",  # the folder of _data, used as it is
        f"seed={seed}", "threads=1", "train.progress=false", "final.baselines=[]",
        f"final.workers={args.workers}", f"search.workers={args.workers}",
        *[x for x in args.set if not x.startswith("data.synthetic")],
        *[x.replace("{seed}", str(seed)) for x in args.search_set]])


def read_front(path: Path) -> list[dict]:
    """The models of a run's front.json, checked for the keys the report reads."""
    try:
        models = json.loads(Path(path).read_text())["models"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path}: not a front.json with a 'models' list ({e})")
    need = ("label", "kind", "test_logloss", "val_logloss", "embedding_bytes", "on_front")
    for i, m in enumerate(models):
        missing = [k for k in need if k not in m]
        if missing:
            raise SystemExit(f"{path}: models[{i}] has no {', '.join(missing)}")
    return models


def run_search(args, profile: str) -> None:
    from ctrnas import api

    cache = Cache(args, f"{profile}-search")
    for seed in range(args.seeds):
        key = f"search@{seed}:{suite._key([args.rows, args.set, args.search_set, args.recipe, profile])}"
        if cache.get(key):
            continue
        recipe = search_recipe(args, profile, seed)
        t0 = time.perf_counter()
        api.run(recipe, progress=False, echo=lambda *a, **k: None)
        front = Path(recipe.output_dir) / "front.json"
        cache.put(key, {"seed": seed, "front": str(front), "models": read_front(front),
                        "seconds": time.perf_counter() - t0})
        print(f"{profile} search seed {seed}: {front} ({time.perf_counter() - t0:.0f} s)", flush=True)


def searches(args, profile: str) -> list[dict]:
    """The cached search results of this profile (one per search seed, at these rows and settings)."""
    cache = Cache(args, f"{profile}-search")
    tail = suite._key([args.rows, args.set, args.search_set, args.recipe, profile])
    return sorted((r for k, r in cache.data.items() if k.endswith(tail) and r["seed"] < args.seeds),
                  key=lambda r: r["seed"])


def best_baseline(table: dict) -> tuple[tuple[str, int], dict] | None:
    """The (model, width) of the lowest mean test log loss over the training seeds, and its row."""
    done = [(k, v) for k, v in table.items() if v["test"] is not None]
    return min(done, key=lambda kv: kv[1]["test"]) if done else None


def goals(models: list[dict], best: dict) -> dict:
    """The two goals for one search's models against the best baseline (mean test `test`, seed sd
    `sd`, `embedding_bytes`): (1) a model within one sd of its test log loss at <= 0.25x its bytes; (2) a
    model below it by more than 2 sd at <= 1x its bytes. Each: the qualifying candidate of lowest test log
    loss, or None."""
    sd, ref, nbytes = best["sd"] or 0.0, best["test"], best["embedding_bytes"]
    cands = [m for m in models if m["kind"] == "candidate" and m.get("test_logloss") is not None
             and m.get("embedding_bytes") is not None]  # a failed training has neither

    def pick(ok):
        hits = [m for m in cands if ok(m)]
        return min(hits, key=lambda m: m["test_logloss"]) if hits else None

    return {"small": pick(lambda m: m["embedding_bytes"] <= 0.25 * nbytes and m["test_logloss"] <= ref + sd),
            "better": pick(lambda m: m["embedding_bytes"] <= nbytes and m["test_logloss"] < ref - 2 * sd),
            "sd": sd}


def dropped_vs_noise(models: list[dict], noise: list[str]) -> dict:
    """Fields dropped by the front's candidates against the profile's noise fields: those dropped by every
    front candidate (`always`), by any (`any`), and how many of each are noise."""
    front = [m for m in models if m["kind"] == "candidate" and m["on_front"]]
    sets = [set(m.get("dropped_fields") or []) for m in front]
    always = set.intersection(*sets) if sets else set()
    anyof = set.union(*sets) if sets else set()
    noise = set(noise)
    return {"always": sorted(always), "any": sorted(anyof), "always_noise": len(always & noise),
            "any_noise": len(anyof & noise), "noise": len(noise), "signal_dropped": sorted(anyof - noise)}


def plot(args, fronts: dict, tables: dict, path: Path) -> bool:
    """Test log loss against embedding bytes per profile: the baselines (mean over training seeds, sd bars)
    and every search seed's candidates, the front joined by a line. False when there is nothing to draw."""
    if not any(tables.values()):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = [p for p in args.profiles if tables.get(p)]
    fig, axes = plt.subplots(1, len(profiles), figsize=(6 * len(profiles), 4.5), squeeze=False)
    for ax, profile in zip(axes[0], profiles):
        for (name, width), v in sorted(tables[profile].items()):
            ax.errorbar(v["embedding_bytes"] / 2**20, v["test"], yerr=v["sd"] or 0, fmt="s", color="k", ms=4)
            ax.annotate(f"{name}@{width}", (v["embedding_bytes"] / 2**20, v["test"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        for r in fronts.get(profile, []):
            cands = [m for m in r["models"] if m["kind"] == "candidate" and m["test_logloss"] is not None
                     and m["embedding_bytes"] is not None]
            pts = ax.scatter([m["embedding_bytes"] / 2**20 for m in cands], [m["test_logloss"] for m in cands],
                             s=14, alpha=0.6, label=f"search seed {r['seed']}")
            front = sorted((m for m in cands if m["on_front"]), key=lambda m: m["embedding_bytes"])
            ax.plot([m["embedding_bytes"] / 2**20 for m in front], [m["test_logloss"] for m in front],
                    color=pts.get_facecolor()[0], lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("embedding MiB (float32 tables)")
        ax.set_ylabel("test log loss")
        ax.set_title(profile)
        if fronts.get(profile):
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------------- report


def _f(x, d=5) -> str:  # 5 decimals: at 1M rows the seed sd is 0.0001 or less
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{d}f}"


def _mib(b) -> str:
    return "-" if b is None else f"{b / 2**20:.1f}"


def ratios(ref: list[float], seconds: list[float]) -> list[float]:
    """Examples/s of a variant over those of the reference, per repetition (seconds of the same steps)."""
    return sorted(a / b for a, b in zip(ref, seconds))


def throughput_verdict(same: list[float], control: list[float]) -> tuple[bool, float, float]:
    """Goal met unless mixed widths are slower than the uniform model's own copy beyond the noise of that
    comparison. Paired by repetition (both ratios against uniform 16 in the same repetition, in run order):
    d = mixed's ratio - the copy's; met when the median of d is at least -2 standard errors of it, the
    standard error from the median absolute deviation (1.4826 MAD for the sd, times 1.2533 / sqrt(n) for a
    median; normal approximations). A rule on one run's spread (the copy's MAD alone) passed a steady 5%
    slowdown whenever the run was noisy. (met, median d, standard error)."""
    d = [a - b for a, b in zip(same, control)]
    mid = statistics.median(d)
    se = 1.2533 * 1.4826 * statistics.median(abs(x - mid) for x in d) / math.sqrt(len(d))
    return mid >= -2 * se, mid, se


def throughput_name(arch: str) -> str:
    """The cache file of the throughput part for `arch` (dlrm-like: the first measured, `throughput`)."""
    return "throughput" if arch == "dlrm-like" else f"throughput-{arch}"


def _report_throughputs(args) -> list[str]:
    found = [a for a in TP_ARCHS if _results.load(args.out, throughput_name(a))]
    if not found:
        return ["Throughput: not measured yet (`--parts throughput`).", ""]
    lines = []
    for i, arch in enumerate(found):
        lines += _report_throughput(args, arch, first=i == 0)
    return lines


def _report_throughput(args, arch: str, first: bool) -> list[str]:
    r = _results.load(args.out, throughput_name(arch))
    v = r["variants"]
    ref = v["uniform 16"]
    clock = "cpu_seconds" if "cpu_seconds" in ref else "seconds"
    if not first:
        lines = [f"**The same with the {arch} arch** (`ctrnas/space/archs/{arch}.json`), {r['steps']} steps, "
                 f"{r['reps']} repetitions:", "",
                 "| variant | common width | table MiB | examples/s (CPU, median) | ratio, CPU | ratio, wall | "
                 "stem ms/step |", "|---|---|---|---|---|---|---|"]
    else:
        lines = [f"**Throughput.** The {arch} arch (`ctrnas/space/archs/{arch}.json`) exported from a "
                 f"`ctrnas-small` supernet with `table_dims` choices, on {r['rows']:,} rows of the synthetic Criteo "
                 f"profile (26 tables); {r['steps']} training steps of batch {r['batch']} through the project's "
                 f"`Trainer.train_step` (Adagrad, sparse embedding updates, one torch thread), the variants "
                 f"alternated {r['reps']} times (the order rotated by one each time, so none runs twice in a row). "
                 f"Ratio = examples/s of the variant / examples/s of uniform 16 in the same repetition, median "
                 f"[min, max], from CPU seconds (process time) and from wall seconds. Stem = the embedding stem alone "
                 f"(lookups and the tokens' layout; the lookups alone for a model whose DLRM dots lay them out "
                 f"themselves), forward and backward, CPU ms per step of 512.", "",
                 "| variant | common width | table MiB | examples/s (CPU, median) | ratio, CPU | ratio, wall | "
                 "stem ms/step |", "|---|---|---|---|---|---|---|"]
    for label, x in v.items():
        rc, rw = ratios(ref[clock], x[clock]), ratios(ref["seconds"], x["seconds"])
        eps = r["steps"] * r["batch"] / statistics.median(x[clock])
        lines.append(f"| {label} | {x['dim']} | {_mib(x['embedding_bytes'])} | {eps:,.0f} | "
                     f"{statistics.median(rc):.3f} [{rc[0]:.3f}, {rc[-1]:.3f}] | "
                     f"{statistics.median(rw):.3f} [{rw[0]:.3f}, {rw[-1]:.3f}] | "
                     f"{1000 * statistics.median(x['stem_seconds']) / r['steps']:.2f} |")
    same_label = next(k for k in v if "same bytes" in k)
    control_label = next((k for k in v if "noise control" in k), None)
    if control_label:
        same = [a / b for a, b in zip(ref[clock], v[same_label][clock])]  # in run order: paired by repetition
        control = [a / b for a, b in zip(ref[clock], v[control_label][clock])]
        met, mid, se = throughput_verdict(same, control)
        slower = sum(a < b for a, b in zip(same, control))
        lines += ["", f"Goal (mixed widths no slower per example than the uniform width of the same bytes): "
                  f"mixed/uniform examples/s {statistics.median(same):.3f} (CPU time, median of {len(same)}), "
                  f"the uniform model against its own copy {statistics.median(control):.3f}; per repetition mixed "
                  f"minus the copy {mid:+.3f} (median; standard error {se:.3f}), mixed the slower in {slower} of "
                  f"{len(same)} -> **{'met' if met else 'not met'}** (met: that median at least -2 standard errors)."]
    widths = sorted(v[same_label]["widths"].values())
    lines += ["", f"Mixed widths of the same bytes: {widths.count(8)} tables at 8, {widths.count(16)} at 16, "
              f"{widths.count(32)} at 32 (`same_bytes_widths`: the largest tables widened first), "
              f"{v[same_label]['embedding_bytes']:,} table bytes against {ref['embedding_bytes']:,} at uniform 16. "
              f"1-minute load average {r['load'][0]:.1f} at the end.", ""]
    return lines


def _report_rss(args) -> list[str]:
    r = _results.load(args.out, "rss")
    if not r:
        return ["Peak RSS: not measured yet (`--parts rss`).", ""]
    lines = [f"**Peak RSS of one final-stage training at {r['rows']:,} Criteo-format rows** "
             f"(benchmarks/predict.py's measurement, section \"Scoring raw rows and the memory of one final-stage "
             f"training\": tables sized by the data, {r['buckets']:,} hash buckets, the final template, then the "
             f"dlrm-like arch exported from it and trained on the first {r['train_rows']:,} rows, evaluated on "
             f"all val and test rows; the space has `table_dims: [0, 4, 8, 16]`, common width 16). Mixed widths: "
             f"`rss_widths` (tables of >= 100k rows at 4, >= 10k at 8, the rest at 16)"
             + (f"; found: the arch of `{r['arch_file']}`, its own blocks and table widths." if r.get("arch_file")
                else ", in place of a searched arch until the search has run."), "",
             "| arch | embedding rows | table MiB | the stage's table estimate, MiB | peak RSS | estimate | "
             "test log loss |", "|---|---|---|---|---|---|---|"]
    for label, x in r["runs"].items():
        lines.append(f"| {label} | {x['table_rows']:,} | {_mib(x['embedding_bytes'])} | "
                     f"{_mib(x.get('estimate_table_bytes'))} | {x['peak_rss_mib']:,} MiB | "
                     f"{x['estimate_mib']:,} MiB | {_f(x['test_logloss'], 5)} |")
    lines += ["", f"1-minute load average {r['load'][0]:.1f} at the end.", ""]
    return lines


def _report_profile(args, profile: str, table: dict, runs: list[dict]) -> list[str]:
    try:
        _, data = _data(args, profile) if (Path(args.out) / "data" / profile / "meta.json").exists() else (0, None)
    except Exception:
        data = None
    signal, noise = noise_fields(data) if data is not None else ([], [])
    lines = [f"#### {profile}", ""]
    if data is not None:
        lines += [f"Signal fields (the generator's click model reads them): {', '.join(signal) or '-'}; noise "
                  f"fields ({len(noise)}): {', '.join(noise) or 'none'}.", ""]
    if not table:
        lines += ["Baselines: not trained yet (`--parts baselines`): no goal can be judged.", ""]
        for r in runs:
            lines += [f"Search seed {r['seed']}, the front: " + "; ".join(
                f"{m['label']} {_f(m['test_logloss'])} test at {_mib(m['embedding_bytes'])} MiB"
                for m in sorted(r["models"], key=lambda m: m["embedding_bytes"] or 0)
                if m["kind"] == "candidate" and m["on_front"] and m["embedding_bytes"] is not None) + ".", ""]
        return lines
    seeds = list(range(args.seeds))
    lines += [f"| model | width | test, seed {' / '.join(map(str, seeds))} | test mean | sd | val mean | table MiB |",
              "|---|---|---|---|---|---|---|"]
    best = best_baseline(table)
    for (name, width), v in sorted(table.items(), key=lambda kv: (PROFILES[profile].index(kv[0][0])
                                                                   if kv[0][0] in PROFILES[profile] else 9, kv[0][1])):
        mark = "**" if best and best[0] == (name, width) else ""
        lines.append(f"| {mark}{name}{mark} | {width}{'*' if v['imported'] else ''} | "
                     f"{' / '.join(_f(t) for t in v['tests'])} | {mark}{_f(v['test'])}{mark} | {_f(v['sd'])} | "
                     f"{_f(v['val'])} | {_mib(v['embedding_bytes'])} |")
    lines.append("")
    if not runs:
        lines += [f"Search: not run at these rows (`--parts search` with `{args.recipe}`).", ""]
        return lines
    (bname, bwidth), b = best
    lines += [f"Search (`{args.recipe}`), front models per search seed (x bytes = table bytes / the best "
              f"baseline's, {bname} at width {bwidth}: {_f(b['test'])} test, sd {_f(b['sd'])}, "
              f"{_mib(b['embedding_bytes'])} "
              "MiB):", "", "| seed | model | on front | test | val | table MiB | x bytes | dropped fields |",
              "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for m in sorted(r["models"], key=lambda m: m["embedding_bytes"] or 0):
            if m["kind"] != "candidate" or not m["on_front"] or m["embedding_bytes"] is None:
                continue
            drop = m.get("dropped_fields") or []
            lines.append(f"| {r['seed']} | {m['label']} | yes | {_f(m['test_logloss'])} | {_f(m['val_logloss'])} | "
                         f"{_mib(m['embedding_bytes'])} | {m['embedding_bytes'] / b['embedding_bytes']:.2f} | "
                         f"{f'{len(drop)}: ' + ', '.join(drop) if drop else '-'} |")
    lines.append("")
    # a stricter byte reference: the fewest bytes among the baselines within one sd of the best
    (cname, cwidth), c = min(((k, v) for k, v in table.items() if v["test"] <= b["test"] + (b["sd"] or 0.0)),
                             key=lambda kv: kv[1]["embedding_bytes"])
    if (cname, cwidth) != (bname, bwidth):
        lines += [f"Stricter byte reference: {cname} at width {cwidth}, within one sd of the best at "
                  f"{_mib(c['embedding_bytes'])} MiB (goal 1 against its bytes: 'goal 1, cheapest').", ""]
    for r in runs:
        g = goals(r["models"], b)
        strict = goals(r["models"], {**b, "embedding_bytes": c["embedding_bytes"]})["small"] \
            if (cname, cwidth) != (bname, bwidth) else None
        d = dropped_vs_noise(r["models"], noise)
        small, better = g["small"], g["better"]
        lines.append(
            f"- search seed {r['seed']}: goal 1 (within one sd, {_f(b['test'] + g['sd'])}, at <= 0.25x bytes): "
            + (f"**met** by {small['label']} ({_f(small['test_logloss'])}, "
               f"{small['embedding_bytes'] / b['embedding_bytes']:.2f}x)" if small else "not met")
            + ("" if (cname, cwidth) == (bname, bwidth) else "; goal 1, cheapest: "
               + (f"**met** by {strict['label']} ({strict['embedding_bytes'] / c['embedding_bytes']:.2f}x)"
                  if strict else "not met"))
            + f"; goal 2 (below {_f(b['test'] - 2 * g['sd'])} at <= 1x bytes): "
            + (f"**met** by {better['label']} ({_f(better['test_logloss'])}, "
               f"{better['embedding_bytes'] / b['embedding_bytes']:.2f}x)" if better else "not met")
            + (f"; fields dropped by every front model: {len(d['always'])} ({d['always_noise']} noise), by any: "
               f"{len(d['any'])} ({d['any_noise']} of the {d['noise']} noise fields)" if d["noise"] else
               f"; fields dropped by every front model: {len(d['always'])}, by any: {len(d['any'])} (the profile "
               "has no noise field)")
            + (f"; signal fields dropped: {', '.join(d['signal_dropped'])}" if d["signal_dropped"] else "") + ".")
    lines.append("")
    return lines


def report(args) -> str:
    lines = ["## Embedding search: per-table widths, memory and log loss (`benchmarks/embedding.py`)", "",
             f"{platform.machine()}, {os.cpu_count()} CPU cores, torch threads 1. {args.machine}".rstrip(), ""]
    lines += _report_throughputs(args)
    lines += _report_rss(args)
    tables = {p: baseline_table(args, p) for p in args.profiles}
    fronts = {p: searches(args, p) for p in args.profiles}
    lines += [f"### The baselines at widths {' / '.join(map(str, WIDTHS))} and the search's front, "
              f"{args.rows:,} rows", ""]
    if args.rows < 1_000_000:
        lines += [f"**Reduced run: {args.rows:,} rows instead of the full 1M, what the shared 2 CPU cores "
                  "allowed.**", ""]
    lines += [f"The structure suite's strongest baselines per profile (`benchmarks/suite.py`), trained like "
              f"suite.py trains them (`{SUITE_RECIPE}`'s final stage: 2 epochs ending on the better val epoch, "
              f"Adagrad lr 0.12, batch 512) at table width 8, 16 and 32, training seeds "
              f"{' and '.join(map(str, range(args.seeds)))}; table MiB = float32 bytes of every embedding table "
              "(an FM's first-order tables included). Bold: the best baseline (lowest mean test log loss). "
              "Width marked *: read from suite.py's cache (--suite-out) rather than trained here.", ""]
    for profile in args.profiles:
        lines += _report_profile(args, profile, tables[profile], fronts[profile])
    if plot(args, fronts, tables, args.plot):
        lines += [f"Plot (test log loss against table MiB; baselines as squares with their seed sd, each search "
                  f"seed's candidates as dots, its front, chosen on validation, joined by a line): "
                  f"`{_rel(args.plot)}`.", ""]
    extra = "".join(f" --set {x}" for x in args.set)
    run = "OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/embedding.py"
    cmds = [f"`{run} --rows {args.rows} --seeds {args.seeds} --profiles {','.join(args.profiles)} --parts baselines "
            f"--suite-out <suite.py's --out at these rows>{extra}`"]
    for arch in TP_ARCHS:
        if tp := _results.load(args.out, throughput_name(arch)):
            cmds.append(f"`{run} --rows {args.rows} --parts throughput --tp-arch {arch} --tp-rows {tp['rows']} "
                        f"--steps {tp['steps']} --reps {tp['reps']}`")
    if rs := _results.load(args.out, "rss"):
        cmds.append(f"`{run} --rows {args.rows} --parts rss --rss-rows {rs['rows']} --buckets {rs['buckets']} "
                    f"--train-rows {rs['train_rows']}" + (f" --rss-arch {rs['arch_file']}" if rs.get("arch_file")
                                                          else "") + "`")
    extra += "".join(f" --search-set {x}" for x in args.search_set)
    cmds.append(f"`{run} --rows {args.rows} --seeds {args.seeds} --parts search --recipe {args.recipe}{extra}`"
                + ("" if any(fronts.values()) else " (not run yet)"))
    lines[4:4] = ["Commands: " + "; ".join(cmds) + ". `--report-only` rebuilds this section from the caches under "
                  f"`{_rel(args.out)}`.", ""]  # above the tables
    return "\n".join(lines)


def _rel(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


# ---------------------------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the profiles' data (baselines, search)")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)), help="the baselines' table widths")
    ap.add_argument("--baselines", default=",".join(sorted({b for v in PROFILES.values() for b in v})),
                    help="which of the profiles' strong baselines to train (default: all)")
    ap.add_argument("--seeds", type=int, default=2, help="training seeds (baselines) and search seeds")
    ap.add_argument("--recipe", default=RECIPE, help="the search's recipe (part search)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra recipe overrides, of the baselines' recipe and the search's (data settings)")
    ap.add_argument("--search-set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra overrides of the search's recipe alone; {seed} stands for the search seed "
                         "(search.seeds=[benchmarks/archs/f-s{seed}.json]: each search seed from its own arch)")
    ap.add_argument("--workers", type=int, default=1, help="the search's and final stage's workers")
    ap.add_argument("--tp-arch", default="dlrm-like", choices=TP_ARCHS, help="the throughput part's arch")
    ap.add_argument("--tp-rows", type=int, default=50_000, help="rows of the throughput part's Criteo-shaped data")
    ap.add_argument("--steps", type=int, default=40, help="timed training steps per variant and repetition")
    ap.add_argument("--reps", type=int, default=12, help="repetitions of the alternated throughput timing")
    ap.add_argument("--rss-rows", type=int, default=1_000_000, help="rows of the peak-RSS part")
    ap.add_argument("--buckets", type=int, default=1_000_000, help="hash buckets per field of the RSS part")
    ap.add_argument("--train-rows", type=int, default=8192, help="training rows of the peak-RSS trainings")
    ap.add_argument("--rss-arch", default=None,
                    help="an arch JSON (a run's best_arch.json) measured beside uniform and rule-mixed widths")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/out/embedding-<rows/1000>k)")
    ap.add_argument("--suite-out", default=None,
                    help="suite.py's results folder to read data and width-16 results from (never written; "
                         "default benchmarks/out/suite-<rows/1000>k)")
    ap.add_argument("--section", default=None, help="markdown section (default benchmarks/sections/embedding.md)")
    ap.add_argument("--plot", default=None, help="the front plot (default <out>/front.png)")
    ap.add_argument("--machine", default="", help="a sentence on the load during the runs, for the report")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    args.profiles = [p for p in args.profiles.split(",") if p]
    args.baselines = [b for b in args.baselines.split(",") if b]
    known_baselines = sorted({b for v in PROFILES.values() for b in v})
    for what, given, known in (("--parts", args.parts, PARTS), ("--profiles", args.profiles, PROFILES),
                               ("--baselines", args.baselines, known_baselines)):
        bad = [x for x in given if x not in known]
        if bad:
            ap.error(f"{what}: unknown {', '.join(bad)}; known: {', '.join(known)}")
    try:
        args.widths = [int(w) for w in args.widths.split(",") if w]
    except ValueError:
        ap.error(f"--widths: not a list of integers: {args.widths!r}")
    args.out = Path(args.out or ROOT / f"benchmarks/out/embedding-{args.rows // 1000}k")
    args.suite_out = Path(args.suite_out or ROOT / f"benchmarks/out/suite-{args.rows // 1000}k")
    args.plot = Path(args.plot or args.out / "front.png")
    if not args.report_only:
        if "throughput" in args.parts:
            _results.save(args.out, throughput_name(args.tp_arch), throughput(args))
        if "rss" in args.parts:
            _results.save(args.out, "rss", rss(args))
        for profile in args.profiles:
            if "baselines" in args.parts:
                run_baselines(args, profile)
            if "search" in args.parts:
                run_search(args, profile)
    _results.publish(report(args), Path(args.section or HERE / "sections/embedding.md"), NOTES,
                     fallback=None if args.section else Path(args.out) / "section.md")
    return 0


NOTES = _results.notes_marker("embedding.py")


if __name__ == "__main__":
    raise SystemExit(main())
