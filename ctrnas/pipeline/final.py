"""Final stage (NASRec `eval_best_candidate_top15`): train the search's top-k from scratch, pick the best on
validation, report it on test and export it; train the recipe's baselines the same way for comparison."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

from tqdm.auto import tqdm

from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.results import DataResult, FinalResult, SearchStageResult, TrainedModel
from ctrnas.recipe import Recipe


def train_from_scratch(model, recipe: Recipe, data: DataResult, label: str, out_dir: Path | None = None):
    """Train `model` with the final train config on the first `final.train_rows` training rows; returns
    (val metrics, test metrics, seconds). Validation/test use their first `final.val_rows`/`test_rows`."""
    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.trainer import Trainer

    cfg = recipe.final_train
    f = recipe.final
    train = dataset_batches(data.path, "train", cfg.batch_size, shuffle=True, seed=cfg.seed, limit=f.train_rows)
    val = dataset_batches(data.path, "val", cfg.eval_batch_size, limit=f.val_rows)
    test = dataset_batches(data.path, "test", cfg.eval_batch_size, limit=f.test_rows)
    t0 = time.perf_counter()
    trainer = Trainer(model, cfg, out_dir)
    trainer.fit(train, resume=out_dir is not None)
    seconds = time.perf_counter() - t0
    v = trainer.evaluate(val).to_dict() if split_rows(data, "val") else {}
    t = trainer.evaluate(test).to_dict() if split_rows(data, "test") else {}
    return v, t, seconds


def _final_template(recipe: Recipe, supernet):
    """The supernet to export final models from: the search one, or one with the final stage's table
    sizes (NASRec caps tables during search and trains the final models on full tables)."""
    if supernet.row_cap == recipe.final_train.row_cap:
        return supernet
    from ctrnas.supernet import Supernet

    return Supernet(supernet.schema, supernet.space, emb_dim=supernet.emb_dim, row_cap=recipe.final_train.row_cap)


def _arch_model(recipe: Recipe, template, arch):
    from ctrnas.supernet import export

    # from scratch: the exported structure with every weight re-drawn from the training seed
    return export(template, arch, init="fresh", seed=recipe.final_train.seed)


def final_stage(recipe: Recipe, data: DataResult, search: SearchStageResult, supernet,
                out_dir: Path | None = None, progress: bool = True) -> FinalResult:
    """Retrain the top-k, choose by validation log loss, export the winner to `out_dir/model`."""
    from ctrnas.space import Arch
    from ctrnas.train.baselines import build_baseline

    t0 = time.perf_counter()
    top = search.result.top_k(recipe.top_k)
    quiet = dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(recipe.final_train, progress=False)))
    candidates, models = [], {}
    template = _final_template(recipe, supernet)
    for rank, rec in enumerate(tqdm(top, desc="retrain top-k", unit="model", disable=not progress)):
        arch = Arch.from_json(rec.arch)
        model = _arch_model(recipe, template, arch)
        val, test, sec = train_from_scratch(model, quiet, data, f"rank {rank}")
        candidates.append(TrainedModel(f"rank {rank}", arch, val, test, rec.params, rec.flops, sec,
                                       score=rec.value, history_index=rec.index))
        models[rank] = model
    if not candidates:
        from ctrnas.errors import CtrnasError

        raise CtrnasError("the search returned no candidates to retrain")

    def val_loss(m: TrainedModel) -> float:
        x = m.val.get("logloss", math.nan)
        return x if math.isfinite(x) else math.inf

    best_rank = min(range(len(candidates)), key=lambda i: (val_loss(candidates[i]), i))
    best = candidates[best_rank]

    baselines = []
    for name in tqdm(recipe.final.baselines, desc="baselines", unit="model", disable=not progress or
                     not recipe.final.baselines):
        cfg = recipe.final_train
        model = build_baseline(name, data.schema, dim=cfg.embedding_dim, row_cap=cfg.row_cap, seed=cfg.seed)
        val, test, sec = train_from_scratch(model, quiet, data, name)
        n = sum(p.numel() for n_, p in model.named_parameters() if "embedding_bags" not in n_)
        baselines.append(TrainedModel(name, None, val, test, float(n), math.nan, sec))

    export_dir = None
    if out_dir is not None and recipe.final.export:
        from ctrnas.supernet import save_exported

        export_dir = Path(out_dir) / "model"
        save_exported(models[best_rank], export_dir, init="fresh+trained", metrics={
            "val_logloss": best.val.get("logloss"), "val_auc": best.val.get("auc"),
            "test_logloss": best.test.get("logloss"), "test_auc": best.test.get("auc")},
            source=f"top-{len(candidates)} retrain of search history index {best.history_index}")
    return FinalResult(tuple(candidates), best, tuple(baselines), export_dir, time.perf_counter() - t0,
                       model=models[best_rank])
