"""The origin line names where the final stage's winner came from: a seed, a child of evolution, a random
draw or a baseline, with its margins over the best baseline and the best seed."""

import dataclasses
import json
import math

import numpy as np
import pytest

from ctrnas.pipeline.origin import judge_seeds, origin
from ctrnas.pipeline.results import FinalResult, TrainedModel
from ctrnas.search.history import History, HistoryRecord
from ctrnas.space import get_space
from ctrnas.space.baselines import baseline_arch


def model(label, arch, val, test, index=None):
    return TrainedModel(label, arch, {"logloss": val}, {"logloss": test}, 1.0, 1.0, 1.0, history_index=index)


@pytest.fixture
def setting():
    seed = baseline_arch("dcnv2-like")
    space = get_space(dataclasses.replace(get_space("ctrnas-small").config, num_blocks=7))
    rng = np.random.default_rng(0)
    child = space.mutate_local(seed, rng)
    grandchild = space.mutate_local(child, rng)
    while grandchild.key() == seed.key():  # a step back to the seed
        grandchild = space.mutate_local(child, rng)
    drawn = space.sample(rng)
    assert len({seed.key(), child.key(), grandchild.key(), drawn.key()}) == 4
    recs = [HistoryRecord(index=0, generation=0, key=seed.key(), arch={}, value=0.5),
            HistoryRecord(index=1, generation=0, key=drawn.key(), arch={}, value=0.6),
            HistoryRecord(index=2, generation=1, key=child.key(), arch={}, value=0.55, parent_key=seed.key()),
            HistoryRecord(index=3, generation=2, key=grandchild.key(), arch={}, value=0.52,
                          parent_key=child.key())]
    return History(recs), {"seed": seed, "child": child, "grandchild": grandchild, "drawn": drawn}


def seed_line(seed, copy, child) -> History:
    """A seed, its copy at other widths (also in the first population) and the copy's child."""
    from ctrnas.search.space_protocol import default_to_json

    return History([
        HistoryRecord(index=0, generation=0, key=seed.key(), arch=default_to_json(seed), value=0.50),
        HistoryRecord(index=1, generation=0, key=copy.key(), arch=default_to_json(copy), value=0.52),
        HistoryRecord(index=2, generation=1, key=child.key(), arch=default_to_json(child), value=0.51,
                      parent_key=copy.key())])


def final(cands, bases, best):
    return FinalResult(tuple(cands), best, tuple(bases), None, 0.0)


def test_a_child_of_evolution_names_its_parent_generation_and_seed(setting):
    history, a = setting
    win = model("rank 0", a["grandchild"], 0.440, 0.441, index=3)
    seed = model("rank 1", a["seed"], 0.445, 0.447, index=0)
    dlrm, lr = model("dlrm", None, 0.446, 0.446), model("lr", None, 0.47, 0.47)
    o = origin(final([win, seed], [lr, dlrm], win), history)
    assert o["kind"] == "child" and o["generation"] == 2
    assert o["parent"] == f"`{a['child'].key()}`" and o["descends_from"] == "dcnv2-like"
    assert o["vs_best_baseline"]["label"] == "dlrm"
    assert o["vs_best_baseline"]["val"] == pytest.approx(-0.006) and o["vs_best_baseline"]["test"] == pytest.approx(-0.005)
    assert o["vs_best_seed"]["label"] == "rank 1" and o["vs_best_seed"]["test"] == pytest.approx(-0.006)
    assert o["line"].startswith("a child of evolution was chosen: generation 2, parent")
    assert "descending from dcnv2-like" in o["line"] and "verdict not measured" in o["line"]


def test_a_seed_is_named_as_a_copy_of_its_baseline(setting):
    history, a = setting
    win = model("rank 0", a["seed"], 0.440, 0.441, index=0)
    verdict = {**judge_seeds([0.441, 0.443], [0.440, 0.444]), "rival": "dcnv2", "export": "rank 0"}
    o = origin(final([win], [model("dcnv2", None, 0.441, 0.440)], win), history, verdict=verdict)
    assert (o["kind"], o["name"], o["copy_of"]) == ("shipped", "dcnv2-like", "dcnv2")
    assert "not a search find" in o["line"] and "copy of the dcnv2 baseline" in o["line"]
    # margin 0.442 - 0.442 = 0, pair sd hypot(0.001414, 0.002828) = 0.00316: level, so never "won"
    assert o["vs_best_seed"] is None and o["line"].startswith("the shipped arch dcnv2-like was chosen")
    assert "verdict over 2 training seeds: level within noise with dcnv2 (test +0.00000, +0.0 pair sd of 0.00316)" \
        in o["line"]


