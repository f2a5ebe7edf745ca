"""`ctrnas compare`: the same recipe at several warm-up fractions (zero-shot 0, sub-one-shot 0.01, one-shot
1.0 with inherited-weight evaluation) on the same prepared data, with quality, wall time and compute in
full-training equivalents (FTE, `pipeline.budget`) side by side."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Sequence

from ctrnas.files import atomic_write_text
from ctrnas.pipeline.data import prepare_data
from ctrnas.pipeline.results import CompareResult
from ctrnas.pipeline.run import run_recipe
from ctrnas.recipe import Recipe

STAGES = ("data", "warmup", "search", "final", "total")


def setting_label(fraction: float) -> str:
    """zero-shot / one-shot / sub-one-shot-<fraction>: the names SiGeo uses for the three settings."""
    if fraction == 0:
        return "zero-shot"
    if fraction >= 1:
        return "one-shot"
    return f"sub-one-shot-{fraction:g}"


def setting_recipe(recipe: Recipe, fraction: float, data_path: Path, out: Path) -> Recipe:
    """The recipe at `fraction`, writing to `out/<label>` and reading the shared data folder."""
    label = setting_label(fraction)
    return dataclasses.replace(
        recipe, name=f"{recipe.name}-{label}", output=str(out / label),
        warmup=dataclasses.replace(recipe.warmup, fraction=fraction, rows=None),
        data=dataclasses.replace(recipe.data, path=str(data_path)))


def markdown_table(rows: list[dict]) -> str:
    head = ("| setting | fitness | test log loss | test AUC | val log loss | FTE | "
            + " | ".join(f"{s} s" for s in STAGES) + " |")
    lines = [head, "|" + "---|" * (6 + len(STAGES))]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['fitness']} | {r['test_logloss']:.5f} | {r['test_auc']:.5f} | "
                     f"{r['val_logloss']:.5f} | {r['fte']:.2f} | "
                     + " | ".join(f"{r[f'{s}_s']:.1f}" for s in STAGES) + " |")
    return "\n".join(lines)


def multifidelity_recipe(recipe: Recipe, data_path: Path, out: Path) -> Recipe:
    """The recipe at its own warm-up with `search.strategy: multifidelity`, writing to `out/multifidelity`."""
    return dataclasses.replace(
        recipe, name=f"{recipe.name}-multifidelity", output=str(out / "multifidelity"),
        search=dataclasses.replace(recipe.search, strategy="multifidelity"),
        data=dataclasses.replace(recipe.data, path=str(data_path)))


def random_recipe(recipe: Recipe, data_path: Path, out: Path, budget: int) -> Recipe:
    """Random search at `budget` FTE: that many random archs of the recipe's space retrained as the final
    stage trains (no warm-up, no scoring; `fitness: random`), the best on validation exported."""
    return dataclasses.replace(
        recipe, name=f"{recipe.name}-random", output=str(out / "random"), fitness="random",
        warmup=dataclasses.replace(recipe.warmup, fraction=0.0, rows=None),
        search=dataclasses.replace(recipe.search, strategy="random", top_k=budget,
                                   random=dataclasses.replace(recipe.search.random, budget=budget,
                                                              batch_size=budget, maximize=True)),
        final=dataclasses.replace(recipe.final, top_k=None, emb_dims=()),
        data=dataclasses.replace(recipe.data, path=str(data_path)))


def search_fte(res) -> float:
    """What a run's search cost, baselines aside: warm-up, search and the retrained top-k, in FTE."""
    fte = res.metrics["compute"]["fte"]
    return sum(fte.get(k, 0.0) for k in ("warmup", "search", "final"))


def compare_settings(recipe: Recipe, fractions: Sequence[float] = (0.0, 0.01, 1.0), progress: bool = True,
                     echo=print, multifidelity: bool = False, random: bool = False) -> CompareResult:
    """Run the pipeline once per warm-up fraction (and, with `multifidelity`, once with the multi-fidelity
    search at the recipe's warm-up; with `random`, random search at the FTE of the costliest of those, rounded
    to whole trainings); write compare.{json,csv,md} under `<output>/compare`."""
    out = recipe.output_dir / "compare"
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(recipe)
    runs, rows = {}, []
    settings = [(setting_label(float(f)), float(f), setting_recipe(recipe, float(f), data.path, out))
                for f in fractions]
    if multifidelity:
        settings.append(("multifidelity", recipe.warmup.fraction, multifidelity_recipe(recipe, data.path, out)))
    if random:
        settings.append(("random", 0.0, None))
    for label, f, r in settings:
        if r is None:  # random search at the FTE the searches above spent
            budget = max(1, round(max((search_fte(x) for x in runs.values()), default=recipe.top_k)))
            r = random_recipe(recipe, data.path, out, budget)
            label = f"random ({budget} FTE)"
        res = run_recipe(r, data=data, progress=progress, echo=echo)
        runs[label] = res
        best = res.final.best
        rows.append({"setting": label, "fraction": f, "fitness": res.search.fitness_name,
                     "test_logloss": best.test.get("logloss"), "test_auc": best.test.get("auc"),
                     "val_logloss": best.val.get("logloss"), "arch_key": best.arch.key() if best.arch is not None else None,
                     "evaluations": len(res.search.history),
                     "fte": res.metrics["compute"]["fte"]["total"],  # full-training equivalents, all stages
                     **{f"{s}_s": res.timings.get(s, 0.0) for s in STAGES}})
    with open(out / "compare.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write_text(out / "compare.json", json.dumps(rows, indent=1))
    bayes = (data.bayes_logloss or {}).get("test")
    text = f"# ctrnas compare `{recipe.name}`\n\n" + markdown_table(rows) + "\n"
    if bayes is not None:
        text += f"\nBayes-optimal test log loss: {bayes:.5f}\n"
    atomic_write_text(out / "compare.md", text)
    if echo is not None:
        echo("\n" + markdown_table(rows))
    return CompareResult(runs, rows, out)
