"""The rungs of the CTR multi-fidelity search (`search.strategy: multifidelity`), cheapest first.

Each rung names a fitness and a budget in that fitness's unit:
- `proxy`: the recipe's registry proxy (SiGeo by default) on the warmed-up supernet; budget = batches.
- `oneshot`: inherited-weight evaluation after fine-tuning the last layer; budget = fine-tuning steps.
- `short`: training from scratch with the final stage's settings for one epoch on the first `budget`
  training rows, then the validation log loss on the search's validation rows (`oneshot.eval_rows`).
- `prefix`: the first `budget` steps of the candidate's final-stage training itself (same seed, batches,
  learning-rate schedule), then the validation log loss on the search's validation rows. Successive
  halving over prefixes of one training, as ASHA and Hyperband use epochs (Li et al., MLSys 2020): a
  promoted candidate continues from its last rung's checkpoint (`RUN/search/prefix/<key>/`), and the final
  stage continues from there too, so no rung's work is repeated. Give its size as `fraction`, a share of
  the final training's steps.
- `inherit`: as `prefix` for a line's root (a seed or random draw), then `extra` more steps (a share of the
  final training); a child of evolution starts from its root's weights at `budget` steps instead of from
  scratch and trains the same `extra` steps (`ctrnas.pipeline.fitness.inherit`). It must be the last rung.
- `random`: a seeded uniform draw, free; as a first rung it is the control that shows what a proxy rung
  adds at equal compute.
The final stage, which retrains the candidates that went furthest, is the last rung.

The default ladder (`default_rungs`) is set by the size of the training split, so it means the same
at the demo's 240k training rows and at 1M rows: 4 proxy batches keeping 1/4, 100 fine-tuning steps
keeping 1/2, then 10% and 30% of the training rows (keeping 1/2 between them).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ctrnas.errors import RecipeError
from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.multifidelity import RungConfig

KINDS = ("proxy", "oneshot", "short", "prefix", "inherit", "random")
PREFIX_DIR = "prefix"  # under the search folder: one trainer checkpoint per arch key


def prefix_checkpoint(search_dir: Path, key: str) -> Path:
    """Where the prefix rungs keep an arch's training (the final stage continues it from there)."""
    return Path(search_dir) / PREFIX_DIR / key / "checkpoint.pt"


def final_steps(recipe: Recipe, data: DataResult) -> int:
    """Optimizer steps of one final-stage training (its batches per epoch x its epochs)."""
    import math

    rows = split_rows(data, "train")
    if recipe.final.train_rows is not None:
        rows = min(rows, recipe.final.train_rows)
    return math.ceil(rows / recipe.final_train.batch_size) * recipe.reference_epochs


