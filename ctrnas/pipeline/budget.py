"""What a run cost, in full-training equivalents (FTE).

One FTE is the training samples of one final-stage training of one model (its training rows x its
epochs). A stage's FTE is the training samples it processed divided by that: the warm-up's rows, every
scoring pass of the search (proxy batches, one-shot fine-tuning steps, short trainings, the steps an
inherit rung's candidate trained itself; cache hits cost nothing; validation passes are not counted), and
the final stage's trainings (planned rows x epochs per model, the top-k and the baselines apart). So a run whose only cost is a final stage of k models is k FTE,
and the stages add up to the total.

A sample counts as a training sample when it goes forward and backward through the whole model. One-shot
fine-tuning does not: the inherited body is frozen and run forward only (ctrnas.pipeline.fitness.ctr_fitness), and
only the last linear layer is trained, so its samples count FINETUNE_COST of one (docs/multifidelity.md).
"""

from __future__ import annotations

from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe
from ctrnas.search.multifidelity import RungConfig

# A training step's backward costs about twice its forward (gradients of the activations and of the weights),
# so a forward-only pass through the frozen body is a third of a training sample; the last layer's own forward
# and backward (one linear layer) are left out.
FINETUNE_COST = 1 / 3


def final_samples(recipe: Recipe, data: DataResult) -> int:
    """Training samples of one final-stage training: its training rows x its epochs (the FTE unit)."""
    train = split_rows(data, "train")
    rows = min(recipe.final.train_rows, train) if recipe.final.train_rows is not None else train
    return rows * recipe.reference_epochs


def trained_samples(model, unit: int, batch_size: int) -> int:
    """Training samples of one final-stage training: the steps it took (recorded beside its val metrics),
    else the planned `unit`."""
    val = getattr(model, "val", None)
    steps = val.get("steps") if isinstance(val, dict) else None
    return int(steps) * batch_size if steps is not None else unit


def search_samples(recipe: Recipe, data: DataResult, history, kind: str) -> int:
    """Training samples the search's scoring processed (cache hits are free; a one-shot fine-tuning sample
    counts FINETUNE_COST of one), rounded to a whole sample."""
    from ctrnas.pipeline.fitness.rungs import ladder_rungs, rung_samples

    rungs = ladder_rungs(recipe, data) if kind == "multifidelity" else None
    total = 0.0
    for r in history:
        if r.cached:
            continue
        rung = rungs[r.rung] if rungs is not None else RungConfig(kind)
        if rung.fitness == "inherit":  # the steps it trained itself (a child continues its line's)
            total += int(r.meta.get("trained_steps", 0)) * recipe.final_train.batch_size
            continue
        total += rung_samples(recipe, rung, r.budget) * (FINETUNE_COST if rung.fitness == "oneshot" else 1)
    # a prefix rung continues the candidate's training: only the steps beyond its last rung are new work
    return round(total - sum(prefix_steps(recipe, data, history, kind, before=True).values()) *
                 recipe.final_train.batch_size)


def prefix_steps(recipe: Recipe, data: DataResult, history, kind: str, before: bool = False) -> dict[str, int]:
    """{key: steps} the prefix rungs trained per arch: the last rung's (`before`: the sum of the steps of
    the earlier rungs it continued from, counted twice by `rung_samples`)."""
    from ctrnas.pipeline.fitness.rungs import ladder_rungs

    if kind != "multifidelity":
        return {}
    rungs = ladder_rungs(recipe, data)
    seen: dict[str, list[int]] = {}
    for r in history:
        if r.rung is not None and rungs[r.rung].fitness == "prefix" and not r.cached:
            seen.setdefault(r.key, []).append(int(r.budget or 0))
    return {k: (sum(v[:-1]) if before else v[-1]) for k, v in seen.items()}


def fte_by_stage(recipe: Recipe, data: DataResult, warm, search, final) -> dict:
    """{"unit_samples", "samples": {stage: n}, "fte": {stage: x, ..., "total": sum}} of a finished run
    (`final` may be None before the final stage)."""
    unit = final_samples(recipe, data)
    samples = {"warmup": int(warm.rows), "search": search_samples(recipe, data, search.history, search.fitness)}
    if getattr(search, "fields", None):  # the field probe's one short training
        samples["search"] += int(search.fields["train_rows"])
    if final is not None:
        # a candidate that continued its prefix-rung training only adds the remaining steps; a training that
        # stopped early counts the steps it took
        bs = recipe.final_train.batch_size
        samples["final"] = sum(trained_samples(m, unit, bs) for m in final.candidates) - sum(
            getattr(final, "continued", {}).values()) * bs
        samples["baselines"] = sum(trained_samples(m, unit, bs) for m in final.baselines)
        verdict = getattr(final, "verdict", None) or {}
        if verdict.get("samples"):
            samples["verdict"] = int(verdict["samples"])
    fte = {k: v / unit for k, v in samples.items()}
    fte["total"] = sum(fte.values())
    return {"unit_samples": unit, "samples": samples, "fte": fte}


def fte_line(report: dict) -> str:
    """One console line: FTE per stage and the total."""
    parts = ", ".join(f"{k} {v:.2f}" for k, v in report["fte"].items() if k != "total")
    return f"compute: {report['fte']['total']:.2f} FTE ({parts}; 1 FTE = {report['unit_samples']} samples)"
