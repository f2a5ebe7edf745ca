"""Schedule variants of the early-stop protocol on the proxy-ranking study's random subnets, against that study's
truths (NASRec's 2-epoch cosine, the early-stop protocol without the weights' moving average, `plateau`, and the
default with it; `benchmarks/results/ranking/`).

    python benchmarks/subnet_schedules.py --data runs/data/avazu-pairwise-70k --variants anneal,anneal@best

The subnets, their tables and their training settings are the study's (`benchmarks/ranking.py`: NASRec-Small cut
to 3 blocks, the final stage's training); a variant changes only the schedule, as `benchmarks/schedules.py` names
it ("anneal": after the stop, the trainer's final anneal, one epoch here from the best weights at a rate falling
from the full rate to 0 by a cosine, kept only if val improves; "x0.25": the rate quartered at each evaluation
without improvement; "p4": `plateau` itself, trained on this machine; ...). A variant trains without the moving
average unless it names one ("ema1").
Each training is cached under --out (one JSON per subnet), so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import load, notes_marker, publish, save  # noqa: E402
from ranking import study_folder, study_recipe  # noqa: E402
from schedules import annealing_trainer, parse  # noqa: E402

TRUTHS = ("nasrec", "plateau", "early-stop")


def truths(results: Path, data: str) -> dict[str, dict]:
    """The study's trainings per truth: {truth: {arch key: entry of trained.json}}."""
    out = {}
    for t in TRUTHS:
        f = study_folder(results, data, t) / "study" / "trained.json"
        if f.exists():
            out[t] = json.loads(f.read_text())
    return out


def train_variant(recipe_path: str, data: str, variant: str, n_archs: int, out: Path, echo=print) -> dict[str, dict]:
    """{arch key: {"test", "val", "steps", "best_step", "per_epoch"}} of the study's subnets trained by `variant`."""
    from ctrnas.pipeline.data import prepare_data
    from ctrnas.pipeline.fitness.scratch import final_template, final_train_batches, job_model
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import sample_archs
    from ctrnas.train.batches import dataset_batches

    recipe = study_recipe(recipe_path, data, "early-stop", out / "recipe", [])
    v = parse(variant)
    cfg = dataclasses.replace(recipe.final_train, progress=False, early_stop_patience=v.patience,
                              plateau_factor=v.factor, evals_per_epoch=v.evals, min_improvement=v.threshold,
                              anneal=v.anneal is not None, ema=v.ema)
    recipe = dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, train=cfg))
    cache = out / Path(data).name / variant
    got: dict[str, dict] = {}
    data_r = template = None
    for i, arch in enumerate(sample_archs(recipe, n_archs)):
        hit = load(cache, arch.key())
        if hit is not None:
            got[arch.key()] = hit
            continue
        if data_r is None:
            data_r = prepare_data(recipe)
            template = final_template(recipe, data_r, new_supernet(recipe, data_r))
        train = final_train_batches(recipe, data_r)
        val = dataset_batches(data_r.path, "val", cfg.eval_batch_size, limit=recipe.final.val_rows)
        test = dataset_batches(data_r.path, "test", cfg.eval_batch_size, limit=recipe.final.test_rows)
        trainer = annealing_trainer()(job_model(recipe, data_r, template, ("arch", arch)), cfg)
        trainer.from_best = v.anneal == "best"
        s = trainer.fit(train, val)
        r = {"test": None if trainer.diverged else trainer.evaluate(test).logloss,
             "val": (s["best"] or {}).get("logloss"), "steps": s["steps"],
             "best_step": (s["best"] or {}).get("step", s["steps"]), "per_epoch": len(train),
             "seconds": s["seconds"]}
        save(cache, arch.key(), r)
        got[arch.key()] = r
        if echo:
            echo(f"{Path(data).name} {variant} {i + 1}/{n_archs}: test {r['test']}")
    return got


def sign_test(wins: int, n: int) -> float:
    """Two-sided sign-test p value of `wins` of `n` (ties left out)."""
    from scipy.stats import binomtest

    return float(binomtest(wins, n).pvalue) if n else math.nan


