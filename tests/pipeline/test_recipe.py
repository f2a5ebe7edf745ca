"""Recipes load strictly: unknown keys and wrong types name the file and key; overrides and extends work."""

from pathlib import Path

import pytest
import yaml

from ctrnas.errors import RecipeError
from ctrnas.recipe import dump_recipe, load_recipe, override, recipe_from_dict, recipe_to_dict

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
MINIMAL = {"name": "t", "data": {"path": "somewhere"}}


def write(tmp_path, name, data) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


def test_unknown_key_error_names_file_and_dotted_key(tmp_path):
    p = write(tmp_path, "r.yaml", {**MINIMAL, "warmup": {"fractoin": 0.1}})
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert e.value.source == str(p) and e.value.key == "warmup.fractoin"
    assert "unknown key" in str(e.value) and "fraction" in str(e.value)  # lists the known keys


def test_wrong_type_error_names_key_and_expected_type(tmp_path):
    p = write(tmp_path, "r.yaml", {**MINIMAL, "train": {"lr": "fast"}})
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert e.value.key == "train.lr" and "expected float" in e.value.reason and "'fast'" in e.value.reason


def test_nested_search_section_is_checked_too(tmp_path):
    p = write(tmp_path, "r.yaml", {**MINIMAL, "search": {"evolution": {"generations": 2.5}}})
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert e.value.key == "search.evolution.generations"


def test_missing_data_source_is_an_error():
    with pytest.raises(RecipeError):
        recipe_from_dict({"name": "t", "data": {}})


def test_overrides_are_parsed_as_yaml_and_type_checked(tmp_path):
    p = write(tmp_path, "r.yaml", MINIMAL)
    r = load_recipe(p, ["warmup.fraction=0.1", "final.baselines=[lr, fm]", "search.workers=2", "proxy.name=zico"])
    assert r.warmup.fraction == 0.1 and isinstance(r.warmup.fraction, float)
    assert r.final.baselines == ("lr", "fm") and r.search.workers == 2 and r.proxy.name == "zico"


def test_bad_override_names_the_override(tmp_path):
    p = write(tmp_path, "r.yaml", MINIMAL)
    with pytest.raises(RecipeError) as e:
        load_recipe(p, ["train.lr=abc"])
    assert "override 'train.lr=abc'" in str(e.value)
    with pytest.raises(RecipeError):
        load_recipe(p, ["no_equals_sign"])
    with pytest.raises(RecipeError) as e:
        load_recipe(p, ["warmup.nope=1"])
    assert e.value.key == "warmup.nope"


def test_override_of_a_recipe_object_keeps_everything_else():
    r = recipe_from_dict({**MINIMAL, "seed": 7, "train": {"batch_size": 128}})
    r2 = override(r, "warmup.fraction=1.0")
    assert r2.warmup.fraction == 1.0 and r2.seed == 7 and r2.train.batch_size == 128
    assert r.warmup.fraction == 0.01  # the original is unchanged (frozen)


def test_extends_deep_merges_mappings_and_replaces_other_values(tmp_path):
    write(tmp_path, "base.yaml", {**MINIMAL, "train": {"lr": 0.2, "batch_size": 64}, "final": {"baselines": ["lr"]}})
    child = write(tmp_path, "child.yaml", {"extends": "base.yaml", "name": "c", "train": {"lr": 0.05},
                                           "final": {"baselines": ["fm"]}})
    r = load_recipe(child)
    assert r.name == "c" and r.train.lr == 0.05 and r.train.batch_size == 64 and r.final.baselines == ("fm",)


def test_circular_extends_is_reported(tmp_path):
    write(tmp_path, "a.yaml", {"extends": "b.yaml", **MINIMAL})
    write(tmp_path, "b.yaml", {"extends": "a.yaml"})
    with pytest.raises(RecipeError) as e:
        load_recipe(tmp_path / "a.yaml")
    assert "circular" in str(e.value)


def test_space_base_preset_is_expanded_and_a_changed_preset_is_renamed():
    r = recipe_from_dict({**MINIMAL, "space": {"base": "nasrec-full", "num_blocks": 3}})
    assert r.space.num_blocks == 3 and r.space.sparse_ops == ("efc", "attention")
    assert r.space.name == "nasrec-full-custom"
    assert recipe_from_dict({**MINIMAL, "space": "nasrec-full"}).space.name == "nasrec-full"
    with pytest.raises(RecipeError):
        recipe_from_dict({**MINIMAL, "space": {"base": "nope"}})


