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
    # single tasks (the CLI verbs), built from the same pieces as a run:
    api.prepare_folder("criteo", ["train.txt"], "data/criteo")   # or api.generate_synthetic(...)
    warm = api.warmup_supernet("data/criteo", api.train_config(seed=0), "nasrec-full", 0.01, out_dir="w")
    scores = api.score_arch("data/criteo", "arch.json", ["sigeo"], supernet="w/supernet.pt")
    metrics, out = api.train_model("data/criteo", api.train_config(), baseline="dcnv2")

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
           "ranking_study", "prepare_folder", "generate_synthetic", "train_config", "train_model",
           "warmup_supernet", "score_arch", "list_proxies", "export_arch", "export_trained",
           "vision_correlate", "vision_search",
           "demo_recipe_path", "Recipe", "RunResult", "CompareResult", "StudyResult"]


def load_recipe(path: str | Path, *overrides: str, device: str | None = None) -> Recipe:
    """A recipe file with 'key=value' overrides (strictly checked: bad keys/types raise RecipeError);
    `device` (auto | cpu | cuda | cuda:N) sets where every training of the run computes (warm-up, short
    trainings, final stage, baselines)."""
    recipe = _load_recipe(path, overrides)
    if device is None:
        return recipe
    import dataclasses

    from ctrnas.device import resolve_device

    resolve_device(device)  # a bad setting fails here, before any stage
    final = recipe.final
    if final.train is not None:
        final = dataclasses.replace(final, train=dataclasses.replace(final.train, device=device))
    return dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, device=device), final=final)


def _progress(recipe: Recipe, progress: bool) -> Recipe:
    """`progress=False` (`--no-progress`) wins over the recipe's `train.progress` / `final.train.progress`."""
    if progress:
        return recipe
    import dataclasses

    final = recipe.final
    if final.train is not None:
        final = dataclasses.replace(final, train=dataclasses.replace(final.train, progress=False))
    return dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, progress=False), final=final)


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
    recipe = _progress(recipe, progress)
    if distributed:
        from ctrnas.distributed.dmp import ShardingConfig
        from ctrnas.pipeline.distributed import run_recipe_distributed

        return run_recipe_distributed(recipe, ShardingConfig(sharding), dist_backend, progress=progress, echo=echo)
    return run_recipe(recipe, progress=progress, echo=echo)


def compare(recipe: Recipe, fractions: Sequence[float] = (0.0, 0.01, 1.0), progress: bool = True,
            echo=print, multifidelity: bool = False, random: bool = False) -> CompareResult:
    """Zero-shot / sub-one-shot / one-shot (by default) on the same data, with `multifidelity` the
    multi-fidelity search, with `random` random search at the same FTE: test log loss, AUC, time per stage
    and compute (FTE)."""
    from ctrnas.pipeline.compare import compare_settings

    return compare_settings(_progress(recipe, progress), fractions, progress=progress, echo=echo,
                            multifidelity=multifidelity, random=random)


def ranking_study(recipe: Recipe, archs: int = 50, fractions: Sequence[float] = (0.0, 0.01, 1.0),
                  proxies: Sequence[str] = ("sigeo", "zico", "params", "naswot", "synflow"),
                  progress: bool = True, echo=print, workers: int = 1) -> StudyResult:
    """Train `archs` random subnets from scratch and correlate each proxy (after each warm-up) with them;
    `workers` > 1 trains them in that many processes (one torch thread each; same results)."""
    from ctrnas.pipeline.study import ranking_study as _study

    return _study(_progress(recipe, progress), archs, fractions, proxies, progress=progress, echo=echo,
                  workers=workers)


def demo_recipe_path() -> Path:
    """recipes/synthetic.yaml of the source checkout (or of the current directory)."""
    for root in (Path(__file__).resolve().parents[1], Path.cwd()):
        if (root / "recipes" / "synthetic.yaml").is_file():
            return root / "recipes" / "synthetic.yaml"
    from ctrnas.errors import CtrnasError

    raise CtrnasError("recipes/synthetic.yaml not found: run `ctrnas demo` from the ctrnas checkout, or "
                      "`ctrnas run RECIPE` with a recipe of your own")


# ------------------------------------------------------------------------------------------------------
# Single tasks: what `ctrnas prepare|train|warmup|score|export|vision` do, one call each
# ------------------------------------------------------------------------------------------------------


def prepare_folder(kind: str, inputs: Sequence[str], out: str | Path, config: str | Path | None = None,
                   overrides: dict | None = None, overwrite: bool = False) -> str:
    """Raw files of `kind` -> a prepared dataset folder (PrepareConfig from `config`, then non-None
    `overrides`); returns the one-paragraph summary. A recipe run with the same settings reuses the folder.
    `overwrite` replaces a folder made from other inputs or holding files ctrnas did not write (those stay)."""
    from ctrnas.data.prepare import prepare, summary
    from ctrnas.data.prepare_config import load_prepare_config

    cfg = load_prepare_config(config, overrides or {})
    meta = prepare(kind, inputs, out, cfg, overwrite=overwrite)  # records its source itself, under the lock
    return summary(meta, out)


