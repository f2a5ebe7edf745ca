"""Final stage (NASRec `eval_best_candidate_top15`): train the search's top-k from scratch, pick the best on
validation, report it on test and export it; train the recipe's baselines the same way for comparison.

With `distributed` (a `ctrnas.pipeline.distributed.FinalDistributed`: this rank's DistEnv and the sharding),
every rank runs this same function and each model is trained by the DistributedTrainer (tables sharded
with DMP, each rank on its slice of every global batch, metrics over all ranks, so the numbers equal the
one-process run); only rank 0 shows progress, gathers the best model and exports it.

A model whose training diverges is stopped and gets no metrics; selection (`ctrnas.pipeline.selection`)
never picks it, nor one worse than the constant predictor on validation, and falls back to the best
baseline when no candidate is left.
"""

from __future__ import annotations

import dataclasses
import io
import math
import time
from pathlib import Path

from tqdm.auto import tqdm

from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.final_resume import drop, jobs_for, say_resumed
from ctrnas.pipeline.results import DataResult, FinalResult, SearchStageResult, TrainedModel
from ctrnas.pipeline.selection import finish, judge, rank_key
from ctrnas.recipe import Recipe


def _train(model, recipe: Recipe, data: DataResult, out_dir: Path | None = None, distributed=None):
    """(val metrics, test metrics, seconds, trainer) of `model` trained per the final stage's settings; a
    diverged model is not evaluated (its metrics are NaN with the reason, see `trainer.diverged`)."""
    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.metrics import MetricResult
    from ctrnas.train.run import selected_val

    cfg = recipe.final_train
    f = recipe.final
    train = _train_batches(recipe, data)
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
    return v, t, seconds, trainer


def _train_batches(recipe: Recipe, data: DataResult):
    from ctrnas.train.batches import dataset_batches

    cfg = recipe.final_train
    return dataset_batches(data.path, "train", cfg.batch_size, shuffle=True, seed=cfg.seed,
                           limit=recipe.final.train_rows)


def _reload(recipe: Recipe, quiet: Recipe, data: DataResult, template, what: tuple, job):
    """The trained model of a job finished before an interruption, from its kept checkpoint (no step is
    taken: the trainer resumes at its last step and restores the selected weights, as it ended)."""
    job.need_checkpoint()
    model = job_model(recipe, data, template, what)
    _train(model, quiet, data, job.dir)
    return model


def train_from_scratch(model, recipe: Recipe, data: DataResult, label: str, out_dir: Path | None = None,
                       distributed=None):
    """Train `model` with the final train config on the first `final.train_rows` training rows; returns
    (val metrics, test metrics, seconds). Validation/test use their first `final.val_rows`/`test_rows`.
    With `distributed`, call on every rank (see the module docstring); the metrics are the same on all."""
    v, t, seconds, _ = _train(model, recipe, data, out_dir, distributed)
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
        on.stem = off.stem
    else:
        off.stem = on.stem
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
    # its weights are never used (seed None): build_supernet leaves the global RNG alone
    return build_supernet(data.schema, config, None, emb, recipe.final_train.row_cap)


def _arch_model(recipe: Recipe, template, arch):
    from ctrnas.supernet import export

    if isinstance(template, dict):  # final.layernorm "auto": LayerNorm on for models with products
        from ctrnas.train.normalise import use_layernorm

        template = template[use_layernorm("auto", arch, True)]
    # from scratch: the exported structure with every weight re-drawn from the training seed
    return export(template, arch, init="fresh", seed=recipe.final_train.seed,
                  embedding_init=recipe.final.embedding_init)


def _setup_training(state: tuple) -> tuple:
    """A training worker's context (recipe, data, template), built once per worker from the shipped state."""
    recipe, data, template = state
    return recipe, data, _unpack(template)


