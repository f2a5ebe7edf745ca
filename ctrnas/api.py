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
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ctrnas.pipeline.results import (CompareResult, DataResult, FinalResult, RunResult, SearchStageResult,
                                     StudyResult, WarmupResult)
from ctrnas.recipe import Recipe, load_recipe as _load_recipe, override

if TYPE_CHECKING:
    from ctrnas.train.config import TrainConfig

_DEFAULT = object()

__all__ = ["load_recipe", "override", "prepare_data", "warmup", "search", "train_final", "run", "compare",
           "ranking_study", "prepare_folder", "generate_synthetic", "train_config", "train_model",
           "warmup_supernet", "score_arch", "list_proxies", "export_arch", "export_trained",
           "vision_correlate", "vision_search",
           "demo_recipe_path", "Recipe", "RunResult", "CompareResult", "StudyResult"]


def load_recipe(path: str | Path, *overrides: str, device: str | None = None) -> Recipe:
    """A recipe file with 'key=value' overrides, strictly checked.

    Args:
        path: the recipe YAML file.
        *overrides: "dotted.key=value" strings applied in order (bad keys or types raise RecipeError).
        device: auto | cpu | cuda | cuda:N: where every training of the run computes (warm-up, short
            trainings, final stage, baselines); None keeps the recipe's.

    Returns:
        The checked, frozen `Recipe`.

    Example::

        recipe = api.load_recipe("recipes/synthetic.yaml", "search.workers=2", device="cpu")
    """
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


def run(recipe: Recipe | str | Path, *overrides: str, progress: bool = True, echo: Callable[..., Any] = print,
        distributed: bool = False, sharding: str | None = None, dist_backend: str | None = None) -> RunResult | None:
    """Every stage (data, warm-up, search, final) and the report folder under `recipe.output_dir`.

    Args:
        recipe: a `Recipe`, or the path of a recipe file.
        *overrides: "dotted.key=value" strings applied on top of `recipe`.
        progress: False hides every progress bar (wins over the recipe's `train.progress`).
        echo: where the one-line stage messages go.
        distributed: True on every rank of a torchrun job: the final stage's models train with their tables
            sharded over the ranks.
        sharding: with `distributed`, None (TorchRec's planner) or "row_wise", "table_wise", ...
        dist_backend: with `distributed`, None (nccl with GPUs, gloo on CPU) or a torch.distributed backend.

    Returns:
        The `RunResult` (`.test_logloss`, `.final.best.arch`, `.output_dir`, timings per stage); None on the
        ranks other than 0 of a distributed run.

    Example::

        result = api.run("recipes/synthetic.yaml", "search.budget=50", progress=False)
        print(result.test_logloss, result.final.best.arch)
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
            echo: Callable[..., Any] = print, multifidelity: bool = False, random: bool = False) -> CompareResult:
    """The same recipe run at several warm-up fractions on the same data, side by side.

    Args:
        recipe: the recipe every setting starts from.
        fractions: warm-up fractions: 0 is zero-shot, 0.01 sub-one-shot, 1.0 one-shot.
        progress: False hides every progress bar.
        echo: where the one-line messages go.
        multifidelity: also run the multi-fidelity search.
        random: also run random search at the same compute (FTE).

    Returns:
        A `CompareResult`: `.runs` {setting: RunResult}, `.table` (one printable row per setting: test log
        loss, AUC, time per stage, compute in FTE) and `.output_dir`.

    Example::

        table = api.compare(api.load_recipe("recipes/synthetic.yaml"), fractions=(0.0, 1.0)).table
    """
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
    `ctrnas.data.synthetic_profiles.STRUCTURES`, or `planted:SEED` / `planted-deep:SEED`, whose logit is an arch
    of the search space, `ctrnas.supernet.planted`); returns its meta (splits, Bayes log loss, signal fields)."""
    from ctrnas.data.dataset import synthetic_source
    from ctrnas.data.synthetic import generate
    from ctrnas.supernet.planted import PlantedClick

    return generate(profile=profile, rows=rows, seed=seed, out=out, rows_per_shard=rows_per_shard, overwrite=overwrite,
                    source=synthetic_source(profile, rows, seed, {}, structure),  # recorded under the folder's lock
                    structure=structure, planted=PlantedClick)