def generate_synthetic(profile: str, rows: int, seed: int, out: str | Path, rows_per_shard: int = 1_000_000,
                       overwrite: bool = False, structure: str = "default") -> dict:
    """A synthetic dataset folder with a known click model (`structure`: how its components mix, a name in
    `ctrnas.data.synthetic_profiles.STRUCTURES`); returns its meta (splits, Bayes log loss, signal fields)."""
    from ctrnas.data.dataset import synthetic_source
    from ctrnas.data.synthetic import generate

    return generate(profile=profile, rows=rows, seed=seed, out=out, rows_per_shard=rows_per_shard, overwrite=overwrite,
                    source=synthetic_source(profile, rows, seed, {}, structure),  # recorded under the folder's lock
                    structure=structure)


def train_config(recipe_path: str | Path | None = None, **overrides):
    """TrainConfig from a YAML file (its `train:` section or top level) with the non-None `overrides`;
    `final=True`: a run's recipe gives its final stage's settings (`final.train` over `train`)."""
    from ctrnas.pipeline.tasks import train_config as _train_config

    return _train_config(recipe_path, **overrides)


def train_model(data_dir, cfg, baseline: str | None = None, arch=None, **options):
    """(metrics, out_dir) of a baseline or an architecture trained from scratch (options: space, out_dir,
    train_fraction, layernorm, embedding_init, dense_init, distributed, sharding, dist_backend, and recipe: a run's
    recipe, to train as its final stage with `train_config(recipe, final=True)`)."""
    from ctrnas.pipeline.tasks import train_model as _train_model

    return _train_model(data_dir, cfg, baseline=baseline, arch=arch, **options)


def warmup_supernet(data_dir, cfg, space="nasrec-full", fraction: float = 0.01, full_ratio: float = 0.2,
                    out_dir=None) -> WarmupResult:
    """The run's warm-up stage outside a run: same seeded supernet, same `ctrnas-supernet/1` checkpoint."""
    from ctrnas.pipeline.tasks import warmup_supernet as _warmup

    return _warmup(data_dir, cfg, space, fraction, full_ratio, out_dir)


def score_arch(data_dir, arch, proxies: Sequence[str] = ("sigeo", "zico"), options: dict | None = None,
               **settings) -> dict:
    """{proxy: ProxyResult} of one architecture, scored as the search scores it (settings: supernet, space,
    emb_dim, seed, batches, batch_size, offset; see `ctrnas.pipeline.fitness.scoring.score_arch`)."""
    from ctrnas.pipeline.fitness.scoring import score_arch as _score

    return _score(data_dir, arch, list(proxies), options, **settings)


def list_proxies() -> list[str]:
    from ctrnas.proxies import list_proxies as _list

    return _list()


def export_arch(arch, out_dir, **settings) -> dict:
    """A standalone model folder of one architecture; the model card (settings: supernet, data_dir, space,
    emb_dim, row_cap, init, seed, metrics_path, torch_export)."""
    from ctrnas.pipeline.tasks import export_arch as _export

    return _export(arch, out_dir, **settings)


def export_trained(folder, out_dir, torch_export: bool = False) -> dict:
    """The model a `ctrnas train --out FOLDER` (or `train_model(out_dir=...)`) trained, as a model folder;
    the model card."""
    from ctrnas.pipeline.tasks import export_trained as _export

    return _export(folder, out_dir, torch_export=torch_export)


def predict(model_dir, data, out=None, **settings):
    """Score rows with an exported model (`ctrnas.serving.predict`). `data`: raw files of the model's
    format or a prepared dataset folder, written to Parquet `out` (returns the summary: rows read, written,
    rejected, log loss/AUC when labelled); or a pandas DataFrame / Arrow table of raw columns (returns the
    same kind, one row per input row: line, probability, reject, label)."""
    from ctrnas.serving.predict import predict_file, predict_table

    if isinstance(data, (str, Path, list, tuple)):
        if out is None:
            raise TypeError("predict: give `out` (a Parquet file) to score files")
        return predict_file(model_dir, data, out, **settings)
    result = predict_table(model_dir, data, **settings)
    return result if hasattr(data, "schema") and not hasattr(data, "iloc") else result.to_pandas()


def vision_correlate(**settings) -> dict:
    """NB201 proxy correlation (`ctrnas.vision.tasks.correlate`)."""
    from ctrnas.vision.tasks import correlate

    return correlate(**settings)


def vision_search(**settings) -> list:
    """Proxy-driven NB201 searches, one per seed (`ctrnas.vision.tasks.search`)."""
    from ctrnas.vision.tasks import search

    return search(**settings)
