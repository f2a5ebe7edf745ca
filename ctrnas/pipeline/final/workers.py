"""The final stage's trainings on an executor (`ctrnas.execution`: `final.workers` processes, or the recipe's
`execution`): what a training worker holds and runs, and the stage's loop over the results, collected in
job order so every number equals the serial run's."""

from __future__ import annotations

import dataclasses
import io
import math

from tqdm.auto import tqdm

from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.final.resume import drop
from ctrnas.pipeline.final.selection import beats, finish, judge, may_win, rank_key
from ctrnas.pipeline.fitness.scratch import (arch_model_for, baseline_jobs, baseline_label, candidate_label,
                                             dense_params, embedding_params, job_model, job_recipe, train_as_final)
from ctrnas.pipeline.results import DataResult, FinalResult, TrainedModel
from ctrnas.recipe import Recipe


def _setup_training(state: tuple) -> tuple:
    """A training worker's context (recipe, data, template), built once per worker from the shipped state."""
    recipe, data, shape = state
    return recipe, data, _rebuild(data, shape)


def _shape(template):
    """What a worker needs to build `template` again: its space, table width and row cap (per LayerNorm setting
    for a dict). Its weights are not shipped: every final model re-draws them from the training seed
    (`ctrnas.pipeline.fitness.scratch.final_template`), so the worker loads no module or tensor bytes."""
    if template is None:  # baselines only
        return None
    if isinstance(template, dict):
        return {k: _shape(m) for k, m in template.items()}
    return template.space.config, template.emb_dim, template.row_cap


def _rebuild(data: DataResult, shape):
    """The template `_shape` describes, its weights zeros (they are never used: the export re-draws them)."""
    from ctrnas.supernet.io import build_supernet

    if shape is None:
        return None
    if isinstance(shape, dict):
        built = {k: _rebuild(data, s) for k, s in shape.items()}
        first, *rest = built.values()
        for m in rest:  # one embedding stem for both, as final_template shares it
            m.stem, m.first_order = first.stem, first.first_order
        return built
    config, emb, row_cap = shape
    return build_supernet(data.schema, config, None, emb, row_cap, drawn=False)


def _pack(obj) -> bytes:
    """Tensors as plain bytes: multiprocessing would pass them through /dev/shm, which containers often cap
    at 64 MB (Docker's default), too small for full-size embedding tables."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _unpack_state(blob: bytes) -> dict:
    """A trained model's state_dict that a worker sent back: tensors only, loaded weights-only."""
    import torch

    return torch.load(io.BytesIO(blob), weights_only=True)


def train_job(context: tuple, job: tuple) -> dict:
    """Train one job `(("arch", Arch) | ("baseline", name), keep_state, label)` on a training executor:
    its metrics, seconds, dense parameter count and, with `keep_state`, its trained weights."""
    recipe, data, template = context
    what, keep_state, _, folder = (*job, None) if len(job) == 3 else job
    if folder is not None and (done := folder.result()) is not None and not folder.has_checkpoint():
        return {**done, "state": None}  # finished before an interruption, and its weights are not needed
    model = job_model(recipe, data, template, what, folder.dir if folder is not None else None)
    val, test, sec, trainer = train_as_final(model, job_recipe(recipe, what), data,
                                             folder.dir if folder is not None else None)
    out = {"val": val, "test": test, "seconds": sec, "dense_params": dense_params(model),
           "embedding_params": embedding_params(model), "diverged": trainer.diverged}
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
    return make_executor(config, train_job, (recipe, data, _shape(template)), setup=_setup_training,
                         threads=recipe.threads or 1, describe=describe_training, name="training worker")


def training_costs(recipe: Recipe, data: DataResult, template, whats: list[tuple], folders) -> list[float]:
    """What the stage orders its trainings by, costliest first: each model's dense weights, whose products are
    most of a step's time (the tables' lookups and updates cost any model about the same), so that no long
    training starts last beside an idle worker; 0 for a training an interrupted run finished."""
    from ctrnas.pipeline.final.memory import job_sizes

    sizes = job_sizes(recipe, data, template, whats)
    return [0.0 if folder is not None and folder.result() is not None else float(size.dense_params)
            for size, folder in zip(sizes, folders)]


def with_workers(recipe: Recipe, workers: int) -> Recipe:
    """`recipe` with the final stage's trainings on `workers` at once (`execution.workers` too, when set)."""
    execution = recipe.execution
    if execution.workers is not None:
        execution = dataclasses.replace(execution, workers=workers)
    return dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, workers=workers), execution=execution)


def in_workers(recipe: Recipe, workers: int) -> bool:
    """Whether a stage with `workers` of its own trains on an executor rather than in this process."""
    return recipe.execution.resolve(workers)[0] != "serial"