def test_resolved_recipe_dump_loads_back_equal(tmp_path):
    r = recipe_from_dict({**MINIMAL, "space": {"base": "nasrec-small", "num_blocks": 2}}, overrides=["seed=3"])
    p = tmp_path / "resolved.yaml"
    p.write_text(dump_recipe(r))
    again = load_recipe(p)
    assert again == r  # `source` keeps naming where the recipe first came from


def test_a_runs_recipe_yaml_passes_train_overrides_to_the_final_stage(tmp_path):
    """recipe.yaml writes only what final.train changes, so `--set train.X` on it reaches the final stage as on
    the recipe it came from, while a value the final stage sets itself stays."""
    r = recipe_from_dict({**MINIMAL, "train": {"lr": 0.1, "epochs": 1},
                          "final": {"train": {"epochs": 2, "batch_size": 256}}})
    p = tmp_path / "recipe.yaml"
    p.write_text(dump_recipe(r))
    assert yaml.safe_load(p.read_text())["final"]["train"] == {"epochs": 2, "batch_size": 256}
    assert load_recipe(p) == r
    again = load_recipe(p, overrides=["train.lr=0.05", "train.epochs=3"])
    assert again.train.lr == again.final_train.lr == 0.05
    assert again.train.epochs == 3 and again.final_train.epochs == 2


def test_a_final_train_value_equal_to_trains_stays_pinned():
    """A final.train key the recipe gives keeps its value under an override of train's, even where the two
    were equal: on the recipe's data, on the Recipe object (`override`) and on its written recipe.yaml."""
    data = {**MINIMAL, "train": {"lr": 0.1}, "final": {"train": {"lr": 0.1, "epochs": 2}}}
    r = recipe_from_dict(data)
    assert recipe_to_dict(r)["final"]["train"] == {"lr": 0.1, "epochs": 2}
    for moved in (recipe_from_dict(data, overrides=["train.lr=0.05"]), override(r, "train.lr=0.05"),
                  recipe_from_dict(yaml.safe_load(dump_recipe(r)), overrides=["train.lr=0.05"])):
        assert moved.train.lr == 0.05 and moved.final_train.lr == 0.1


def test_fitness_kind_follows_the_warmup_fraction_unless_set():
    assert recipe_from_dict({**MINIMAL, "warmup": {"fraction": 0.0}}).fitness_kind == "proxy"
    assert recipe_from_dict({**MINIMAL, "warmup": {"fraction": 0.01}}).fitness_kind == "proxy"
    assert recipe_from_dict({**MINIMAL, "warmup": {"fraction": 1.0}}).fitness_kind == "oneshot"
    assert recipe_from_dict({**MINIMAL, "warmup": {"fraction": 1.0}, "fitness": "proxy"}).fitness_kind == "proxy"


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_recipe_loads(path):
    r = load_recipe(path)
    assert r.name and r.output
    if "oneshot" in path.name:
        assert r.warmup.fraction == 1.0 and r.fitness_kind == "oneshot"
    if "zeroshot" in path.name:
        assert r.warmup.fraction == 0.0 and r.fitness_kind == "proxy"


def test_final_train_inherits_the_train_section_and_overrides_only_its_keys():
    r = recipe_from_dict({**MINIMAL, "train": {"batch_size": 128, "lr": 0.2, "threads": 1},
                          "final": {"train": {"epochs": 2, "restore_best": True}}})
    f = r.final_train
    assert (f.epochs, f.restore_best, f.batch_size, f.lr, f.threads) == (2, True, 128, 0.2, 1)
    assert r.train.epochs == 1 and not r.train.restore_best
    # no final.train: the train section itself; a resolved recipe round-trips unchanged
    assert recipe_from_dict({**MINIMAL, "train": {"lr": 0.3}}).final_train.lr == 0.3
    assert override(r, "seed=3").final_train == f


