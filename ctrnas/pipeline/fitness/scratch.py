"""One training from scratch with the final stage's settings: the model of a job (a top-k arch exported from the
final template, or a baseline), in this process or on a training worker (`ctrnas.pipeline.final.workers`).
The final stage and the short-training rung (`rungs.ShortTrainingFitness`) both train this way."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe
from ctrnas.train.checkpoint import FILE as CHECKPOINT_FILE
from ctrnas.train.checkpoint import load_checkpoint


def train_as_final(model, recipe: Recipe, data: DataResult, out_dir: Path | None = None, distributed=None):
    """(val metrics, test metrics, seconds, trainer) of `model` trained per the final stage's settings; a
    diverged model is not evaluated (its metrics are NaN with the reason, see `trainer.diverged`)."""
    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.metrics import MetricResult
    from ctrnas.train.run import selected_val

    cfg = recipe.final_train
    f = recipe.final
    train = final_train_batches(recipe, data)
    val = dataset_batches(data.path, "val", cfg.eval_batch_size, limit=f.val_rows)
    test = dataset_batches(data.path, "test", cfg.eval_batch_size, limit=f.test_rows)
    if out_dir is not None and not 0 < cfg.checkpoint_every <= len(train):  # resumable at every epoch end
        cfg = dataclasses.replace(cfg, checkpoint_every=len(train))
    t0 = time.perf_counter()
    if distributed is None:
        from ctrnas.train.trainer import Trainer

        trainer = Trainer(model, cfg, out_dir)
    else:
        from ctrnas.distributed.trainer import DistributedTrainer

        # the global batch sources above go in whole: the trainer takes this rank's slice of each batch
        trainer = DistributedTrainer(model, cfg, distributed.env, distributed.sharding, out_dir)
    # model selection over epochs (restore_best / early_stop_patience) watches the same val rows
    selecting = (cfg.restore_best or cfg.early_stop_patience is not None) and split_rows(data, "val")
    summary = trainer.fit(train, val if selecting else None, resume=out_dir is not None)
    seconds = time.perf_counter() - t0
    if trainer.diverged:
        missing = MetricResult.missing(f"diverged: {trainer.diverged['reason']}").to_dict()
        return missing, dict(missing), seconds, trainer
    if selecting and cfg.eval_rows is None:  # the weights it ended on were evaluated on these val rows
        v = {k: x for k, x in selected_val(summary, cfg).items() if k not in ("step", "epoch")}
    else:
        v = trainer.evaluate(val).to_dict() if split_rows(data, "val") else {}
    t = trainer.evaluate(test).to_dict() if split_rows(data, "test") else {}
    if v:  # how long it trained, and where its val measurement was taken (early stopping: its best evaluation)
        best = trainer.best["step"] if cfg.restore_best and trainer.best else trainer.step
        v = {**v, "steps": trainer.step, "best_step": best}
    return v, t, seconds, trainer


def final_train_batches(recipe: Recipe, data: DataResult):
    from ctrnas.train.batches import dataset_batches

    cfg = recipe.final_train
    return dataset_batches(data.path, "train", cfg.batch_size, shuffle=True, seed=cfg.seed,
                           limit=recipe.final.train_rows)


def reload_job(recipe: Recipe, quiet: Recipe, data: DataResult, template, what: tuple, job):
    """The trained model of a job finished before an interruption, from its kept checkpoint (no step is
    taken: the trainer resumes at its last step and restores the selected weights, as it ended)."""
    job.need_checkpoint()
    model = job_model(recipe, data, template, what, job.dir)
    train_as_final(model, job_recipe(quiet, what), data, job.dir)
    return model


def train_from_scratch(model, recipe: Recipe, data: DataResult, label: str, out_dir: Path | None = None,
                       distributed=None):
    """Train `model` with the final train config on the first `final.train_rows` training rows; returns
    (val metrics, test metrics, seconds). Validation/test use their first `final.val_rows`/`test_rows`.
    With `distributed`, call on every rank (see the module docstring); the metrics are the same on all."""
    v, t, seconds, _ = train_as_final(model, recipe, data, out_dir, distributed)
    return v, t, seconds


def final_template(recipe: Recipe, data: DataResult, supernet=None):
    """The supernet to export final models from: the search one, or one with the final stage's table
    sizes (NASRec caps tables during search and trains the final models on full tables) and LayerNorm
    setting (`final.layernorm`). Final models are re-drawn from the training seed, so a new supernet of the
    right shape serves as well as the search one. With `final.layernorm: auto`, a dict {False: ..., True:
    ...} of both shapes (sharing one embedding stem); each arch picks by its product degree."""
    setting = recipe.final.layernorm
    if setting != "auto":
        return _template(recipe, data, supernet, setting)
    off, on = _template(recipe, data, supernet, False), _template(recipe, data, supernet, True)
    if on is not supernet:  # never swap the search supernet's own tables
        on.stem, on.first_order = off.stem, off.first_order
    else:
        off.stem, off.first_order = on.stem, on.first_order
    return {False: off, True: on}


def _template(recipe: Recipe, data: DataResult, supernet, layernorm: bool | None):
    config = recipe.space if supernet is None else supernet.space.config
    if layernorm is not None and layernorm != config.layernorm:
        config = dataclasses.replace(config, layernorm=layernorm)
    if supernet is not None and supernet.row_cap == recipe.final_train.row_cap and \
            supernet.space.config == config:
        return supernet
    from ctrnas.supernet.io import build_supernet

    emb = supernet.emb_dim if supernet is not None else recipe.train.embedding_dim
    # its weights are never used (the export re-draws them all): zeros, not drawn
    return build_supernet(data.schema, config, None, emb, recipe.final_train.row_cap, drawn=False)


def _padded(model, state) -> bool:
    """`model` has compacted crosses and `state` (a state_dict, or a checkpoint's path) holds weights of other
    shapes: ones written before exported crosses dropped the padded positions (`ctrnas.supernet.compact`)."""
    from ctrnas.supernet.blocks.cross import FixedCross

    if not any(isinstance(m, FixedCross) and m.width for m in model.modules()):
        return False
    if isinstance(state, Path):
        if not state.is_file():
            return False
        state = load_checkpoint(state, mmap=True)["model"]  # the shapes only
    own = model.state_dict()
    return any(k in own and tuple(v.shape) != tuple(own[k].shape) for k, v in state.items())


def arch_model_for(recipe: Recipe, template, arch, state):
    """`arch_model` in the layout of the trained weights `state` (a state_dict to load into it, or the path of
    the checkpoint it will resume from)."""
    model = arch_model(recipe, template, arch)
    return arch_model(recipe, template, arch, compact=False) if _padded(model, state) else model


def arch_model(recipe: Recipe, template, arch, compact: bool = True):
    from ctrnas.supernet import export

    if isinstance(template, dict):  # final.layernorm "auto": LayerNorm on for models with products
        from ctrnas.train.normalise import use_layernorm

        template = template[use_layernorm("auto", arch, True)]
    # from scratch: the exported structure with every weight re-drawn from the training seed
    return export(template, arch, init="fresh", seed=recipe.final_train.seed,
                  embedding_init=recipe.final.embedding_init, dense_init=recipe.final.dense_init, compact=compact)


def baseline_jobs(recipe: Recipe) -> list[str]:
    """The final stage's baseline trainings: each of `final.baselines` at the run's width and, with
    `final.emb_dims`, at each of those widths too ("dlrm@32"): when the search may pick a width, the baselines
    get the same choices, so a width alone cannot win."""
    run = recipe.final_train.embedding_dim
    widths = [w for w in recipe.final.emb_dims if w != run]
    return [n for n in recipe.final.baselines] + [f"{n}@{w}" for w in widths for n in recipe.final.baselines]


def split_baseline(job: str) -> tuple[str, int | None]:
    """("dlrm", 32) of "dlrm@32"; (name, None) at the run's width. The name keeps a learning-rate multiple
    ("lr*8", `ctrnas.train.baseline_names.split_lr_scale`)."""
    name, _, width = job.partition("@")
    return name, int(width) if width else None


def job_recipe(recipe: Recipe, what: tuple[str, object]) -> Recipe:
    """The recipe a job trains with: `recipe`, with the final learning rate times S for a baseline "NAME*S"."""
    from ctrnas.train.baseline_names import split_lr_scale

    if what[0] != "baseline":
        return recipe
    scale = split_lr_scale(split_baseline(what[1])[0])[1]
    if scale == 1.0:
        return recipe
    train = dataclasses.replace(recipe.final_train, lr=recipe.final_train.lr * scale)
    return dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, train=train))


def baseline_label(job: str) -> str:
    """"dlrm" or "dlrm at width 32"."""
    name, width = split_baseline(job)
    return name if width is None else f"{name} at width {width}"


def job_model(recipe: Recipe, data: DataResult, template, job: tuple[str, object], resume_dir: Path | None = None):
    """The fresh model of a job: ("arch", Arch) exported from `template`, or ("baseline", name) with name
    one of `baseline_jobs` ("dlrm", or "dlrm@32" at another width). With the folder whose checkpoint it will
    resume from: an arch model in the layout of the checkpoint's weights (one written before exported crosses
    dropped the padded positions, `ctrnas.supernet.compact`, resumes padded)."""
    kind, what = job
    if kind == "arch":
        if resume_dir is None:
            return arch_model(recipe, template, what)
        return arch_model_for(recipe, template, what, Path(resume_dir) / CHECKPOINT_FILE)
    from ctrnas.train.baseline_names import split_lr_scale
    from ctrnas.train.baselines import build_baseline

    cfg = recipe.final_train
    name, width = split_baseline(what)
    return build_baseline(split_lr_scale(name)[0], data.schema, dim=width or cfg.embedding_dim, row_cap=cfg.row_cap,
                          seed=cfg.seed)


def candidate_label(rank: int, rec) -> str:
    """"rank N" for the search's N-th best; "rank 0 at width D" for the best retrained at another width
    (`final.emb_dims`, `ctrnas.pipeline.final.width_variants`)."""
    if "width_of" in rec.meta:
        return f"rank 0 at width {rec.meta['width']}"
    return f"rank {rec.meta.get('rank', rank)}"  # its search rank when the stage left a twin out


def dense_params(model) -> int:
    """Parameters outside the embedding tables (the report lists them beside `embedding_params`)."""
    return sum(p.numel() for n, p in model.named_parameters() if "embedding_bags" not in n)


def embedding_params(model) -> int:
    """Parameters of the embedding tables (an LR's one-wide tables included)."""
    return sum(p.numel() for n, p in model.named_parameters() if "embedding_bags" in n)
