"""Final stage (NASRec `eval_best_candidate_top15`): train the search's top-k from scratch, pick the best on
validation, report it on test and export it; train the recipe's baselines the same way for comparison.

With `distributed` (a `ctrnas.pipeline.distributed.FinalDistributed`: this rank's DistEnv and the sharding),
every rank runs this same function and each model is trained by the DistributedTrainer (tables sharded
with DMP, each rank on its slice of every global batch, metrics over all ranks, so the numbers equal the
one-process run); only rank 0 shows progress, gathers the best model and exports it.

A model whose training diverges is stopped and gets no metrics; selection (`ctrnas.pipeline.final.selection`)
never picks it, nor one worse than the constant predictor on validation, and falls back to the best
baseline when no candidate is left.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

from tqdm.auto import tqdm

from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.final.memory import workers_that_fit
from ctrnas.pipeline.final.resume import jobs_for, say_resumed
from ctrnas.pipeline.final.selection import beats, finish, judge, may_win, rank_key
from ctrnas.pipeline.final.twins import split_twins
from ctrnas.pipeline.final.verdict import verdict_for
from ctrnas.pipeline.final.workers import final_in_workers, in_workers, with_workers
from ctrnas.pipeline.fitness.build import resource_counters
from ctrnas.pipeline.fitness.scratch import (arch_model_for, baseline_jobs, baseline_label, candidate_label,
                                             dense_params, embedding_params, final_template, final_train_batches,
                                             job_model, job_recipe, reload_job, train_as_final)
from ctrnas.pipeline.results import DataResult, FinalResult, SearchStageResult, TrainedModel
from ctrnas.recipe import Recipe

__all__ = ["final_stage", "width_variants"]


def width_variants(recipe: Recipe, data, top: list) -> list:
    """The best candidate at each width of `final.emb_dims` that the top-k do not already hold, as history
    records (same history index and score; `meta` names the best's key and the width; counts for the width).

    An arch at the run's own width is written without `emb_dim` (the seeded archs' form), and an arch the
    top-k already hold at some width, with or without the key, is not added again.
    """
    from ctrnas.space import Arch

    if not recipe.final.emb_dims or not top:
        return []
    run = recipe.train.embedding_dim
    space = recipe.search_space(data.schema) if recipe.space.table_dims else None

    def at(arch: Arch, dim: int | None) -> Arch:
        dim = dim or run
        if space is not None:  # per-table widths: every table at `dim` (uniform, as the baselines)
            if dim == run or dim in space.config.emb_dims:
                return dataclasses.replace(arch, emb_dim=None if dim == run else dim, table_dims=())
            return space.at_table_width(dataclasses.replace(arch, emb_dim=None, table_dims=()), dim)
        return dataclasses.replace(arch, emb_dim=None if dim == run else dim)

    count_params, count_flops = resource_counters(recipe, data)
    best, out = top[0], []
    keys = {(a if space is not None else at(a, a.emb_dim)).key() for a in (Arch.from_json(rec.arch) for rec in top)}
    arch = Arch.from_json(best.arch)
    for dim in recipe.final.emb_dims:
        variant = at(arch, dim)
        if variant.key() in keys:
            continue
        keys.add(variant.key())
        meta = {**best.meta, "width_of": best.key, "width": dim}
        out.append(dataclasses.replace(best, key=variant.key(), arch=variant.to_json(), meta=meta,
                                       params=count_params(variant), flops=count_flops(variant)))
    return out


def front_top(recipe: Recipe, data, search: SearchStageResult, k: int) -> list:
    """With `search.evolution.objective: front`, the k candidates the final stage retrains are drawn from the
    search's Pareto front of rank (best first) against embedding bytes: a candidate joins when it has fewer
    bytes than every better-ranked one. More than k on the front: the best and k - 1 spread evenly over the
    rest (by bytes); fewer: the best-ranked others fill up to k."""
    from ctrnas.pipeline.fitness.build import bytes_counter
    from ctrnas.space import Arch

    ranked = search.result.top_k(len(search.history))
    count = bytes_counter(recipe, data)
    front, others, least = [], [], math.inf
    for rec in ranked:
        b = count(Arch.from_json(rec.arch))
        (front if b < least else others).append(rec)
        least = min(least, b)
    if len(front) > k:
        step = (len(front) - 1) / max(k - 1, 1)
        front = [front[round(i * step)] for i in range(k)] if k > 1 else front[:1]
    return front + others[: max(k - len(front), 0)]


def with_seeds(recipe: Recipe, search: SearchStageResult, top: list) -> list:
    """`top` and, after a `search.evolution.widths_only` search, the seeds themselves when they are not in it:
    the widths step never loses the model it started from (a short rung can score a narrower copy level with
    it, which drops the seed from the front, while the full training tells them apart)."""
    if not recipe.search.evolution.widths_only:
        return top
    from ctrnas.space.baselines import load_arch

    keys = {load_arch(n).key() for n in recipe.seed_names} - {rec.key for rec in top}
    return top + [rec for rec in search.result.top_k(len(search.history)) if rec.key in keys]


def quiet_recipe(recipe: Recipe) -> Recipe:
    """`recipe` with the final trainings' own progress bars off (the stage shows one bar for all)."""
    return dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(recipe.final_train, progress=False)))


