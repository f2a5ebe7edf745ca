"""One whole run: data -> warm-up -> search -> final -> report, with wall time per stage."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from ctrnas.pipeline.data import prepare_data
from ctrnas.pipeline.final import final_stage
from ctrnas.pipeline.report import write_environment, write_report
from ctrnas.pipeline.results import DataResult, RunResult
from ctrnas.pipeline.stages import search_stage, warmup_stage
from ctrnas.recipe import Recipe

log = logging.getLogger("ctrnas.pipeline")


def run_recipe(recipe: Recipe, data: DataResult | None = None, progress: bool = True,
               echo=print) -> RunResult:
    """Run every stage of `recipe` into its output folder; `data` skips the data stage (compare shares it).

    A re-run of the same recipe reuses the prepared data and the warmed-up supernet and resumes the search
    from its last generation checkpoint.
    """
    if recipe.threads is not None:
        import torch

        torch.set_num_threads(recipe.threads)
    out = recipe.output_dir
    out.mkdir(parents=True, exist_ok=True)
    write_environment(out, recipe)
    timings: dict[str, float] = {}
    # CPU seconds of this process per stage: on a shared machine wall time says more about the neighbours
    # (scoring worker processes are not included)
    cpu: dict[str, float] = {}
    c0 = c_all = time.process_time()

    def lap(stage: str) -> None:
        nonlocal c0
        cpu[stage] = time.process_time() - c0
        c0 = time.process_time()

    t_all = time.perf_counter()

    def say(text: str) -> None:
        if echo is not None:
            echo(f"[{recipe.name}] {text}")

    if data is None:
        say(f"data: {recipe.data_dir}")
        data = prepare_data(recipe)
    timings["data"] = data.seconds
    lap("data")
    rows = {s: v.get("rows") for s, v in data.meta["splits"].items()}
    say(f"data ready ({'reused' if data.reused else 'made'} in {data.seconds:.1f} s): {rows}")

    warm = warmup_stage(recipe, data, out / "warmup")
    timings["warmup"] = warm.seconds
    lap("warmup")
    say(f"warm-up {recipe.warmup.fraction:g}: {warm.steps} steps on {warm.rows} rows in {warm.seconds:.1f} s")

    search = search_stage(recipe, data, warm, out / "search", progress=progress)
    timings["search"] = search.seconds
    lap("search")
    best = search.result.best
    say(f"search ({search.fitness_name}): {len(search.history)} evaluations in {search.seconds:.1f} s; "
        f"best fitness {best.value if best else float('nan'):.5g}")

    final = final_stage(recipe, data, search, warm.supernet, out, progress=progress)
    timings["final"] = final.seconds
    timings["total"] = time.perf_counter() - t_all
    lap("final")
    cpu["total"] = time.process_time() - c_all
    metrics = write_report(out, recipe, {"data": data, "warm": warm, "search": search, "final": final,
                                         "timings": timings, "cpu": cpu})
    say(f"best by validation: test log loss {final.best.test.get('logloss', float('nan')):.5f}, "
        f"AUC {final.best.test.get('auc', float('nan')):.5f}; report: {Path(out) / 'summary.md'}")
    return RunResult(out, data, warm, search, final, timings, metrics)
