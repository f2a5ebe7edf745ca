"""The rungs of the CTR multi-fidelity search (`search.strategy: multifidelity`), cheapest first.

Each rung names a fitness and a budget in that fitness's unit:
- `proxy`: the recipe's registry proxy (SiGeo by default) on the warmed-up supernet; budget = batches.
- `oneshot`: inherited-weight evaluation after fine-tuning the last layer; budget = fine-tuning steps.
- `short`: training from scratch with the final stage's settings for one epoch on the first `budget`
  training rows, then the validation log loss on the search's validation rows (`oneshot.eval_rows`).
- `random`: a seeded uniform draw, free; as a first rung it is the control that shows what a proxy rung
  adds at equal compute.
The final stage, which retrains the candidates that went furthest, is the last rung.

The default ladder (`default_rungs`) is set by the size of the training split, so it means the same
at the demo's 240k training rows and at 1M rows: 4 proxy batches keeping 1/4, 100 fine-tuning steps
keeping 1/2, then 10% and 30% of the training rows (keeping 1/2 between them).
"""

from __future__ import annotations

import dataclasses

from ctrnas.errors import RecipeError
from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe
from ctrnas.search.fidelity import Ladder
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.multifidelity import RungConfig

KINDS = ("proxy", "oneshot", "short", "random")