def final_in_workers(recipe, quiet, data, top, template, out_dir, progress, t0, folders, history=None,
                     verdict=None) -> FinalResult:
    """The final stage with its trainings spread over the executor of `quiet` (`final.workers` processes, or
    `execution`; as many as the memory allows, `ctrnas.pipeline.final.memory`); collected in job order, so
    the choice (ties: the earlier rank) and every number equal the serial run's."""
    from ctrnas.space import Arch

    archs = [Arch.from_json(rec.arch) for rec in top]
    has_val = bool(split_rows(data, "val"))
    jobs = [(("arch", a), True, f"top-k {candidate_label(rank, rec)} ({a.key()})")
            for rank, (rec, a) in enumerate(zip(top, archs))]
    # baselines keep their weights too: one is exported when no candidate is usable
    jobs += [(("baseline", n), True, f"baseline {baseline_label(n)}") for n in baseline_jobs(recipe)]
    jobs = [(*job, folder) for job, folder in zip(jobs, folders)]  # each with its resume folder (or None)
    costs = training_costs(quiet, data, template, [job[0] for job in jobs], folders)
    # one bar for every training of the stage (they run side by side): the top-k, then the baselines; closed
    # (its line ended) on an interruption too, so the stop message gets a line of its own
    with training_executor(quiet, data, template, quiet.final.workers, len(jobs)) as ex, \
            tqdm(total=len(jobs), desc="final stage (top-k + baselines)", unit="model", disable=not progress) as bar:
        # in job order (the top-k ranks, then the baselines), handed out costliest first
        results = ex.imap_costliest_first(jobs, costs)
        # the best so far keeps its worker's result; its weights are unpacked only once it is the final choice
        # (a training finished in an earlier run sends none when that run dropped them as not needed)
        candidates, best_rank, best_result = [], None, None
        for rank in range(len(top)):
            _, r = next(results)  # only the best model's weights are held, as the serial path does
            rec = top[rank]
            cand = judge(TrainedModel(candidate_label(rank, rec), archs[rank], r["val"], r["test"],
                                      float(r["dense_params"]), rec.flops, r["seconds"], score=rec.value,
                                      history_index=rec.index, diverged=r["diverged"],
                                      emb_params=float(r.get("embedding_params", math.nan))), data, has_val)
            candidates.append(cand)
            if best_rank is None or rank_key(cand) < rank_key(candidates[best_rank]):
                if best_rank is not None:
                    drop(folders[best_rank])
                best_rank, best_result = rank, r
            else:
                drop(folders[rank])
            del r
            bar.update(1)
        baselines, base_models, kept = [], {}, None
        for name in baseline_jobs(recipe):
            _, r = next(results)
            bar.update(1)
            baselines.append(judge(TrainedModel(baseline_label(name), None, r["val"], r["test"],
                                                float(r["dense_params"]), math.nan, r["seconds"],
                                                diverged=r["diverged"],
                                                emb_params=float(r.get("embedding_params", math.nan))),
                                   data, has_val))
            # held only while it beats every candidate and baseline so far: the export may need it
            if may_win(recipe, candidates[best_rank]) and \
                    beats(baselines[-1], candidates[best_rank], baselines[kept] if kept is not None else None):
                if kept is not None:
                    base_models.pop(kept)
                    drop(folders[len(top) + kept])
                else:  # the best candidate's weights will not be exported
                    drop(folders[best_rank])
                kept = len(baselines) - 1
                model = job_model(quiet, data, template, ("baseline", name))
                model.load_state_dict(_state(r, folders[len(top) + kept]))
                base_models[kept] = model
            else:
                drop(folders[len(top) + len(baselines) - 1])
    best_model = None
    if kept is None:  # a candidate is exported (a baseline that beat it is in base_models otherwise)
        state = _state(best_result, folders[best_rank])
        best_model = arch_model_for(recipe, template, candidates[best_rank].arch, state)
        best_model.load_state_dict(state)
        # as the serial trainer leaves it, so model.pt is the same object either way
        for stem in best_model.stems():
            stem.use_sparse_gradients(recipe.final_train.embedding_update == "sparse")
    del best_result
    return finish(recipe, candidates, best_rank, best_model, baselines, base_models, out_dir, True, t0, None,
                  history, verdict=verdict)


def _state(result: dict, folder):
    """The weights a worker sent back. None: the worker found no checkpoint (an earlier run dropped it as not
    needed); asked for only for the final choice, whose weights an earlier run kept."""
    if result["state"] is None:
        folder.need_checkpoint()  # raises, naming the folder
    return _unpack_state(result["state"])