def wants_front(recipe: Recipe) -> bool:
    """The search is asked for a front of log loss against embedding bytes."""
    return recipe.search.evolution.objective == "front"


def continue_prefixes(jobs, archs, top, out_dir) -> dict[str, int]:
    """{label: step} of the top-k whose training the search's prefix rungs began: their jobs continue it
    (`ctrnas.pipeline.fitness.rungs`, prefix rungs), so that work counts toward the final stage."""
    from ctrnas.pipeline.fitness.rungs import prefix_checkpoint

    out = {}
    if out_dir is None:
        return out
    for job, arch, rec in zip(jobs, archs, top):
        if job is not None and "width_of" not in rec.meta:
            step = job.continue_from(prefix_checkpoint(Path(out_dir) / "search", arch.key()))
            if step is not None:
                out[job.label] = step
    return out


def final_stage(recipe: Recipe, data: DataResult, search: SearchStageResult, supernet,
                out_dir: Path | None = None, progress: bool = True, distributed=None) -> FinalResult:
    """Retrain the top-k (and the best of them at the other widths of `final.emb_dims`), choose by validation
    log loss among the usable ones (`ctrnas.pipeline.final.selection`), export the winner to `out_dir/model` (or
    the best baseline when no candidate is usable).

    `supernet` may be None (a template of the right shape is built). With `distributed`, every rank calls
    this; rank 0 returns the full result (its `model` the gathered, unsharded best), the others a result
    with the same metrics and `model=None`.
    """
    from ctrnas.errors import CtrnasError
    from ctrnas.space import Arch

    t0 = time.perf_counter()
    main = distributed is None or distributed.env.is_main
    progress = progress and main
    top = front_top(recipe, data, search, recipe.top_k) if wants_front(recipe) else \
        search.retrained(recipe.top_k, recipe.search.evolution.lineages)
    if not top:
        raise CtrnasError("the search returned no candidates to retrain")
    top = with_seeds(recipe, search, top)
    top, twins = split_twins(recipe, top + width_variants(recipe, data, top))
    quiet = quiet_recipe(recipe)
    template = final_template(recipe, data, supernet)
    has_val = bool(split_rows(data, "val"))
    candidates: list[TrainedModel] = []
    best_rank, best_model, best_state = None, None, None
    archs = [Arch.from_json(rec.arch) for rec in top]
    # a folder per training, so an interrupted stage resumes (one process only; ctrnas.pipeline.final.resume)
    jobs = jobs_for(quiet, data, out_dir if distributed is None else None,
                    [(candidate_label(r, rec), ("arch", a)) for r, (rec, a) in enumerate(zip(top, archs))] +
                    [(f"baseline {baseline_label(n)}", ("baseline", n)) for n in baseline_jobs(recipe)])
    continued = continue_prefixes(jobs, archs, top, out_dir)
    say_resumed(jobs, len(final_train_batches(quiet, data)), recipe.final_train.epochs)
    if distributed is None:  # as many workers as fit in memory (0: in this process), or a clear stop
        whats = [("arch", a) for a in archs] + [("baseline", n) for n in baseline_jobs(recipe)]
        # a resumed stage sizes its workers by the trainings still to run (finished ones are read back)
        todo = [w for w, job in zip(whats, jobs) if job is None or job.result() is None]
        n = min(recipe.final.workers, len(whats))
        workers = workers_that_fit(recipe, data, template, todo, n) if todo else (n if in_workers(recipe, n) else 0)
        if workers:
            ran = with_workers(quiet, workers)
            return dataclasses.replace(final_in_workers(recipe, ran, data, top, template, out_dir, progress, t0,
                                                        jobs, search.history,
                                                        verdict=verdict_for(ran, data, template, out_dir, progress)),
                                       continued=continued, twins=twins)
    # one bar for every training of the stage: the top-k, then the baselines
    bar = tqdm(total=len(top) + len(baseline_jobs(recipe)), desc="final stage (top-k + baselines)", unit="model",
               disable=not progress)
    try:
        for rank, rec in enumerate(top):
            arch, job = archs[rank], jobs[rank]
            done = job.result() if job is not None else None
            if done is None:
                model = job_model(recipe, data, template, ("arch", arch), job.dir if job is not None else None)
                val, test, sec, trainer = train_as_final(model, quiet, data, job and job.dir, distributed=distributed)
                diverged, params, emb = trainer.diverged, float(dense_params(model)), float(embedding_params(model))
                if job is not None:
                    job.finish({"val": val, "test": test, "seconds": sec, "diverged": diverged, "dense_params": params,
                                "embedding_params": emb})
            else:  # finished before an interruption: its numbers; its weights are re-loaded if it is exported
                model = trainer = None
                val, test, sec, diverged = done["val"], done["test"], done["seconds"], done["diverged"]
                params = float(done.get("dense_params", rec.params))
                emb = float(done.get("embedding_params", math.nan))
            # params: the trained model's own count (the search's analytic count assumes the supernet's LayerNorms)
            cand = judge(TrainedModel(candidate_label(rank, rec), arch, val, test, params, rec.flops, sec,
                                      score=rec.value, history_index=rec.index, diverged=diverged, emb_params=emb),
                         data, has_val)
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
            bar.update(1)
        if distributed is not None and main:
            best_model = arch_model_for(recipe, template, candidates[best_rank].arch, best_state)  # unsharded
            best_model.load_state_dict(best_state)
            del best_state

        baselines, base_models = [], {}
        kept = None  # the baseline whose model is held: the best so far that beats the best candidate on validation
        for i, name in enumerate(baseline_jobs(recipe)):
            job = jobs[len(top) + i]
            done = job.result() if job is not None else None
            if done is None:
                model = job_model(recipe, data, template, ("baseline", name))
                val, test, sec, trainer = train_as_final(model, job_recipe(quiet, ("baseline", name)), data,
                                                         job and job.dir, distributed=distributed)
                done = {"val": val, "test": test, "seconds": sec, "diverged": trainer.diverged,
                        "dense_params": dense_params(model), "embedding_params": embedding_params(model)}
                if job is not None:
                    job.finish(done)
            else:
                model = trainer = None
            m = judge(TrainedModel(baseline_label(name), None, done["val"], done["test"], float(done["dense_params"]),
                                   math.nan, done["seconds"], diverged=done["diverged"],
                                   emb_params=float(done.get("embedding_params", math.nan))), data, has_val)
            baselines.append(m)
            # the export may need it when it beats every candidate and baseline so far (every rank decides alike)
            if may_win(recipe, candidates[best_rank]) and \
                    beats(m, candidates[best_rank], baselines[kept] if kept is not None else None):
                if kept is not None:
                    base_models.pop(kept, None)
                    if jobs[len(top) + kept] is not None:
                        jobs[len(top) + kept].drop_checkpoint()
                elif jobs[best_rank] is not None:  # the best candidate's weights will not be exported
                    jobs[best_rank].drop_checkpoint()
                kept = len(baselines) - 1
                if distributed is None:
                    base_models[kept] = model if model is not None else \
                        reload_job(recipe, quiet, data, template, ("baseline", name), job)
                else:
                    from ctrnas.distributed.checkpoint import gather_state_dict

                    state = gather_state_dict(trainer.model)  # collective; full tensors on rank 0 only
                    if main:
                        base_models[kept] = job_model(recipe, data, template, ("baseline", name))
                        base_models[kept].load_state_dict(state)
                    del state
            elif job is not None:
                job.drop_checkpoint()
            del model, trainer
            bar.update(1)
    finally:  # ends the bar's line on an interruption too, so the stop message gets its own
        bar.close()
    if kept is not None:  # a baseline is exported: the best candidate's weights are not needed
        best_model = None
    elif best_model is None and distributed is None:  # the best finished before an interruption
        best_model = reload_job(recipe, quiet, data, template, ("arch", candidates[best_rank].arch), jobs[best_rank])
    verdict = verdict_for(quiet, data, template, out_dir, progress) if distributed is None else None
    return dataclasses.replace(finish(recipe, candidates, best_rank, best_model, baselines, base_models, out_dir,
                                      main, t0, distributed, search.history, verdict=verdict), continued=continued,
                               twins=twins)