def default_rungs(recipe: Recipe, train_rows: int) -> tuple[RungConfig, ...]:
    """The ladder used when `search.multifidelity.rungs` is empty (see the module docstring)."""
    bs = recipe.final_train.batch_size
    return (RungConfig("proxy", recipe.proxy.batches, 1 / 4), RungConfig("oneshot", 100, 1 / 2),
            RungConfig("short", max(bs, train_rows // 10), 1 / 2), RungConfig("short", max(bs, 3 * train_rows // 10)))


def share_rows(recipe: Recipe, data: DataResult, fraction: float) -> int:
    """Training rows of a share of the training split, at least one batch (a short rung's or the field
    probe's `fraction`)."""
    train_rows = split_rows(data, "train")
    return min(train_rows, max(recipe.final_train.batch_size, round(fraction * train_rows)))


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
        if r.fitness == "inherit" and (i != len(rungs) - 1 or r.extra is None):
            raise RecipeError(recipe.source or "recipe", f"{key}.fitness",
                              "an inherit rung is the last rung and needs `extra`, a share of the final "
                              "training each candidate trains beyond its line's prefix (e.g. 0.1)")
        if r.extra is not None and r.fitness != "inherit":
            raise RecipeError(recipe.source or "recipe", f"{key}.extra", f"only an inherit rung reads extra, "
                              f"not {r.fitness!r}")
        if r.fraction is not None:
            if r.fitness not in ("short", "prefix", "inherit"):
                raise RecipeError(recipe.source or "recipe", f"{key}.fraction",
                                  f"only a short-training, prefix or inherit rung reads a share, not {r.fitness!r}")
            if r.min_steps is not None and r.fitness not in ("prefix", "inherit"):
                raise RecipeError(recipe.source or "recipe", f"{key}.min_steps",
                                  f"only a prefix or inherit rung has a floor in steps, not {r.fitness!r}")
            if r.fitness in ("prefix", "inherit"):  # a share of the final training's steps, >= `min_steps`
                total = final_steps(recipe, data)
                steps = max(1, round(r.fraction * total), min(r.min_steps or 0, total))
                rungs[i] = r = dataclasses.replace(r, budget=steps, fraction=None, min_steps=None)
            else:
                rungs[i] = r = dataclasses.replace(r, budget=share_rows(recipe, data, r.fraction), fraction=None)
        if r.fitness == "prefix" and not (r.budget and 0 < r.budget <= final_steps(recipe, data)):
            raise RecipeError(recipe.source or "recipe", f"{key}.budget",
                              f"a prefix rung needs 1..{final_steps(recipe, data)} steps of the final training "
                              f"(or a fraction), got {r.budget}")
        if r.fitness == "inherit" and not (r.budget and 0 < r.budget + inherit_extra(recipe, data, r)
                                           <= final_steps(recipe, data)):
            raise RecipeError(recipe.source or "recipe", f"{key}.budget",
                              f"an inherit rung's prefix and extra steps must fit in the final training's "
                              f"{final_steps(recipe, data)} steps, got {r.budget} + {inherit_extra(recipe, data, r)}")
        if r.fitness == "prefix" and i and rungs[i - 1].fitness == "prefix" and r.budget <= rungs[i - 1].budget:
            raise RecipeError(recipe.source or "recipe", f"{key}.budget",
                              f"a prefix rung continues the one before: expected more than its "
                              f"{rungs[i - 1].budget} steps, got {r.budget}")
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
        rows = self.default_budget if budget is None else int(budget)
        trainer = short_trainer(self.recipe, self.data, self.template, arch, rows)
        return val_score(trainer, self.data, self.val_rows, {"train_rows": rows, "samples": int(trainer.rows_seen)})


def short_trainer(recipe: Recipe, data: DataResult, template, arch, rows: int):
    """The trainer of `arch` after one epoch on the first `rows` training rows, from the final stage's initial
    weights and optimizer settings (a short rung's training)."""
    from ctrnas.pipeline.fitness.scratch import job_model
    from ctrnas.train.batches import dataset_batches

    cfg = recipe.final_train
    # a fixed budget known in advance: the cosine schedule over it (the "plateau" one cuts at evaluations,
    # and a short rung has none)
    cfg = dataclasses.replace(cfg, epochs=1, progress=False, restore_best=False, early_stop_patience=None,
                              eval_every=0, checkpoint_every=0,
                              schedule="cosine" if cfg.schedule == "plateau" else cfg.schedule)
    model = job_model(recipe, data, template, ("arch", arch))
    train = dataset_batches(data.path, "train", cfg.batch_size, shuffle=True, seed=cfg.seed, limit=rows)
    trainer = guarded_trainer(model, cfg, data)
    trainer.fit(train, None, resume=False)
    return trainer


def guarded_trainer(model, cfg, data: DataResult, out: Path | None = None):
    """A Trainer whose divergence guard knows the constant predictor's loss on this training split."""
    from ctrnas.train.metrics import constant_logloss
    from ctrnas.train.trainer import Trainer

    trainer = Trainer(model, cfg, out)
    ctr = data.meta["splits"].get("train", {}).get("ctr")
    if ctr is not None:
        trainer.guard.constant_loss = constant_logloss(ctr)
    return trainer


def val_score(trainer, data: DataResult, val_rows: int, meta: dict) -> FitnessResult:
    """A rung's score: the validation log loss on the search's first `val_rows` validation rows, NaN for a
    diverged training (it ranks last)."""
    from ctrnas.train.batches import dataset_batches

    if trainer.diverged:
        return FitnessResult(float("nan"), {"val_logloss": float("nan")},
                             {**meta, "error": f"diverged: {trainer.diverged['reason']}"})
    m = trainer.evaluate(dataset_batches(data.path, "val", trainer.cfg.eval_batch_size, limit=val_rows))
    return FitnessResult(m.logloss, {"val_logloss": m.logloss, "val_auc": m.auc}, meta)


class PrefixTrainingFitness:
    """fitness(arch, seed, steps) = validation log loss (lower is better) after the first `steps` steps of
    the arch's final-stage training (see the module docstring). With `folder`, the training's checkpoint is
    kept at `prefix_checkpoint(folder, key)`, so a later rung continues it: the same numbers as one
    uninterrupted training (the trainer resumes bit-exactly). A diverged training scores NaN."""

    maximize = False

    def __init__(self, recipe: Recipe, data: DataResult, template, val_rows: int, folder: Path | None = None):
        self.recipe, self.data, self.template, self.val_rows = recipe, data, template, val_rows
        self.folder = Path(folder) if folder is not None else None
        self.default_budget = final_steps(recipe, data)

    def __call__(self, arch, seed: int, budget: int | None = None) -> FitnessResult:
        steps = self.default_budget if budget is None else int(budget)
        folder = prefix_checkpoint(self.folder, arch.key()).parent if self.folder is not None else None
        trainer, fit = self.start(arch, folder)
        summary = fit(steps, folder is not None)
        meta = {"steps": int(trainer.step), "samples": int(summary["rows"])}
        return val_score(trainer, self.data, self.val_rows, meta)

    def start(self, arch, out: Path | None):
        """(trainer, fit) of the arch's final-stage training from its initial weights, checkpointed in `out`
        when given; fit(steps, resume) trains it up to `steps` steps in all and returns the summary."""
        from ctrnas.pipeline.fitness.scratch import final_train_batches, job_model
        from ctrnas.train.batches import dataset_batches

        cfg = dataclasses.replace(self.recipe.final_train, progress=False)
        model = job_model(self.recipe, self.data, self.template, ("arch", arch), out)
        train = final_train_batches(self.recipe, self.data)
        # the final stage's own validation rows: its epoch-end model selection must see the same evaluations
        final_val = dataset_batches(self.data.path, "val", cfg.eval_batch_size, limit=self.recipe.final.val_rows)
        if out is not None and not 0 < cfg.checkpoint_every <= len(train):  # as the final stage's jobs
            cfg = dataclasses.replace(cfg, checkpoint_every=len(train))
        trainer = guarded_trainer(model, cfg, self.data, out)
        selecting = (cfg.restore_best or cfg.early_stop_patience is not None) and split_rows(self.data, "val")

        def fit(steps: int, resume: bool) -> dict:
            return trainer.fit(train, final_val if selecting else None, resume=resume, max_steps=steps)

        return trainer, fit


def inherit_extra(recipe: Recipe, data: DataResult, rung: RungConfig) -> int:
    """The steps an inherit rung's candidates train beyond their line's prefix (at least one)."""
    return max(1, round((rung.extra or 0) * final_steps(recipe, data)))


def inside_warmup(recipe: Recipe, data: DataResult, rungs=None) -> list[str]:
    """A warning per prefix rung that ends inside the learning rate's warm-up: its models are still near
    their initial weights (at 100k rows a 5% rung, 16 steps, ranked nothing: docs/search-quality.md).
    `rungs`: the ladder (default: the recipe's, when its strategy runs one)."""
    import math

    from ctrnas.search.strategies import get_strategy

    if rungs is None:
        rungs = ladder_rungs(recipe, data) if get_strategy(recipe.search.strategy).by_rungs else ()
    warm = math.ceil(recipe.final_train.warmup_ratio * final_steps(recipe, data) / (recipe.reference_epochs if recipe.final_train.schedule == "plateau" else 1))
    return [f"warning: rung {i} ({r.budget} steps) ends inside the learning rate's warm-up ({warm} steps) and "
            "ranks little more than the initial weights: raise its fraction or give min_steps"
            for i, r in enumerate(rungs) if r.fitness in ("prefix", "inherit") and r.budget is not None
            and r.budget <= warm]


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
    if rung.fitness in ("prefix", "inherit"):  # steps of the final training; the caller counts what is new
        return int(budget or 0) * recipe.final_train.batch_size
    return int(budget or 0)