def test_won_only_beyond_two_pair_sd(setting):
    history, a = setting
    win = model("rank 0", a["grandchild"], 0.440, 0.430, index=3)
    base = model("dlrm", None, 0.446, 0.446)
    better = {**judge_seeds([0.430, 0.431], [0.446, 0.447]), "rival": "dlrm"}  # -0.016, pair sd 0.001
    o = origin(final([win], [base], win), history, verdict=better)
    assert o["line"].startswith("a child of evolution won") and "better than dlrm" in o["line"]
    worse = {**judge_seeds([0.450, 0.451], [0.446, 0.447]), "rival": "dlrm"}
    o = origin(final([win], [base], win), history, verdict=worse)
    assert o["line"].startswith("a child of evolution was chosen") and "worse than dlrm" in o["line"]


def test_deepfm_terms_like_is_named_a_copy_of_deepfm(setting):
    history, _ = setting
    space = get_space(dataclasses.replace(get_space("ctrnas-small-fm").config, num_blocks=7))
    arch = space.validate(baseline_arch("deepfm-terms-like"))
    win = model("rank 0", arch, 0.440, 0.441)
    o = origin(final([win], [model("deepfm", None, 0.441, 0.440)], win), history)
    assert (o["kind"], o["name"], o["copy_of"]) == ("shipped", "deepfm-terms-like", "deepfm")
    assert "copy of the deepfm baseline" in o["line"]


def test_a_baseline_winner_and_a_random_draw(setting):
    history, a = setting
    drawn = model("rank 0", a["drawn"], 0.45, 0.45, index=1)
    base = model("dlrm", None, 0.44, 0.44)
    o = origin(final([drawn], [base], base), history)
    assert o["kind"] == "baseline" and o["line"].startswith("the dlrm baseline was chosen on validation")
    assert o["vs_best_baseline"] is None
    o = origin(final([drawn], [base], drawn), history)
    assert o["kind"] == "random" and o["generation"] == 0
    assert math.isclose(o["vs_best_baseline"]["val"], 0.01)
    assert "vs best baseline dlrm: val +0.01000" in o["line"]


def test_a_winning_baseline_is_compared_with_the_next_best_one(setting):
    history, a = setting
    drawn = model("rank 0", a["drawn"], 0.45, 0.45, index=1)
    dlrm, dcn = model("dlrm", None, 0.44, 0.43), model("dcnv2", None, 0.442, 0.431)
    o = origin(final([drawn], [dlrm, dcn], dlrm), history)
    assert o["vs_best_baseline"]["label"] == "dcnv2"
    assert "vs next best baseline dcnv2: val -0.00200, test -0.00100" in o["line"]
    assert "best baseline" not in o["line"].replace("next best baseline", "")


def test_lineage_counts_children_per_seed_and_against_their_parent(setting):
    from ctrnas.pipeline.origin import lineage

    history, a = setting
    g = lineage(history, maximize=False)  # log losses: lower is better
    # the child (0.55) and the grandchild (0.52) both descend from dcnv2-like; against their parents
    # (0.50 and 0.55) the child is worse and the grandchild better
    assert g["children"] == 2 and g["descend_from"] == {"dcnv2-like": 2}
    assert (g["better_than_parent"], g["compared"]) == (1, 2)
    assert g["median_abs_change"] == pytest.approx((0.05 + 0.03) / 2)


def test_a_seed_at_narrower_tables_is_named_by_its_seed_not_a_random_draw():
    from ctrnas.pipeline.origin import lineage

    seed = baseline_arch("dcnv2-like")
    narrow = dataclasses.replace(seed, table_dims=(("A", 4), ("B", 4), ("C", 0)))
    child = dataclasses.replace(narrow, table_dims=(*narrow.table_dims, ("D", 8)))  # one more table narrowed
    history = seed_line(seed, narrow, child)
    name = "dcnv2-like (1 dropped, 2 at 4)"
    win = model("rank 0", narrow, 0.44, 0.44, index=1)
    o = origin(final([win], [], win), history)
    assert (o["kind"], o["name"], o["copy_of"]) == ("shipped", name, None)
    assert o["line"].startswith(f"the shipped arch {name} was chosen (a seed of the search: not a search find)")
    win = model("rank 0", child, 0.44, 0.44, index=2)
    o = origin(final([win], [], win), history)
    assert (o["kind"], o["parent"], o["descends_from"]) == ("child", name, name)
    assert lineage(history, maximize=False)["descend_from"] == {name: 1}