def _pack(obj) -> bytes:
    """Tensors as plain bytes: multiprocessing would pass them through /dev/shm, which containers often cap
    at 64 MB (Docker's default), too small for full-size embedding tables."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _unpack(blob: bytes):
    import torch

    return torch.load(io.BytesIO(blob), weights_only=False)


def job_model(recipe: Recipe, data: DataResult, template, job: tuple[str, object]):
    """The fresh model of a job: ("arch", Arch) exported from `template`, or ("baseline", name)."""
    kind, what = job
    if kind == "arch":
        return _arch_model(recipe, template, what)
    from ctrnas.train.baselines import build_baseline

    cfg = recipe.final_train
    return build_baseline(what, data.schema, dim=cfg.embedding_dim, row_cap=cfg.row_cap, seed=cfg.seed)


def dense_params(model) -> int:
    """Parameters outside the embedding tables (what the report lists as params)."""
    return sum(p.numel() for n, p in model.named_parameters() if "embedding_bags" not in n)


def train_job(context: tuple, job: tuple) -> dict:
    """Train one job `(("arch", Arch) | ("baseline", name), keep_state, label)` on a training executor:
    its metrics, seconds, dense parameter count and, with `keep_state`, its trained weights."""
    recipe, data, template = context
    what, keep_state, _, folder = (*job, None) if len(job) == 3 else job
    if folder is not None and (done := folder.result()) is not None and not folder.has_checkpoint():
        return {**done, "state": None}  # finished before an interruption, and its weights are not needed
    model = job_model(recipe, data, template, what)
    val, test, sec, trainer = _train(model, recipe, data, folder.dir if folder is not None else None)
    out = {"val": val, "test": test, "seconds": sec, "dense_params": dense_params(model), "diverged": trainer.diverged}
    if folder is not None and folder.result() is None:
        folder.finish(out)
    elif folder is not None:  # re-loaded from its checkpoint: the stored numbers (its time included)
        out = folder.result()
    return {**out, "state": _pack(model.state_dict()) if keep_state else None}


def describe_training(job: tuple) -> str:
    return f"the training of {job[2]}"


def training_executor(recipe: Recipe, data: DataResult, template, workers: int, jobs: int | None = None):
    """The executor (`ctrnas.execution`, chosen by `recipe.execution`) that trains jobs (`train_job`) with
    the final stage's settings, `workers` the stage's own count (at most `jobs` are started), each worker
    with `recipe.threads` torch threads (1 when unset). Every training is seeded on its own, so results
    equal a one-process run that uses the same thread count (recipes that leave `threads` unset let torch
    use one per core in one process: close, not bit-equal, numbers)."""
    from ctrnas.execution import make_executor

    backend, n = recipe.execution.resolve(workers)
    config = dataclasses.replace(recipe.execution, backend=backend, workers=min(n, jobs or n))
    return make_executor(config, train_job, (recipe, data, _pack(template)), setup=_setup_training,
                         threads=recipe.threads or 1, describe=describe_training, name="training worker")


def in_workers(recipe: Recipe, workers: int) -> bool:
    """Whether a stage with `workers` of its own trains on an executor rather than in this process."""
    return recipe.execution.resolve(workers)[0] != "serial"


def final_stage(recipe: Recipe, data: DataResult, search: SearchStageResult, supernet,
                out_dir: Path | None = None, progress: bool = True, distributed=None) -> FinalResult:
    """Retrain the top-k, choose by validation log loss among the usable ones (`ctrnas.pipeline.selection`),
    export the winner to `out_dir/model` (or the best baseline when no candidate is usable).

    `supernet` may be None (a template of the right shape is built). With `distributed`, every rank calls
    this; rank 0 returns the full result (its `model` the gathered, unsharded best), the others a result
    with the same metrics and `model=None`.
    """
    from ctrnas.errors import CtrnasError
    from ctrnas.space import Arch

    t0 = time.perf_counter()
    main = distributed is None or distributed.env.is_main
    progress = progress and main
    top = search.result.top_k(recipe.top_k)
    if not top:
        raise CtrnasError("the search returned no candidates to retrain")
    quiet = dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(recipe.final_train, progress=False)))
    template = final_template(recipe, data, supernet)
    has_val = bool(split_rows(data, "val"))
    candidates: list[TrainedModel] = []
    best_rank, best_model, best_state = None, None, None
    archs = [Arch.from_json(rec.arch) for rec in top]
    # a folder per training, so an interrupted stage resumes (one process only; ctrnas.pipeline.final_resume)
    jobs = jobs_for(quiet, data, out_dir if distributed is None else None,
                    [(f"rank {r}", ("arch", a)) for r, a in enumerate(archs)] +
                    [(f"baseline {n}", ("baseline", n)) for n in recipe.final.baselines])
    say_resumed(jobs, len(_train_batches(quiet, data)), recipe.final_train.epochs)
    if distributed is None and in_workers(recipe, min(recipe.final.workers, len(top) + len(recipe.final.baselines))):
        return _final_in_workers(recipe, quiet, data, top, template, out_dir, progress, t0, jobs)
    for rank, rec in enumerate(tqdm(top, desc="retrain top-k", unit="model", disable=not progress)):
        arch, job = archs[rank], jobs[rank]
        done = job.result() if job is not None else None
        if done is None:
            model = _arch_model(recipe, template, arch)
            val, test, sec, trainer = _train(model, quiet, data, job and job.dir, distributed=distributed)
            diverged = trainer.diverged
            if job is not None:
                job.finish({"val": val, "test": test, "seconds": sec, "diverged": diverged})
        else:  # finished before an interruption: its numbers; its weights are re-loaded if it is exported
            model = trainer = None
            val, test, sec, diverged = done["val"], done["test"], done["seconds"], done["diverged"]
        cand = judge(TrainedModel(f"rank {rank}", arch, val, test, rec.params, rec.flops, sec, score=rec.value,
                                  history_index=rec.index, diverged=diverged), data, has_val)
        candidates.append(cand)
        # keep only the best usable one so far (ties: the earlier one), so at most one trained model is
        # held; with `distributed` every rank decides alike, since the validation metrics are computed from
        # logits gathered over all ranks and are the same everywhere
        if best_rank is None or rank_key(cand) < rank_key(candidates[best_rank]):
            if job is not None and best_rank is not None:
                jobs[best_rank].drop_checkpoint()
            best_rank = rank
            if distributed is None:
                best_model = model
            else:
                from ctrnas.distributed.checkpoint import gather_state_dict

                best_state = gather_state_dict(trainer.model)  # collective; full tensors on rank 0 only
        elif job is not None:
            job.drop_checkpoint()
        del model, trainer
    if best_model is None and distributed is None:  # the best finished before an interruption
        best_model = _reload(recipe, quiet, data, template, ("arch", candidates[best_rank].arch), jobs[best_rank])
    if distributed is not None and main:
        best_model = _arch_model(recipe, template, candidates[best_rank].arch)  # unsharded, trained weights
        best_model.load_state_dict(best_state)
        del best_state

    baselines, base_models = [], {}
    for i, name in enumerate(tqdm(recipe.final.baselines, desc="baselines", unit="model", disable=not progress or
                                  not recipe.final.baselines)):
        job = jobs[len(top) + i]
        done = job.result() if job is not None else None
        if done is None:
            model = job_model(recipe, data, template, ("baseline", name))
            val, test, sec, trainer = _train(model, quiet, data, job and job.dir, distributed=distributed)
            done = {"val": val, "test": test, "seconds": sec, "diverged": trainer.diverged,
                    "dense_params": dense_params(model)}
            if job is not None:
                job.finish(done)
        else:
            model = trainer = None
        m = judge(TrainedModel(name, None, done["val"], done["test"], float(done["dense_params"]), math.nan,
                               done["seconds"], diverged=done["diverged"]), data, has_val)
        baselines.append(m)
        if candidates[best_rank].status != "ok":  # a fallback may need it (every rank decides alike)
            if distributed is None:
                base_models[len(baselines) - 1] = model if model is not None else \
                    _reload(recipe, quiet, data, template, ("baseline", name), job)
            else:
                from ctrnas.distributed.checkpoint import gather_state_dict

                state = gather_state_dict(trainer.model)  # collective; full tensors on rank 0 only
                if main:
                    base_models[len(baselines) - 1] = job_model(recipe, data, template, ("baseline", name))
                    base_models[len(baselines) - 1].load_state_dict(state)
                del state
        elif job is not None:
            job.drop_checkpoint()
        del model, trainer
    return finish(recipe, candidates, best_rank, best_model, baselines, base_models, out_dir, main, t0,
                   distributed)


def _final_in_workers(recipe, quiet, data, top, template, out_dir, progress, t0, folders) -> FinalResult:
    """The final stage with its trainings spread over the recipe's executor (`final.workers` processes, or
    `execution`); collected in job order, so the choice (ties: the earlier rank) and every number equal
    the serial run's."""
    from ctrnas.space import Arch

    archs = [Arch.from_json(rec.arch) for rec in top]
    has_val = bool(split_rows(data, "val"))
    jobs = [(("arch", a), True, f"top-k rank {rank} ({a.key()})") for rank, a in enumerate(archs)]
    # baselines keep their weights too: one is exported when no candidate is usable
    jobs += [(("baseline", n), True, f"baseline {n}") for n in recipe.final.baselines]
    jobs = [(*job, folder) for job, folder in zip(jobs, folders)]  # each with its resume folder (or None)
    with training_executor(quiet, data, template, recipe.final.workers, len(jobs)) as ex:
        results = ex.imap(jobs)  # in job order: the top-k ranks, then the baselines
        candidates, best_rank, best_state = [], None, None
        for rank in tqdm(range(len(top)), desc="retrain top-k", unit="model", disable=not progress):
            _, r = next(results)  # only the best model's weights are held, as the serial path does
            rec = top[rank]
            cand = judge(TrainedModel(f"rank {rank}", archs[rank], r["val"], r["test"], rec.params, rec.flops,
                                      r["seconds"], score=rec.value, history_index=rec.index,
                                      diverged=r["diverged"]), data, has_val)
            candidates.append(cand)
            if best_rank is None or rank_key(cand) < rank_key(candidates[best_rank]):
                if best_rank is not None:
                    drop(folders[best_rank])
                best_rank, best_state = rank, _state(r, folders[rank])
            else:
                drop(folders[rank])
            del r
        baselines, base_models = [], {}
        for name in recipe.final.baselines:
            _, r = next(results)
            baselines.append(judge(TrainedModel(name, None, r["val"], r["test"], float(r["dense_params"]),
                                                math.nan, r["seconds"], diverged=r["diverged"]), data, has_val))
            if candidates[best_rank].status != "ok":
                model = job_model(quiet, data, template, ("baseline", name))
                model.load_state_dict(_state(r, folders[len(top) + len(baselines) - 1]))
                base_models[len(baselines) - 1] = model
            else:
                drop(folders[len(top) + len(baselines) - 1])
    best_model = _arch_model(recipe, template, candidates[best_rank].arch)
    best_model.load_state_dict(best_state)
    # as the serial trainer leaves it, so model.pt is the same object either way
    best_model.stem.use_sparse_gradients(recipe.final_train.embedding_update == "sparse")
    return finish(recipe, candidates, best_rank, best_model, baselines, base_models, out_dir, True, t0, None)


def _state(result: dict, folder):
    """The weights a worker sent back; none came for a training finished in an earlier run whose checkpoint
    was dropped as not needed, which the stage's order of decisions rules out for the ones it needs."""
    if result["state"] is None:
        folder.need_checkpoint()  # raises, naming the folder
    return _unpack(result["state"])
