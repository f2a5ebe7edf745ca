"""The Python API: everything the CLI does, one call away, with typed results.

    from ctrnas import api
    recipe = api.load_recipe("recipes/synthetic.yaml", "search.workers=2", "warmup.fraction=0.05")
    result = api.run(recipe)                  # RunResult: .test_logloss, .final.best.arch, .output_dir
    # or stage by stage, e.g. inside an ads training pipeline or a notebook:
    data = api.prepare_data(recipe)
    warm = api.warmup(recipe, data)           # WarmupResult: .supernet
    found = api.search(recipe, data, warm)    # SearchStageResult: .history, .result.top_k(15)
    final = api.train_final(recipe, data, found, warm)
    table = api.compare(recipe).table         # zero-shot / sub-one-shot / one-shot side by side
    study = api.ranking_study(recipe, archs=50, fractions=(0, 0.01, 1.0))

Stage functions write under `recipe.output_dir` unless `out_dir=None` is given (then nothing is written
but the data folder). Errors are `ctrnas.errors.CtrnasError` subclasses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctrnas.pipeline.results import (CompareResult, DataResult, FinalResult, RunResult, SearchStageResult,
                                     StudyResult, WarmupResult)
from ctrnas.recipe import Recipe, load_recipe as _load_recipe, override

_DEFAULT = object()

__all__ = ["load_recipe", "override", "prepare_data", "warmup", "search", "train_final", "run", "compare",
           "ranking_study", "Recipe", "RunResult", "CompareResult", "StudyResult"]


def load_recipe(path: str | Path, *overrides: str) -> Recipe:
    """A recipe file with 'key=value' overrides (strictly checked: bad keys/types raise RecipeError)."""
    return _load_recipe(path, overrides)


def _out(recipe: Recipe, out_dir, sub: str) -> Path | None:
    if out_dir is _DEFAULT:
        return recipe.output_dir / sub
    return None if out_dir is None else Path(out_dir)


def prepare_data(recipe: Recipe) -> DataResult:
    """The recipe's prepared dataset folder (made from raw files or a synthetic profile if needed)."""
    from ctrnas.pipeline.data import prepare_data as _prepare

    return _prepare(recipe)


def warmup(recipe: Recipe, data: DataResult | None = None, out_dir=_DEFAULT) -> WarmupResult:
    """The supernet warmed up on the first `warmup.fraction` of the training rows (0: untrained)."""
    from ctrnas.pipeline.stages import warmup_stage

    data = data or prepare_data(recipe)
    return warmup_stage(recipe, data, _out(recipe, out_dir, "warmup"))


def search(recipe: Recipe, data: DataResult | None = None, warm: WarmupResult | None = None,
           out_dir=_DEFAULT, progress: bool = True) -> SearchStageResult:
    """The recipe's search with its fitness (proxy or one-shot); resumes from its checkpoint if present."""
    from ctrnas.pipeline.stages import search_stage

    data = data or prepare_data(recipe)
    warm = warm or warmup(recipe, data)
    return search_stage(recipe, data, warm, _out(recipe, out_dir, "search"), progress=progress)


def train_final(recipe: Recipe, data: DataResult, found: SearchStageResult, warm: WarmupResult | None = None,
                out_dir=_DEFAULT, progress: bool = True) -> FinalResult:
    """Retrain the search's top-k from scratch, pick by validation, export the best (and train baselines)."""
    from ctrnas.pipeline.final import final_stage

    # the final models are re-drawn from the training seed: without a warm-up, any supernet of the right
    # shape serves as the export template, and final_stage builds one
    supernet = warm.supernet if warm is not None else None
    out = recipe.output_dir if out_dir is _DEFAULT else (None if out_dir is None else Path(out_dir))
    return final_stage(recipe, data, found, supernet, out, progress=progress)


def run(recipe: Recipe | str | Path, *overrides: str, progress: bool = True, echo=print,
        distributed: bool = False, sharding: str | None = None, dist_backend: str | None = None) -> RunResult | None:
    """Every stage and the report folder; `recipe` may be a path (then `overrides` apply).

    `distributed=True` (on every rank of a torchrun job) trains the final stage's models with their tables
    sharded over the ranks (`sharding`: None = TorchRec's planner, or "row_wise", "table_wise", ...;
    `dist_backend`: None = nccl with GPUs, gloo on CPU); rank 0 returns the RunResult, the others None.
    """
    from ctrnas.pipeline.run import run_recipe

    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe, *overrides)
    elif overrides:
        recipe = override(recipe, *overrides)
    if distributed:
        from ctrnas.distributed.dmp import ShardingConfig
        from ctrnas.distributed.pipeline import run_recipe_distributed

        return run_recipe_distributed(recipe, ShardingConfig(sharding), dist_backend, progress=progress, echo=echo)
    return run_recipe(recipe, progress=progress, echo=echo)


def compare(recipe: Recipe, fractions: Sequence[float] = (0.0, 0.01, 1.0), progress: bool = True,
            echo=print) -> CompareResult:
    """Zero-shot / sub-one-shot / one-shot (by default) on the same data: test log loss, AUC, time per stage."""
    from ctrnas.pipeline.compare import compare_settings

    return compare_settings(recipe, fractions, progress=progress, echo=echo)


def ranking_study(recipe: Recipe, archs: int = 50, fractions: Sequence[float] = (0.0, 0.01, 1.0),
                  proxies: Sequence[str] = ("sigeo", "zico", "params", "naswot", "synflow"),
                  progress: bool = True, echo=print, workers: int = 1) -> StudyResult:
    """Train `archs` random subnets from scratch and correlate each proxy (after each warm-up) with them;
    `workers` > 1 trains them in that many processes (one torch thread each; same results)."""
    from ctrnas.pipeline.study import ranking_study as _study

    return _study(recipe, archs, fractions, proxies, progress=progress, echo=echo, workers=workers)
