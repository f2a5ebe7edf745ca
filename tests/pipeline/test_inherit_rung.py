"""The inherit rung: a line's root trains a prefix of its final training from scratch; its descendants start
from the root's weights and optimizer sums at that step and train the same extra steps. A descendant of the
root's own shape continues exactly the root's training; its final training is from scratch; every step is
counted once."""

import dataclasses
import json

import pytest
import torch

from ctrnas import api
from ctrnas.errors import RecipeError

# 2048 training rows / 256 = 8 steps an epoch, 2 epochs: roots train 4 steps, then everyone 4 more
RUNGS = "search.multifidelity.rungs=[{fitness: inherit, fraction: 0.25, extra: 0.25}]"
SETTINGS = ("search.strategy=multifidelity", RUNGS, "final.train={epochs: 2}", "search.evolution.population_size=2",
            "search.evolution.tournament_size=2", "search.evolution.generations=3",
            "search.evolution.children_per_generation=1", "search.evolution.local_sweep=true",
            "search.evolution.lineages=2")


@pytest.fixture(scope="module")
def inherit_run(tests_data, tests_recipe_path, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("inherit") / "run"
    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", f"output={out}", *SETTINGS,
                             "final.export=false")  # its tests read the lines and the trainings, not the model
    return recipe, api.run(recipe, progress=False, echo=None)


def test_roots_train_the_whole_rung_and_children_only_their_extra_steps(inherit_run):
    recipe, result = inherit_run
    h = list(result.search.history)
    roots = h[:2]
    assert all(not r.parent_key and r.meta["steps"] == 8 and r.meta["trained_steps"] == 8 for r in roots)
    children = h[2:]
    assert len(children) == 3 and all(r.parent_key for r in children)
    line = result.search.history.roots()
    for r in children:  # each starts from its line's root, at any depth, and trains 4 steps of its own
        assert r.meta["root"] == line[r.key] != r.key
        assert r.meta["steps"] == 8 and r.meta["trained_steps"] == 4
        assert r.meta["copied"] > 0
    # every step counted once: the search's own steps, then the final stage (roots continue from step 8)
    c = json.loads((result.output_dir / "metrics.json").read_text())["compute"]
    bs = recipe.final_train.batch_size
    assert c["samples"]["search"] == (8 * 2 + 4 * 3) * bs
    keys = {r.key for r in roots}
    assert result.final.continued == {x.label: 8 for x in result.final.candidates if x.arch.key() in keys}
    assert c["samples"]["final"] == sum(16 - (8 if x.arch.key() in keys else 0)
                                        for x in result.final.candidates) * bs
    # the kept lines' weights are gone after the search; only the retrained candidates' folders stay
    prefix = result.output_dir / "search" / "prefix"
    assert not list(prefix.glob("*/graft.pt"))
    assert {d.name for d in prefix.iterdir()} == {x.arch.key() for x in result.final.candidates}


def test_a_descendant_is_retrained_from_scratch(inherit_run, tests_data):
    from ctrnas.pipeline.fitness.scratch import arch_model, final_template, train_as_final

    recipe, result = inherit_run
    roots = {r.key for r in list(result.search.history)[:2]}
    quiet = api.override(recipe, "final.train.progress=false")
    template = final_template(quiet, tests_data, None)
    checked = 0
    for cand in result.final.candidates:
        if cand.arch.key() in roots:
            continue
        val, test, _, trainer = train_as_final(arch_model(quiet, template, cand.arch), quiet, tests_data)
        assert trainer.step == 16 and test["logloss"] == cand.test["logloss"]
        checked += 1
    assert checked >= 1  # this seed retrains two children (each line's best)


def _trainer(recipe, data, arch):
    from ctrnas.pipeline.fitness.rungs import guarded_trainer
    from ctrnas.pipeline.fitness.scratch import arch_model, final_template

    cfg = dataclasses.replace(recipe.final_train, progress=False)
    return guarded_trainer(arch_model(recipe, final_template(recipe, data, None), arch), cfg, data)


def test_grafting_the_same_arch_continues_its_training_exactly(inherit_run, tests_data):
    """Weights, buffers, Adagrad sums and step carry over: 4 + 4 steps equal 8 uninterrupted ones."""
    from ctrnas.pipeline.fitness.inherit import graft, graft_state
    from ctrnas.pipeline.fitness.scratch import final_train_batches

    recipe, result = inherit_run
    arch = result.final.candidates[0].arch
    train = final_train_batches(recipe, tests_data)
    whole = _trainer(recipe, tests_data, arch)
    whole.fit(train, None, resume=False, max_steps=8)
    half = _trainer(recipe, tests_data, arch)
    half.fit(train, None, resume=False, max_steps=4)
    state = graft_state(half)
    child = _trainer(recipe, tests_data, arch)
    counts = graft(child, state)
    assert counts["fresh"] == 0 and child.step == 4
    child.fit(train, None, resume=False, max_steps=8)
    for (n, a), (_, b) in zip(whole.model.state_dict().items(), child.model.state_dict().items()):
        assert torch.equal(a, b), n


