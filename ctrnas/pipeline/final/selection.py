"""Which trained model the final stage may report and export, and the baseline fallback.

A retrained candidate is eligible when its training did not diverge, its validation log loss is finite,
and it beats the constant predictor on the same validation rows (always predicting the training CTR c:
log loss -(v ln c + (1 - v) ln(1 - c)) on rows of CTR v). Among the eligible the lowest validation log
loss wins (ties: the earlier rank). When none is eligible the best eligible baseline is reported and
exported instead, and the run says so in one line.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

from ctrnas.files import atomic_write_text
from ctrnas.pipeline.results import DataResult, FinalResult, TrainedModel
from ctrnas.train.metrics import strict_json

OK, DIVERGED, NO_METRICS, WORSE = "ok", "diverged", "no validation metrics", "worse than constant"


def constant_val_logloss(data: DataResult, val: dict) -> float:
    """Log loss of always predicting the training CTR on the evaluated validation rows (NaN if unknown)."""
    c = data.meta["splits"].get("train", {}).get("ctr")
    v = val.get("ctr")
    if c is None or v is None or not 0.0 < c < 1.0 or not math.isfinite(v):
        return math.nan
    return -(v * math.log(c) + (1.0 - v) * math.log(1.0 - c))


def judge(m: TrainedModel, data: DataResult, has_val: bool = True) -> TrainedModel:
    """`m` with its `status` set (OK, DIVERGED, NO_METRICS or WORSE) and `constant_val_logloss` recorded."""
    if m.diverged:
        return dataclasses.replace(m, status=DIVERGED)
    if not has_val:  # nothing to judge on: only divergence rules a model out
        return dataclasses.replace(m, status=OK)
    loss = m.val.get("logloss", math.nan)
    const = constant_val_logloss(data, m.val)
    if not math.isfinite(loss):
        return dataclasses.replace(m, status=NO_METRICS, constant_val_logloss=const)
    if math.isfinite(const) and loss >= const:
        return dataclasses.replace(m, status=WORSE, constant_val_logloss=const)
    return dataclasses.replace(m, status=OK, constant_val_logloss=const)


def rank_key(m: TrainedModel) -> float:
    """Lower is better: the validation log loss of an eligible model, +inf for the others."""
    x = m.val.get("logloss", math.nan)
    return x if m.status == OK and math.isfinite(x) else math.inf


def beats(baseline: TrainedModel, candidate: TrainedModel, kept: TrainedModel | None) -> bool:
    """Whether an eligible `baseline` has a lower validation log loss than the best candidate and than the
    baseline held so far (`kept`): then the export may be this baseline (ties: the candidate, then the
    earlier baseline)."""
    x = rank_key(baseline)
    return math.isfinite(x) and x < rank_key(candidate) and (kept is None or x < rank_key(kept))


def may_win(recipe, candidate: TrainedModel) -> bool:
    """Whether a baseline may be the export instead of the best `candidate`: always with `final.choose_from:
    all`, only when the candidate is unusable (the fallback) with `candidates`."""
    return recipe.final.choose_from == "all" or candidate.status != OK


def best_index(models: list[TrainedModel]) -> int | None:
    """Index of the eligible model with the lowest validation log loss (ties: the first), None if none."""
    best = None
    for i, m in enumerate(models):
        if math.isfinite(rank_key(m)) and (best is None or rank_key(m) < rank_key(models[best])):
            best = i
    return best


def fallback_message(candidates: list[TrainedModel], baseline: TrainedModel | None) -> str:
    """The one line a run prints when no retrained candidate may be reported."""
    why = ", ".join(f"{m.label} {m.status}" for m in candidates)
    if baseline is None:
        return (f"no retrained candidate is usable ({why}) and no baseline is either: nothing is exported; "
                "the reported model is the first candidate, for reference only")
    return (f"no retrained candidate is usable ({why}): the best baseline, {baseline.label}, is reported and "
            "exported instead")


def export_baseline(model, folder: Path, m: TrainedModel, note: str, schema=None, build: dict | None = None) -> None:
    """Write a baseline as the run's model (`save_baseline`), with a model card saying why; a baseline trained
    at another width of final.emb_dims ("dlrm at width 32") records that width in `build`."""
    name, at, width = m.label.partition(" at width ")
    if at and build is not None:
        build = {**build, "dim": int(width)}
    from ctrnas.train.baseline_names import split_lr_scale
    from ctrnas.train.baselines.folder import save_baseline

    name = split_lr_scale(name)[0]  # "lr*8" trained at another learning rate: the model is LR

    save_baseline(model, folder, name, {"val_logloss": m.val.get("logloss"), "val_auc": m.val.get("auc"),
                                        "test_logloss": m.test.get("logloss"), "test_auc": m.test.get("auc")},
                  schema, note=note, build=build, label=m.label)


def finish(recipe, candidates, best_rank, best_model, baselines, base_models, out_dir, main, t0,
           distributed, history=None, verdict=None) -> FinalResult:
    """The final stage's result: the chosen candidate, or the best baseline when none is usable, exported
    to `out_dir/model` on the main process. `verdict(best, candidates, baselines)`: the verdict record
    (`ctrnas.pipeline.final.verdict.run_verdict`), measured before the export so its line is the model card's."""
    best, fallback, note = candidates[best_rank], None, None
    b = best_index(baselines)
    if best.status != "ok":  # no usable candidate: the best usable baseline stands in, said in one line
        fallback = fallback_message(candidates, baselines[b] if b is not None else None)
        note = fallback
        if b is not None:
            best, best_model = baselines[b], base_models.get(b)
        else:
            best_model = None
    elif b is not None and may_win(recipe, best) and rank_key(baselines[b]) < rank_key(best):
        # the export is never worse on validation than anything the stage trained, a baseline included
        note = (f"the {baselines[b].label} baseline had the lowest validation log loss of everything the final "
                f"stage trained ({rank_key(baselines[b]):.5f} against the best candidate's {rank_key(best):.5f})")
        best, best_model = baselines[b], base_models.get(b)
    where = None
    judged = verdict(best, candidates, baselines) if verdict is not None else None
    if history is not None:
        from ctrnas.pipeline.origin import origin

        where = origin(FinalResult(tuple(candidates), best, tuple(baselines), None, 0.0, fallback=fallback), history,
                       verdict=judged, given=recipe.seed_names)
    export_dir = None
    if out_dir is not None and recipe.final.export and main and best_model is not None:
        export_dir = Path(out_dir) / "model"
        from ctrnas.data.preprocess import copy_preprocess

        copy_preprocess(recipe.data_dir, export_dir)  # the raw-row preprocessing travels with the model
        if best.arch is None:
            from ctrnas.data.dataset import load_schema

            cfg = recipe.final_train
            export_baseline(best_model, export_dir, best, where["line"] if where else note,
                            load_schema(recipe.data_dir), {"dim": cfg.embedding_dim, "row_cap": cfg.row_cap})
        else:
            from ctrnas.supernet import save_exported

            save_exported(best_model, export_dir, init="fresh+trained", metrics={
                "val_logloss": best.val.get("logloss"), "val_auc": best.val.get("auc"),
                "test_logloss": best.test.get("logloss"), "test_auc": best.test.get("auc")},
                source=f"top-{len(candidates)} retrain ({best.label}) of search history index {best.history_index}",
                origin=where["line"] if where else None)
    dist_info = distributed.describe() if distributed is not None else None
    return FinalResult(tuple(candidates), best, tuple(baselines), export_dir, time.perf_counter() - t0,
                       model=best_model, distributed=dist_info, fallback=fallback, origin=where, verdict=judged)