def report(results: Path, out: Path, datas: list[str], variants: list[str], command: str) -> str:
    lines = ["## Schedules on random subnets", "", f"Command: `python benchmarks/subnet_schedules.py {command}`", "",
             "The proxy-ranking study's 30 random subnets (NASRec-Small cut to 3 blocks of widths 16 to 64; "
             "\"Proxy ranking under each training protocol\"), each trained at training seed 0 by NASRec's 2-epoch "
             "cosine (`nasrec`), by the early-stop protocol without the weights' moving average (`plateau`), by "
             "the default with it (`early-stop`) and by variants of `plateau` (`benchmarks/schedules.py`'s names; "
             "`p4` is `plateau` itself, trained again beside the variants: that truth was trained on another "
             "machine, whose float rounding can move a stop). Per column: the median test log loss difference to "
             "the row's truth over the subnets (negative: the column is better), how many subnets it is better "
             "for, and the two-sided sign-test p value; `FTE`: mean epochs trained / 2.", ""]
    for data in datas:
        t = truths(results, data)
        runs = {**t, **{v: load_all(out / Path(data).name / v) for v in variants}}
        runs = {k: r for k, r in runs.items() if r}
        if "nasrec" not in runs:
            continue
        keys = sorted(set.intersection(*(set(r) for r in runs.values())))
        lines += [f"**{Path(data).name}** ({len(keys)} subnets)", "",
                  "| vs | " + " | ".join(f"`{c}`" for c in runs if c != "nasrec") + " |",
                  "|---|" + "---|" * (len(runs) - 1)]
        for base in ("nasrec", "plateau", "early-stop", "p4"):
            if base not in runs:
                continue
            cells = []
            for c in runs:
                if c == "nasrec":
                    continue
                if c == base:
                    cells.append("-")
                    continue
                d = [test(runs[c][k]) - test(runs[base][k]) for k in keys]
                d = [x for x in d if math.isfinite(x)]
                better, worse = sum(x < 0 for x in d), sum(x > 0 for x in d)
                cells.append(f"{statistics.median(d):+.5f}, better for {better}/{len(d)}, "
                             f"p {sign_test(better, better + worse):.3f}")
            lines.append(f"| `{base}` | " + " | ".join(cells) + " |")
        per_epoch = next((r["per_epoch"] for v in variants for r in runs.get(v, {}).values()), None)
        if per_epoch:
            fte = [f"`{c}` {statistics.fmean(steps(runs[c][k]) for k in keys) / per_epoch / 2:.2f}" for c in runs]
            lines += ["", "FTE: " + ", ".join(fte)]
        lines.append("")
    return "\n".join(lines)


def load_all(folder: Path) -> dict[str, dict]:
    return {f.stem: json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def test(entry: dict) -> float:
    """A training's test log loss: a study entry's or a variant's (NaN when it diverged)."""
    t = entry["test"]
    x = t.get("logloss") if isinstance(t, dict) else t
    return math.nan if x is None else float(x)


def steps(entry: dict) -> int:
    """Steps a training took: a variant's, or a study entry's (kept beside its val metrics)."""
    return entry["steps"] if "per_epoch" in entry else entry["val"]["steps"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", required=True, help="prepared dataset folder (repeatable)")
    ap.add_argument("--variants", default="anneal,anneal@best")
    ap.add_argument("--recipe", default="recipes/synthetic.yaml")
    ap.add_argument("--archs", type=int, default=30)
    ap.add_argument("--results", default=str(HERE / "results" / "ranking"), help="the ranking study's folders")
    ap.add_argument("--out", default=str(HERE / "results" / "subnet-schedules"), help="the caches, one JSON a training")
    ap.add_argument("--section", default=str(HERE / "sections" / "subnet-schedules.md"))
    ap.add_argument("--render", action="store_true", help="rebuild the section from the caches only")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    if not args.render:
        for data in args.data:
            for v in variants:
                train_variant(args.recipe, data, v, args.archs, Path(args.out))
    command = " ".join(f"--data {d}" for d in args.data) + f" --variants {args.variants}"
    publish(report(Path(args.results), Path(args.out), args.data, variants, command), Path(args.section),
            notes_marker("subnet_schedules.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
