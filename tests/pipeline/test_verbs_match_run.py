"""The single verbs share the pipeline's implementation: `ctrnas warmup` + `ctrnas score` give exactly the
SiGeo value, terms and parameter count that `ctrnas run` records in its search history for the same arch."""

import json

import pytest
import torch
import yaml

from ctrnas.cli import main
from ctrnas.config import to_dict
from ctrnas.recipe import load_recipe


@pytest.mark.slow
def test_warmup_then_score_equals_the_run_history(tests_data, tests_recipe_path, data_dir, tmp_path):
    run_dir = tmp_path / "run"
    assert main(["run", str(tests_recipe_path), "--no-progress", "--set", f"data.path={data_dir}",
                 "--set", f"output={run_dir}", "--set", "search.strategy=random", "--set", "search.random.budget=3",
                 "--set", "final.top_k=1", "--set", "final.baselines=[]", "--set", "final.train_rows=256",
                 "--set", "final.export=false"]) == 0
    recipe = load_recipe(run_dir / "recipe.yaml")
    assert recipe.seed == recipe.train.seed  # `ctrnas warmup` seeds the supernet with the train seed
    record = json.loads((run_dir / "search/history.json").read_text())[-1]
    (tmp_path / "arch.json").write_text(json.dumps(record["arch"]))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(to_dict(recipe.space)))

    warm = tmp_path / "warm"
    assert main(["warmup", "--data", str(data_dir), "--recipe", str(run_dir / "recipe.yaml"),
                 "--space", str(tmp_path / "space.yaml"), "--fraction", str(recipe.warmup.fraction),
                 "--full-ratio", str(recipe.warmup.full_supernet_ratio), "--out", str(warm), "--no-progress"]) == 0
    # the same weights as the run's warm-up stage wrote
    a = torch.load(warm / "supernet.pt")["state_dict"]
    b = torch.load(run_dir / "warmup/supernet.pt")["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    bs = recipe.proxy.batch_size or recipe.train.batch_size
    assert main(["score", "--data", str(data_dir), "--arch", str(tmp_path / "arch.json"), "--supernet",
                 str(warm / "supernet.pt"), "--proxies", "sigeo,params", "--set", "params.embeddings=false",
                 "--batches", str(recipe.proxy.batches), "--batch-size", str(bs), "--seed", str(record["seed"]),
                 "--json", str(tmp_path / "scores.json")]) == 0
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert record["meta"]["proxy"] == "sigeo"
    assert scores["sigeo"]["value"] == record["value"]
    assert scores["sigeo"]["terms"] == record["terms"]
    assert scores["sigeo"]["options"]["preset"] == "warmup_recsys"  # what the warm-up chose, as in the run
    assert scores["params"]["value"] == record["params"]  # the exported subnet, not the supernet's full tensors


def test_score_reads_an_old_bare_state_dict_like_the_checkpoint_of_the_same_weights(tests_data, tests_recipe_path,
                                                                                    tmp_path):
    import numpy as np

    from ctrnas import api
    from ctrnas.space import get_space
    from ctrnas.supernet.io import build_supernet, save_supernet

    recipe = load_recipe(tests_recipe_path)
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(to_dict(recipe.space)))
    net = build_supernet(tests_data.schema, recipe.space, 5)
    torch.save(net.state_dict(), tmp_path / "bare.pt")       # as `ctrnas warmup` wrote before
    save_supernet(net, tmp_path / "new.pt")                  # no warm-up recorded: the same reading
    arch = get_space(recipe.space).sample(np.random.default_rng(1))
    (tmp_path / "arch.json").write_text(json.dumps(arch.to_json()))
    got = {name: api.score_arch(tests_data.path, tmp_path / "arch.json", ["sigeo"], supernet=tmp_path / name,
                                space=str(tmp_path / "space.yaml"), batches=2, batch_size=64)["sigeo"]
           for name in ("bare.pt", "new.pt")}
    assert got["bare.pt"].value == got["new.pt"].value and got["bare.pt"].terms == got["new.pt"].terms
    assert got["bare.pt"].meta["options"]["preset"] == "warmup_recsys"