def test_an_arch_file_the_recipe_named_as_a_seed_is_a_given_seed_not_a_find(tmp_path):
    """`search.seeds` may name an arch file (an earlier run's best_arch.json): it, its copy at narrower tables
    and its children are named by the path, and a win by it or its copy is not a find of this run."""
    from ctrnas.pipeline.origin import lineage

    space = get_space(dataclasses.replace(get_space("ctrnas-small").config, num_blocks=7))
    found = space.mutate_local(baseline_arch("dlrm-like"), np.random.default_rng(1))
    path = tmp_path / "best_arch.json"
    path.write_text(json.dumps(found.to_json()))
    given = ("dlrm-like", str(path))
    narrow = dataclasses.replace(found, table_dims=(("A", 4), ("B", 8)))
    child = dataclasses.replace(narrow, table_dims=(("A", 4), ("B", 4)))
    history = seed_line(found, narrow, child)
    win = model("rank 0", found, 0.44, 0.44, index=0)
    o = origin(final([win], [], win), history, given=given)
    assert (o["kind"], o["name"]) == ("given", str(path))
    assert o["line"].startswith(f"the given arch {path} was chosen (a seed the recipe named in search.seeds")
    copy = f"{path} (1 at 4, 1 at 8)"
    win = model("rank 0", narrow, 0.44, 0.44, index=1)
    assert (origin(final([win], [], win), history, given=given)["name"]) == copy
    win = model("rank 0", child, 0.44, 0.44, index=2)
    o = origin(final([win], [], win), history, given=given)
    assert (o["kind"], o["parent"], o["descends_from"]) == ("child", copy, copy)
    assert lineage(history, maximize=False, given=given)["descend_from"] == {copy: 1}
    # without the recipe's seeds the same file is a random draw: the names come from the recipe
    win = model("rank 0", found, 0.44, 0.44, index=0)
    assert origin(final([win], [], win), history)["kind"] == "random"


def test_a_seed_at_another_common_width_is_named_by_its_seed():
    """The front search starts each seed at every narrower common width too (`emb_dim` 8, no table of its own):
    its children descend from "dcnv2-like (width 8)", not from a random draw."""
    from ctrnas.pipeline.origin import lineage

    seed = baseline_arch("dcnv2-like")
    at8 = dataclasses.replace(seed, emb_dim=8)
    child = dataclasses.replace(at8, table_dims=(("A", 4),))
    history = seed_line(seed, at8, child)
    win = model("rank 0", child, 0.44, 0.44, index=2)
    o = origin(final([win], [], win), history)
    assert (o["kind"], o["parent"], o["descends_from"]) == ("child", "dcnv2-like (width 8)", "dcnv2-like (width 8)")
    assert lineage(history, maximize=False)["descend_from"] == {"dcnv2-like (width 8)": 1}
    win = model("rank 0", at8, 0.44, 0.44, index=1)  # the copy itself: the seed, at width 8
    o = origin(final([win], [], win), history)
    assert (o["kind"], o["name"], o["width"]) == ("shipped", "dcnv2-like", 8)


def test_a_winner_at_another_common_width_is_named_by_its_tables_and_its_own_width():
    """The first population holds a seed's copy at width 8 with a table at 4; the winner has the same tables at
    width 32: named "dcnv2-like (1 at 4)" at width 32, not by the copy's width 8."""
    seed = baseline_arch("dcnv2-like")
    copy = dataclasses.replace(seed, emb_dim=8, table_dims=(("A", 4),))
    wide = dataclasses.replace(copy, emb_dim=32)
    history = seed_line(seed, copy, wide)
    win = model("rank 0", wide, 0.44, 0.44, index=2)
    o = origin(final([win], [], win), history)
    assert (o["kind"], o["name"], o["width"]) == ("shipped", "dcnv2-like (1 at 4)", 32)
    assert o["line"].startswith("the shipped arch dcnv2-like (1 at 4) at width 32 was chosen")
