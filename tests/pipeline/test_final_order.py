"""The final stage hands its trainings out by their dense weights, largest first; finished ones cost nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ctrnas.pipeline.final.workers import training_costs
from ctrnas.pipeline.fitness.scratch import dense_params, final_template, job_model
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import recipe_from_dict
from ctrnas.space import get_space
from ctrnas.supernet.testing import make_schema

SPACE = {"base": "nasrec-small", "num_blocks": 2, "dense_dims": [8, 16], "sparse_tokens": [4]}


class Folder:
    """A job folder with or without a stored result."""

    def __init__(self, done: bool):
        self.done = done

    def result(self):
        return {"val": {}, "test": {}} if self.done else None


def _stage():
    recipe = recipe_from_dict({"name": "t", "data": {"path": "x"}, "space": SPACE})
    data = DataResult(Path("x"), make_schema(cards=(500, 7, 300, 11)), {})
    torch.manual_seed(0)
    archs = [("arch", get_space(recipe.space).sample(np.random.default_rng(i))) for i in range(3)]
    return recipe, data, final_template(recipe, data, None), archs + [("baseline", n) for n in ("lr", "dlrm", "dcnv2")]


def test_costs_are_the_dense_weights_of_the_models_the_jobs_train():
    recipe, data, template, whats = _stage()
    costs = training_costs(recipe, data, template, whats, [None] * len(whats))
    # counted on the full-size models themselves, not on the tiny-table copies the estimate builds
    assert costs == [float(dense_params(job_model(recipe, data, template, w))) for w in whats]
    lr, dlrm, dcnv2 = costs[3:]
    assert lr == 3 + 1 + 1  # LR: one weight per dense feature (make_schema: 3) and two biases
    assert dcnv2 > dlrm > lr


def test_a_training_an_interrupted_run_finished_costs_nothing():
    recipe, data, template, whats = _stage()
    folders = [Folder(i == 1) for i in range(len(whats))]
    costs = training_costs(recipe, data, template, whats, folders)
    assert costs[1] == 0.0 and all(c > 0 for i, c in enumerate(costs) if i != 1)