def test_graft_copies_the_overlapping_slice_of_a_reshaped_layer():
    from types import SimpleNamespace

    from ctrnas.pipeline.fitness.inherit import graft

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    before = model[0].weight.detach().clone()
    root = {"0.weight": torch.arange(10.0).reshape(2, 5), "0.bias": torch.tensor([7.0, 8.0]),
            "9.weight": torch.ones(1)}
    state = {"weights": root, "sums": {"0.weight": torch.full((2, 5), 3.0)},
             "opt_steps": {"0.weight": torch.tensor(5.0)}, "step": 6, "rows_seen": 60}
    trainer = SimpleNamespace(model=model, optimizers=[opt], step=0, rows_seen=0)
    counts = graft(trainer, state)
    w = model[0].weight.detach()
    assert torch.equal(w[:2, :3], root["0.weight"][:, :3]) and torch.equal(w[2:], before[2:])
    assert model[0].bias.detach()[:2].tolist() == [7.0, 8.0]
    s = opt.state[model[0].weight]
    assert torch.equal(s["sum"][:2, :3], torch.full((2, 3), 3.0)) and torch.equal(s["sum"][2:], torch.zeros(2, 3))
    assert float(s["step"]) == 5.0 and trainer.step == 6 and trainer.rows_seen == 60
    assert counts == {"copied": 2, "fresh": 2}  # the second layer's weight and bias are not in the root


def test_a_branch_child_gets_each_block_of_the_root_by_its_number():
    """A branch (space.branch_moves) makes a used block of an unused one, so the last block moves from position 3
    to 4 among the exported model's live blocks: its weights still come from the root's last block, the new
    block's are its own draw, and a child without the branch is the root again."""
    import dataclasses as dc
    from types import SimpleNamespace

    from ctrnas.pipeline.fitness.inherit import graft, graft_state
    from ctrnas.space import get_space
    from ctrnas.space.baselines import baseline_arch
    from ctrnas.space.config import PRESETS
    from ctrnas.supernet import Supernet, export
    from ctrnas.supernet.testing import make_schema

    cfg = dc.replace(PRESETS["ctrnas-small"], num_blocks=7, dense_dims=(16, 64, 128, 256), sparse_tokens=(16,),
                     dense_sparse_merge=(False,), branch_moves=True)
    space, schema = get_space(cfg), make_schema()
    root_arch = space.validate(baseline_arch("dlrm-like"))  # live blocks 1, 2, 3, 7
    child_arch = next(a for a in space.local_neighbours(root_arch) if a.blocks[-1].dense_idx == (3, 4)
                      and a.blocks[3].dense_op == "fc")
    torch.manual_seed(0)
    net = Supernet(schema, space)
    root = export(net, root_arch, init="fresh", seed=1)

    def trainer(model):
        return SimpleNamespace(model=model, optimizers=[], step=0, rows_seen=0)

    state = graft_state(SimpleNamespace(model=root, optimizers=[], step=3, rows_seen=30))
    assert state["blocks"] == [1, 2, 3, 7]
    child = export(net, child_arch, init="fresh", seed=2)
    counts = graft(trainer(child), state)
    rw, cw = root.state_dict(), child.state_dict()
    top = [n for n in cw if n.startswith("net.blocks.4.")]  # block 7, position 3 in the root
    for n in top:  # its input is 16 wider (the branch's output comes last): the root's columns, then its own
        r = rw[n.replace("net.blocks.4.", "net.blocks.3.")]
        assert torch.equal(cw[n][tuple(slice(0, k) for k in r.shape)], r), n
    assert cw["net.blocks.4.dense_op.lin.weight"].shape[1] == rw["net.blocks.3.dense_op.lin.weight"].shape[1] + 16
    new = [n for n in cw if n.startswith("net.blocks.3.")]  # the branch: block 4, not in the root
    assert top and new and counts["fresh"] == len(new)
    again = export(net, root_arch, init="fresh", seed=3)
    graft(trainer(again), state)
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), rw.values()))


@pytest.mark.parametrize("rungs, field", [
    ("[{fitness: inherit, fraction: 0.25, extra: 0.25}, {fitness: prefix, fraction: 0.75}]", "fitness"),
    ("[{fitness: inherit, fraction: 0.25}]", "fitness"),
    ("[{fitness: prefix, fraction: 0.25, extra: 0.25}]", "extra"),
    ("[{fitness: inherit, fraction: 0.75, extra: 0.5}]", "budget"),
])
def test_an_inherit_rung_is_checked(tests_data, tests_recipe_path, data_dir, rungs, field):
    from ctrnas.pipeline.fitness.rungs import ladder_rungs

    recipe = api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "search.strategy=multifidelity",
                             f"search.multifidelity.rungs={rungs}", "final.train={epochs: 2}")
    with pytest.raises(RecipeError, match=f"rungs\\[[01]\\].{field}"):
        ladder_rungs(recipe, tests_data)


def test_the_plot_axis_says_what_an_inherit_score_is():
    from ctrnas.pipeline.report import fitness_label

    assert fitness_label("inherit", budget=1250) == \
        "val log loss after its line's first 1,250 steps and its own extra steps (lower is better)"