def train_config(recipe_path: str | Path | None = None, *, final: bool = False,
                 default_threads: int | None = None, seed: int | None = None, lr: float | None = None,
                 batch_size: int | None = None, epochs: int | None = None, embedding_dim: int | None = None,
                 row_cap: int | None = None, threads: int | None = None, checkpoint_every: int | None = None,
                 eval_every: int | None = None, early_stop_patience: int | None = None,
                 restore_best: bool | None = None, progress: bool | None = None, device: str | None = None,
                 protocol: str | None = None, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """The TrainConfig of a YAML file (its `train:` section or top level) with the non-None settings on top.

    Args:
        recipe_path: the YAML file; None: TrainConfig's defaults.
        final: `recipe_path` is a run's recipe: give its final stage's settings (`final.train` over `train`)
            and its `threads`.
        default_threads: torch threads when neither the file nor `threads` sets them.
        seed, lr, batch_size, epochs, embedding_dim, row_cap, threads: TrainConfig fields (None: keep the
            file's); so are checkpoint_every, eval_every, early_stop_patience, restore_best, progress, device.
        protocol: "early-stop" (the length follows the data: `ctrnas.train.config.early_stopping` for every
            key not set) or "nasrec" (the settings as they are); None: the run recipe's `final.protocol`, or
            as they are without one.
        overrides: any other TrainConfig fields, {name: value} (None values are skipped).

    Returns:
        The `ctrnas.train.config.TrainConfig`; its device is checked to be usable.
    """
    from ctrnas.pipeline.tasks import train_config as _train_config

    named = dict(seed=seed, lr=lr, batch_size=batch_size, epochs=epochs, embedding_dim=embedding_dim,
                 row_cap=row_cap, threads=threads, checkpoint_every=checkpoint_every, eval_every=eval_every,
                 early_stop_patience=early_stop_patience, restore_best=restore_best, progress=progress,
                 device=device)
    return _train_config(recipe_path, final=final, default_threads=default_threads, protocol=protocol,
                         **{**dict(overrides or {}), **{k: v for k, v in named.items() if v is not None}})


def train_model(data_dir: str | Path, cfg: TrainConfig, baseline: str | None = None, arch: str | Path | None = None,
                *, space: str | None = None, out_dir: str | Path | None = None, train_fraction: float | None = None,
                layernorm: str | None = None, embedding_init: str | None = None, dense_init: str | None = None,
                distributed: bool = False, sharding: str | None = None, dist_backend: str | None = None,
                recipe: Recipe | str | Path | None = None, overwrite: bool = False) -> tuple[dict | None, Path]:
    """A baseline or an architecture trained from scratch (what `ctrnas train` does).

    Args:
        data_dir: a prepared dataset folder.
        cfg: the training settings (`train_config(...)`).
        baseline: a baseline name ("lr", "dcnv2", ...), or
        arch: an architecture JSON file, or the name of a shipped architecture.
        space: the search space of `arch` (default: the shipped arch's own, else nasrec-full).
        out_dir: results folder (checkpoint, metrics.json, model); re-running resumes. None: a temporary one.
        train_fraction: train on the first fraction of the training rows.
        layernorm, embedding_init, dense_init: model build options (default: the space's / the recipe's).
        distributed: True on every torchrun rank: tables sharded over the ranks, every row used.
        sharding, dist_backend: with `distributed`, as in `run`.
        recipe: a run's recipe: train as its final stage does (space, LayerNorm, inits, final.*_rows); give
            `cfg = train_config(recipe, final=True)`.
        overwrite: write into an `out_dir` holding files ctrnas did not write (they stay; a file of yours
            where ctrnas writes is refused even then).

    Returns:
        (metrics, results folder): metrics {"train", "val", "test": {"logloss", "auc", ...}}; None on the
        ranks other than 0 of a distributed training.

    Example::

        cfg = api.train_config(seed=0, epochs=1)
        metrics, out = api.train_model("data/criteo", cfg, baseline="dcnv2", out_dir="runs/dcnv2")
        print(metrics["test"]["logloss"])
    """
    from ctrnas.pipeline.tasks import train_model as _train_model

    return _train_model(data_dir, cfg, baseline=baseline, arch=arch, space=space, out_dir=out_dir,
                        train_fraction=train_fraction, layernorm=layernorm, embedding_init=embedding_init,
                        dense_init=dense_init, distributed=distributed, sharding=sharding,
                        dist_backend=dist_backend, recipe=recipe, overwrite=overwrite)


def warmup_supernet(data_dir, cfg, space="nasrec-full", fraction: float = 0.01, full_ratio: float = 0.2,
                    out_dir=None, overwrite: bool = False) -> WarmupResult:
    """The run's warm-up stage outside a run: same seeded supernet, same `ctrnas-supernet/1` checkpoint.
    `overwrite`: write into an `out_dir` holding files ctrnas did not write (they stay)."""
    from ctrnas.pipeline.tasks import warmup_supernet as _warmup

    return _warmup(data_dir, cfg, space, fraction, full_ratio, out_dir, overwrite=overwrite)


def score_arch(data_dir: str | Path, arch: str | Path, proxies: Sequence[str] = ("sigeo", "zico"),
               options: dict[str, dict] | None = None, *, supernet: str | Path | None = None,
               space: str = "nasrec-full", emb_dim: int | None = None, seed: int = 0, batches: int = 4,
               batch_size: int = 512, offset: int | None = None, json_path: str | Path | None = None,
               device: str = "cpu") -> dict:
    """One architecture scored by zero-cost proxies, as the search scores it.

    Args:
        data_dir: a prepared dataset folder.
        arch: the architecture JSON file.
        proxies: proxy names (`list_proxies()`).
        options: {proxy: {option: value}}, strictly checked.
        supernet: a warmed-up checkpoint (its warm-up fraction picks the rows, presets and weights); None: a
            fresh supernet drawn from `seed` (zero-shot).
        space, emb_dim: the search space and embedding width (the checkpoint's when given).
        seed: the candidate's seed (fresh weights, stochastic proxies).
        batches, batch_size: the proxies see `batches` batches of `batch_size` rows.
        offset: first training row (default: right after the warm-up rows).
        json_path: also write the scores there as strict JSON.
        device: auto | cpu | cuda | cuda:N.

    Returns:
        {proxy: ProxyResult} (`.value`, higher is better; `.terms`, `.meta`).
    """
    from ctrnas.pipeline.fitness.scoring import score_arch as _score

    return _score(data_dir, arch, list(proxies), options, supernet=supernet, space=space, emb_dim=emb_dim,
                  seed=seed, batches=batches, batch_size=batch_size, offset=offset, json_path=json_path,
                  device=device)


def list_proxies() -> list[str]:
    from ctrnas.proxies import list_proxies as _list

    return _list()


def export_arch(arch: str | Path, out_dir: str | Path, *, supernet: str | Path | None = None,
                data_dir: str | Path | None = None, space: str = "nasrec-full", emb_dim: int | None = None,
                row_cap: int | None = None, init: str | None = None, seed: int = 0,
                metrics_path: str | Path | None = None, torch_export: bool = False, overwrite: bool = False) -> dict:
    """A standalone model folder of one architecture (`model.pt`, card, and the data's preprocessing).

    Args:
        arch: the architecture JSON file.
        out_dir: the model folder to write.
        supernet: a supernet checkpoint to inherit the weights from; or
        data_dir: a prepared dataset folder (its schema; fresh weights from `seed` when no `supernet`).
        space, emb_dim, row_cap: the supernet's build (the checkpoint's when given).
        init: "inherit" (needs `supernet`) or "fresh".
        seed: seed of fresh weights.
        metrics_path: a metrics JSON to record in the card.
        torch_export: also write `model.pt2` (torch.export).
        overwrite: write into an `out_dir` holding files ctrnas did not write (they stay).

    Returns:
        The model card (arch_key, params_dense, params_embedding, flops_per_example, ...).

    Example::

        card = api.export_arch("arch.json", "models/best", supernet="w/supernet.pt", data_dir="data/criteo")
    """
    from ctrnas.pipeline.tasks import export_arch as _export

    return _export(arch, out_dir, supernet=supernet, data_dir=data_dir, space=space, emb_dim=emb_dim,
                   row_cap=row_cap, init=init, seed=seed, metrics_path=metrics_path, torch_export=torch_export,
                   overwrite=overwrite)


def export_trained(folder, out_dir, torch_export: bool = False, overwrite: bool = False) -> dict:
    """The model a `ctrnas train --out FOLDER` (or `train_model(out_dir=...)`) trained, as a model folder;
    the model card."""
    from ctrnas.pipeline.tasks import export_trained as _export

    return _export(folder, out_dir, torch_export=torch_export, overwrite=overwrite)


def export_pick(run_dir: str | Path, pick: int, out_dir: str | Path, torch_export: bool = False,
                overwrite: bool = False) -> dict:
    """Model `pick` of a run's front (its `front.json`: validation log loss against embedding bytes) as a
    model folder; the model card. The run must have kept the weights (`search.evolution.objective: front`)."""
    from ctrnas.pipeline.tasks import export_pick as _export

    return _export(run_dir, pick, out_dir, torch_export=torch_export, overwrite=overwrite)


def predict(model_dir: str | Path, data: Any, out: str | Path | None = None, *, kind: str | None = None,
            split: str = "test", data_dir: str | Path | None = None, batch_rows: int = 8192,
            overwrite: bool = False, progress: bool = True, max_rejects: int = 100,
            summary: str | Path | None = None, pad_missing_trailing: bool | None = None) -> Any:
    """Click probabilities from an exported model (`ctrnas.serving.predict`).

    Args:
        model_dir: an exported model folder.
        data: raw files of the model's format (a path or a list) or a prepared dataset folder, scored into
            `out`; or a pandas DataFrame / Arrow table of raw columns, scored in memory.
        out: the Parquet file to write (files only).
        kind: the raw format (default: the model's).
        split: the split of a prepared dataset folder.
        data_dir: the prepared folder whose preprocessing applies (default: the model's copy).
        batch_rows: rows per scoring batch: the model sees dense [batch_rows, num_dense] and one id per
            sparse field per row.
        overwrite, progress, max_rejects, summary: files only: replace `out`, show a progress bar, keep that
            many rejected lines in the summary, also write the summary as JSON there.
        pad_missing_trailing: files only: read a row short of its trailing fields as if they were empty
            (None: as the model's data was prepared).

    Returns:
        Files: the summary dict (rows read / written / rejected, log loss and AUC when labelled). A table:
        the same kind as `data` (DataFrame or Arrow table), one row per input row, aligned: `line`,
        `probability` (float, null where rejected), `reject` (the reason) and `label` when given.

    Example::

        s = api.predict("models/best", ["day_23.txt"], "scores.parquet")
        df = api.predict("models/best", pandas.read_csv("rows.csv"))   # df["probability"]
    """
    from ctrnas.serving.predict import predict_file, predict_table

    if isinstance(data, (str, Path, list, tuple)):
        if out is None:
            raise TypeError("predict: give `out` (a Parquet file) to score files")
        return predict_file(model_dir, data, out, kind=kind, split=split, data_dir=data_dir, batch_rows=batch_rows,
                            overwrite=overwrite, progress=progress, max_rejects=max_rejects, summary=summary,
                            pad_missing_trailing=pad_missing_trailing)
    if out is not None or split != "test" or overwrite or summary is not None or pad_missing_trailing is not None:
        raise TypeError("predict: `out`, `split`, `overwrite`, `summary` and `pad_missing_trailing` are for "
                        "files; a table is scored in memory")
    result = predict_table(model_dir, data, kind=kind, data_dir=data_dir, batch_rows=batch_rows)
    return result if hasattr(data, "schema") and not hasattr(data, "iloc") else result.to_pandas()


def vision_correlate(*, data: str, table_path: str, out: str | Path, archs: int, proxies: tuple[str, ...],
                     warmup: tuple[float, ...], warmup_archs: int | None, truth: str, batch_size: int, k: int,
                     seed: int, n_boot: int, threads: int | None = None, device: str = "auto", workers: int = 1,
                     time_limit: float | None = None) -> dict:
    """NB201 proxy correlation (`ctrnas.vision.tasks.correlate`, which documents the arguments): scores of
    `archs` sampled cells (resumable), summary.md and scatter.png under `out`.

    Returns:
        {"text": the summary, "scores", "summary", "plot": paths}.
    """
    from ctrnas.vision.tasks import correlate

    return correlate(data=data, table_path=table_path, out=out, archs=archs, proxies=proxies, warmup=warmup,
                     warmup_archs=warmup_archs, truth=truth, batch_size=batch_size, k=k, seed=seed, n_boot=n_boot,
                     threads=threads, device=device, workers=workers, time_limit=time_limit)


def vision_search(*, data: str, table_path: str, out: str | Path, proxy: str, strategy: str, seeds: list[int],
                  population: int, generations: int, tournament: int, children: int, truth: str, batch_size: int,
                  k: int, seed: int, scores_csv: list[str] | None = None, threads: int | None = None,
                  report: Callable[[int, Any], Any] | None = None, device: str = "auto") -> list:
    """Proxy-driven NB201 searches, one per seed (`ctrnas.vision.tasks.search`); `report(seed, outcome)`
    after each.

    Returns:
        The outcomes, one per seed (also written to `out`/search.json).
    """
    from ctrnas.vision.tasks import search

    return search(data=data, table_path=table_path, out=out, proxy=proxy, strategy=strategy, seeds=seeds,
                  population=population, generations=generations, tournament=tournament, children=children,
                  truth=truth, batch_size=batch_size, k=k, seed=seed, scores_csv=scores_csv, threads=threads,
                  report=report, device=device)
