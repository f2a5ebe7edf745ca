"""The Ladder fitness of a multi-fidelity search: one fitness per rung of `rungs.ladder_rungs`, built once per kind
(see `ctrnas.pipeline.fitness.rungs` for the kinds)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ctrnas.pipeline.data import split_rows
from ctrnas.pipeline.fitness.inherit import InheritedTrainingFitness
from ctrnas.pipeline.fitness.rungs import (PrefixTrainingFitness, ShortTrainingFitness, inherit_extra,
                                           inside_warmup, ladder_rungs)
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe
from ctrnas.search.fidelity import Ladder
from ctrnas.search.multifidelity import RungConfig


def build_ladder(recipe: Recipe, data: DataResult, supernet, folder: Path | None = None
                 ) -> tuple[Ladder, tuple[RungConfig, ...], list[bool], str]:
    """(the Ladder fitness, its rungs, each rung's direction, a note on the rows each rung reads);
    `folder`: the search's folder, where prefix rungs keep their trainings for the next rung and the final
    stage."""
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
            elif r.fitness == "inherit":
                val = min(recipe.oneshot.eval_rows, split_rows(data, "val"))
                extra = inherit_extra(recipe, data, r)
                made["inherit"] = InheritedTrainingFitness(recipe, data, final_template(recipe, data, supernet), val,
                                                           folder, extra)
                note = f"prefixes of the final training, children from their line's weights (+{extra} steps); " \
                       f"{val} val rows"
            elif r.fitness == "prefix":
                val = min(recipe.oneshot.eval_rows, split_rows(data, "val"))
                made["prefix"] = PrefixTrainingFitness(recipe, data, final_template(recipe, data, supernet), val,
                                                       folder)
                note = f"prefixes of the final training, continued rung to rung; {val} val rows"
            else:
                val = min(recipe.oneshot.eval_rows, split_rows(data, "val"))
                made["short"] = ShortTrainingFitness(recipe, data, final_template(recipe, data, supernet), val)
                note = f"short trainings on the first training rows, {val} val rows"
            notes.append(f"{r.fitness}: {note}")
        fitnesses.append(made[r.fitness])
    notes += inside_warmup(recipe, data, rungs)
    return Ladder(tuple(fitnesses)), rungs, [made[r.fitness].maximize for r in rungs], "; ".join(notes)
