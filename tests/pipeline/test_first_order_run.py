"""A run whose space has the first-order choice (`space.first_order: [false, true]`): the warm-up, SiGeo scoring
and the final stage take archs with and without the term, and the exported model reproduces its reported loss."""

import csv
import json

import numpy as np
import pytest
import torch

from ctrnas import api
from ctrnas.space import Arch


def test_a_search_with_the_first_order_choice_runs_and_exports(tests_data, tests_recipe_path, data_dir, tmp_path):
    from ctrnas.pipeline.data import load_rows
    from ctrnas.supernet import load_exported

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={tmp_path / 'fo'}",
                             "space.first_order=[false, true]", "search.top_k=3")
    result = api.run(recipe, progress=False, echo=None)
    entries = json.loads((result.output_dir / "search/history.json").read_text())
    archs = [Arch.from_json(e["arch"]) for e in entries]
    assert {a.first_order for a in archs} == {False, True}
    assert all(e["value"] is not None and np.isfinite(e["value"]) for e in entries)
    with open(result.output_dir / "final/models.csv") as fh:
        trained = {r["arch_key"] for r in csv.DictReader(fh) if r["arch_key"]}
    by_key = {a.key(): a for a in archs}
    assert True in {by_key[k].first_order for k in trained}  # at these seeds the final stage trains one (2 of 3)
    model = load_exported(result.output_dir / "model").eval()
    assert model.arch == result.final.best.arch
    assert (model.first_order is not None) == model.arch.first_order
    rows = load_rows(tests_data, "test", 0, recipe.final.test_rows)
    d, k, y = rows.batch(0, len(rows))
    with torch.no_grad():
        z = model(d, k).double().numpy()
    logloss = float(np.mean(np.logaddexp(0, z) - y.double().numpy() * z))
    assert logloss == pytest.approx(result.final.best.test["logloss"], rel=1e-6)


def test_oneshot_finetuning_fits_the_head_beside_the_logit_terms(tests_data, monkeypatch):
    from ctrnas.pipeline.data import load_rows
    from ctrnas.pipeline.fitness import ctr_fitness
    from ctrnas.supernet import Supernet, export

    torch.manual_seed(0)
    space = {"base": "nasrec-small", "num_blocks": 2, "dense_dims": [8], "sparse_tokens": [4],
             "first_order": [True], "field_fm": [True]}
    net = Supernet(tests_data.schema, space, emb_dim=8)
    arch = net.space.sample(np.random.default_rng(0))
    assert arch.first_order and arch.field_fm
    rows = load_rows(tests_data, "train", 0, 256)
    seen = []
    loss = ctr_fitness.bce_loss
    monkeypatch.setattr(ctr_fitness, "bce_loss", lambda z, y: seen.append(z.detach()) or loss(z, y))
    ctr_fitness.OneShotFitness(net, rows, rows, finetune_steps=1, batch_size=64)(arch, 0)
    d, k, _ = rows.batch(0, 64)
    with torch.no_grad():
        want = export(net, arch, init="inherit")(d, k)  # the head fine-tuned with the terms the model adds
    torch.testing.assert_close(seen[0], want, rtol=0, atol=1e-5)