@pytest.mark.parametrize("override_text, key, allowed", [
    ("search.evolution.population_size=0", "search.evolution.population_size", "expected >= 1, got 0"),
    ("search.constraints.max_tries=0", "search.constraints.max_tries", "expected >= 1, got 0"),
    ("final.train.lr=-1", "final.train.lr", "must be > 0"),            # inside an optional section
    ("data.prepare.min_count=0", "data.prepare.min_count", "must be >= 1, got 0"),
    ("warmup.fraction=2", "warmup.fraction", "must be in [0, 1], got 2.0"),
])
def test_range_errors_name_the_file_the_dotted_key_and_the_allowed_range(tmp_path, override_text, key, allowed):
    p = write(tmp_path, "r.yaml", MINIMAL)
    with pytest.raises(RecipeError) as e:
        load_recipe(p, [override_text])
    assert e.value.key == key and allowed in e.value.reason
    assert str(e.value).startswith(f"{p}, override '{override_text}': key '{key}'")
    q = write(tmp_path, "q.yaml", {**MINIMAL, "search": {"evolution": {"population_size": 0}}})
    with pytest.raises(RecipeError) as e:
        load_recipe(q)
    assert e.value.source == str(q) and e.value.key == "search.evolution.population_size"


def test_search_direction_comes_from_the_fitness_and_a_contrary_maximize_is_rejected(tmp_path):
    proxy = load_recipe(write(tmp_path, "p.yaml", {**MINIMAL, "search": {"evolution": {"maximize": True}}}))
    assert proxy.search.evolution.maximize and proxy.search.random.maximize
    oneshot = load_recipe(write(tmp_path, "o.yaml", {**MINIMAL, "warmup": {"fraction": 1.0}}))
    assert oneshot.fitness_kind == "oneshot"
    assert not oneshot.search.evolution.maximize and not oneshot.search.random.maximize
    assert load_recipe(write(tmp_path, "o2.yaml", yaml.safe_load(dump_recipe(oneshot)))) == oneshot
    with pytest.raises(RecipeError) as e:
        load_recipe(write(tmp_path, "bad.yaml", {**MINIMAL, "search": {"evolution": {"maximize": False}}}))
    assert e.value.key == "search.evolution.maximize" and "proxy fitness is maximized" in e.value.reason
    with pytest.raises(RecipeError) as e:
        override(oneshot, "search.random.maximize=true")
    assert e.value.key == "search.random.maximize" and "minimized" in e.value.reason


def test_search_seeds_name_shipped_archs(tmp_path):
    recipe = load_recipe(write(tmp_path, "r.yaml", {**MINIMAL, "search": {"seeds": ["deepfm-like", "dlrm-like"]}}))
    assert recipe.seed_names == ("deepfm-like", "dlrm-like")
    assert load_recipe(write(tmp_path, "d.yaml", MINIMAL)).seed_names == ("dlrm-like", "dcnv2-like")
    p = write(tmp_path, "bad.yaml", {**MINIMAL, "search": {"seeds": ["dlrm-like", "deepfm"]}})
    with pytest.raises(RecipeError, match=r"search.seeds\[1\].*'deepfm' is neither a shipped arch .*deepfm-like"):
        load_recipe(p)


def test_search_seeds_take_arch_files_that_fit_the_space(tmp_path):
    """An earlier run's best_arch.json seeds a search (e.g. a width search from a structure search's find);
    a file that is not an arch is refused when the recipe loads, one that does not fit the space at the search."""
    import dataclasses
    import json

    from ctrnas.errors import CtrnasError
    from ctrnas.space import get_space
    from ctrnas.space.baselines import baseline_arch, initial_population

    space = get_space(dataclasses.replace(get_space("ctrnas-small").config, num_blocks=7))
    found = space.mutate_local(baseline_arch("dlrm-like"), __import__("numpy").random.default_rng(3))
    arch_file = tmp_path / "best_arch.json"
    arch_file.write_text(json.dumps(found.to_json()))
    recipe = load_recipe(write(tmp_path, "r.yaml", {**MINIMAL, "search": {"seeds": ["dlrm-like", str(arch_file)]}}))
    assert initial_population(space, recipe.seed_names) == [baseline_arch("dlrm-like"), found]
    junk = tmp_path / "junk.json"
    junk.write_text('{"format": "ctrnas-arch/1", "blocks": "no"}')
    with pytest.raises(RecipeError, match=r"search.seeds\[0\].*junk.json"):
        load_recipe(write(tmp_path, "j.yaml", {**MINIMAL, "search": {"seeds": [str(junk)]}}))
    # the paper's space has no DLRM interaction: a shipped arch is left out, a named file is an error
    nasrec = get_space("nasrec-small")
    assert initial_population(nasrec, ("dlrm-like",)) == []
    with pytest.raises(CtrnasError, match=r"search seed .*best_arch.json: does not fit the search space"):
        initial_population(nasrec, (str(arch_file),))