def default_rungs(recipe: Recipe, train_rows: int) -> tuple[RungConfig, ...]:
    """The ladder used when `search.multifidelity.rungs` is empty (see the module docstring)."""
    bs = recipe.final_train.batch_size
    return (RungConfig("proxy", recipe.proxy.batches, 1 / 4), RungConfig("oneshot", 100, 1 / 2),
            RungConfig("short", max(bs, train_rows // 10), 1 / 2), RungConfig("short", max(bs, 3 * train_rows // 10)))


def ladder_rungs(recipe: Recipe, data: DataResult) -> tuple[RungConfig, ...]:
    """The recipe's rungs (or the default ladder), checked: known kinds, short budgets within the split;
    a short rung's `fraction` becomes its budget in rows (at least one batch)."""
    train_rows = split_rows(data, "train")
    rungs = list(recipe.search.multifidelity.rungs or default_rungs(recipe, train_rows))
    for i, r in enumerate(rungs):
        key = f"search.multifidelity.rungs[{i}]"
        if r.fitness not in KINDS:
            raise RecipeError(recipe.source or "recipe", f"{key}.fitness",
                              f"expected one of {', '.join(map(repr, KINDS))}, got {r.fitness!r}")
        if r.fraction is not None:
            if r.fitness != "short":
                raise RecipeError(recipe.source or "recipe", f"{key}.fraction",
                                  f"only a short-training rung reads a share of the rows, not {r.fitness!r}")
            rows = min(train_rows, max(recipe.final_train.batch_size, round(r.fraction * train_rows)))
            rungs[i] = r = dataclasses.replace(r, budget=rows, fraction=None)
        if r.fitness == "short" and not (r.budget and 0 < r.budget <= split_rows(data, "train")):
            raise RecipeError(recipe.source or "recipe", f"{key}.budget",
                              f"a short training needs 1..{split_rows(data, 'train')} training rows, got {r.budget}")
    return tuple(rungs)


class ShortTrainingFitness:
    """fitness(arch, seed, rows) = validation log loss (lower is better) of the arch trained from scratch,
    as the final stage trains it (same weights drawn from the training seed, same optimizer settings), for
    one epoch on the first `rows` training rows. A diverged training scores NaN (it ranks last)."""

    maximize = False

    def __init__(self, recipe: Recipe, data: DataResult, template, val_rows: int):
        self.recipe, self.data, self.template, self.val_rows = recipe, data, template, val_rows
        self.default_budget = split_rows(data, "train")

    def __call__(self, arch, seed: int, budget: int | None = None) -> FitnessResult:
        from ctrnas.pipeline.fitness.scratch import job_model
        from ctrnas.train.batches import dataset_batches
        from ctrnas.train.metrics import constant_logloss
        from ctrnas.train.trainer import Trainer

        rows = self.default_budget if budget is None else int(budget)
        cfg = dataclasses.replace(self.recipe.final_train, epochs=1, progress=False, restore_best=False,
                                  early_stop_patience=None, eval_every=0, checkpoint_every=0)
        model = job_model(self.recipe, self.data, self.template, ("arch", arch))
        train = dataset_batches(self.data.path, "train", cfg.batch_size, shuffle=True, seed=cfg.seed, limit=rows)
        trainer = Trainer(model, cfg)
        ctr = self.data.meta["splits"].get("train", {}).get("ctr")
        if ctr is not None:
            trainer.guard.constant_loss = constant_logloss(ctr)
        summary = trainer.fit(train, None, resume=False)
        meta = {"train_rows": rows, "samples": int(summary["rows"])}
        if trainer.diverged:
            return FitnessResult(float("nan"), {"val_logloss": float("nan")},
                                 {**meta, "error": f"diverged: {trainer.diverged['reason']}"})
        val = dataset_batches(self.data.path, "val", cfg.eval_batch_size, limit=self.val_rows)
        m = trainer.evaluate(val)
        return FitnessResult(m.logloss, {"val_logloss": m.logloss, "val_auc": m.auc}, meta)


def build_ladder(recipe: Recipe, data: DataResult, supernet) -> tuple[Ladder, tuple[RungConfig, ...], list[bool], str]:
    """(the Ladder fitness, its rungs, each rung's direction, a note on the rows each rung reads)."""
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.pipeline.fitness.build import make_fitness

    rungs = ladder_rungs(recipe, data)
    made: dict = {}
    fitnesses, notes = [], []
    steps = max((r.budget or recipe.oneshot.finetune_steps for r in rungs if r.fitness == "oneshot"), default=0)
    for r in rungs:
        if r.fitness not in made:
            if r.fitness == "proxy":
                batches = max(x.budget or recipe.proxy.batches for x in rungs if x.fitness == "proxy")
                rec = dataclasses.replace(recipe, proxy=dataclasses.replace(recipe.proxy, batches=batches))
                made["proxy"], note = make_fitness(rec, data, supernet, "proxy")
            elif r.fitness == "oneshot":
                rec = dataclasses.replace(recipe, oneshot=dataclasses.replace(recipe.oneshot, finetune_steps=steps))
                made["oneshot"], note = make_fitness(rec, data, supernet, "oneshot")
            elif r.fitness == "random":
                from ctrnas.pipeline.fitness.ctr_fitness import RandomFitness

                made["random"], note = RandomFitness(), "no rows"
            else:
                val = min(recipe.oneshot.eval_rows, split_rows(data, "val"))
                made["short"] = ShortTrainingFitness(recipe, data, final_template(recipe, data, supernet), val)
                note = f"short trainings on the first training rows, {val} val rows"
            notes.append(f"{r.fitness}: {note}")
        fitnesses.append(made[r.fitness])
    return Ladder(tuple(fitnesses)), rungs, [made[r.fitness].maximize for r in rungs], "; ".join(notes)


def rung_samples(recipe: Recipe, rung: RungConfig, budget: int | None) -> int:
    """Training samples one score at this rung processes (its budget in samples): proxy batches x batch
    size, fine-tuning steps x batch size, or the short training's rows (validation passes not counted)."""
    if rung.fitness == "proxy":
        b = recipe.proxy.batches if budget is None else budget
        return b * (recipe.proxy.batch_size or recipe.train.batch_size)
    if rung.fitness == "oneshot":
        return (recipe.oneshot.finetune_steps if budget is None else budget) * recipe.oneshot.batch_size
    if rung.fitness == "random":
        return 0
    return int(budget or 0)

