"""Search spaces: NASRec sampling coverage and fan-in law, single-choice mutation, validation, configs."""

import dataclasses
from collections import Counter

import numpy as np
import pytest
import yaml
from scipy import stats

from ctrnas.errors import ArchValidationError, RecipeError
from ctrnas.space import MACRO_FIELDS, MICRO_FIELDS, PRESETS, Arch, SpaceConfig, get_space

SPACES = ["nasrec-full", "nasrec-small"]


@pytest.mark.parametrize("name", SPACES)
def test_sampler_covers_every_op_and_width(name):
    space = get_space(name)
    cfg = space.config
    rng = np.random.default_rng(1)
    seen = {k: Counter() for k in MICRO_FIELDS}
    archs = [space.sample(rng) for _ in range(2000)]
    for a in archs:
        space.validate(a)
        for b in a.blocks:
            for k in MICRO_FIELDS:
                seen[k][getattr(b, k)] += 1
    assert set(seen["dense_op"]) == set(cfg.dense_ops)
    assert set(seen["sparse_op"]) == set(cfg.sparse_ops)
    assert set(seen["dense_dim"]) == set(cfg.dense_dims)
    assert set(seen["sparse_tokens"]) == set(cfg.sparse_tokens)
    assert set(seen["dense_sparse_merge"]) == {False, True} and set(seen["fm"]) == {False, True}
    # uniform over the options: a chi-square test at 1e-4 should not reject
    for k in ("dense_op", "dense_dim", "sparse_tokens"):
        counts = list(seen[k].values())
        assert stats.chisquare(counts).pvalue > 1e-4, (k, seen[k])


def test_presets_match_nasrec():
    full, small = PRESETS["nasrec-full"], PRESETS["nasrec-small"]
    assert set(full.dense_ops) == {"fc", "sum", "gating", "dot"} and set(full.sparse_ops) == {"efc", "attention"}
    assert set(small.dense_ops) == {"fc", "dot"} and small.sparse_ops == ("efc",)
    for c in (full, small):
        assert c.num_blocks == 7 and c.emb_dim == 16 and c.max_inputs == 4
        assert c.dense_dims == (16, 32, 64, 128, 256, 512, 768, 1024) and c.sparse_tokens == (16, 32, 48, 64)


def test_fan_in_is_one_plus_binomial():
    space = get_space("nasrec-full")
    rng = np.random.default_rng(2)
    n = 3000
    archs = [space.sample(rng) for _ in range(n)]
    for i, trials in [(1, 0), (2, 1), (4, 3), (7, 3)]:  # block i: 1 + Binomial(min(i-1, 3), 0.5)
        counts = Counter(len(a.blocks[i - 1].dense_idx) for a in archs)
        expected = [n * stats.binom.pmf(k - 1, trials, 0.5) for k in range(1, trials + 2)]
        observed = [counts.get(k, 0) for k in range(1, trials + 2)]
        assert sum(observed) == n
        if trials:
            assert stats.chisquare(observed, expected).pvalue > 1e-4, (i, observed)
        # every source of block i appears
        assert set().union(*(a.blocks[i - 1].sparse_idx for a in archs)) == set(range(i))


def test_sampling_is_seeded():
    space = get_space("nasrec-full")
    a = [space.sample(np.random.default_rng(5)) for _ in range(2)]
    assert a[0] == a[1]
    assert space.sample(np.random.default_rng(6)) != a[0]


def changed_fields(a: Arch, b: Arch):
    return [(i, f.name) for i, (x, y) in enumerate(zip(a.blocks, b.blocks), 1) for f in dataclasses.fields(x)
            if getattr(x, f.name) != getattr(y, f.name)]


@pytest.mark.parametrize("name", SPACES)
def test_mutation_changes_exactly_one_choice(name):
    space = get_space(name)
    rng = np.random.default_rng(3)
    kinds = Counter()
    a = space.sample(rng)
    for _ in range(1500):
        b = space.mutate(a, rng)
        diff = changed_fields(a, b)
        assert len(diff) == 1, diff
        space.validate(b)
        kinds[diff[0][1]] += 1
        a = b
    expected = set(MACRO_FIELDS + MICRO_FIELDS)
    if name == "nasrec-small":
        expected.discard("sparse_op")  # one sparse op: nothing to mutate
    assert set(kinds) == expected
    assert sum(kinds[f] for f in MACRO_FIELDS) > 500 and sum(kinds[f] for f in MICRO_FIELDS) > 500


def test_validate_names_block_and_field():
    space = get_space("nasrec-small")
    a = space.sample(np.random.default_rng(0))
    cases = [
        (3, "dense_op", "gating"), (2, "sparse_op", "attention"), (5, "dense_dim", 100),
        (1, "sparse_tokens", 8), (4, "dense_idx", (0, 4)), (6, "sparse_idx", (0, 1, 2, 3, 4)),
        (2, "dense_left_idx", 2), (3, "sparse_idx", (1, 0)),
    ]
    for blk, field, value in cases:
        blocks = list(a.blocks)
        blocks[blk - 1] = dataclasses.replace(blocks[blk - 1], **{field: value})
        with pytest.raises(ArchValidationError) as e:
            space.validate(Arch(tuple(blocks)))
        assert (e.value.block, e.value.field) == (blk, field)
    with pytest.raises(ArchValidationError) as e:
        space.validate(Arch(a.blocks[:3]))
    assert e.value.field == "blocks"


def test_custom_space_from_recipe_mapping():
    space = get_space({"base": "nasrec-small", "num_blocks": 3, "dense_dims": [8, 24], "fm": [False]})
    c = space.config
    assert (c.num_blocks, c.dense_dims, c.fm, c.dense_ops) == (3, (8, 24), (False,), ("fc", "dot"))
    assert c.name == "nasrec-small-custom"
    rng = np.random.default_rng(0)
    archs = [space.sample(rng) for _ in range(300)]
    assert {b.dense_dim for a in archs for b in a.blocks} == {8, 24}
    assert not any(b.fm for a in archs for b in a.blocks)
    assert get_space(SpaceConfig(num_blocks=2, fan_in="single")).sample(rng).blocks[1].dense_idx in ((0,), (1,))


def test_layernorm_switch_from_recipe_mapping():
    # NASRec --use_layernorm: on in both presets; a recipe turns it off with `space: {base: ..., layernorm: false}`
    from ctrnas.recipe import dump_recipe, recipe_from_dict

    assert get_space("nasrec-full").config.layernorm and get_space("nasrec-small").config.layernorm
    c = get_space({"base": "nasrec-small", "layernorm": False}).config
    assert c.layernorm is False and c.name == "nasrec-small-custom"
    assert dataclasses.replace(c, layernorm=True, name="nasrec-small") == get_space("nasrec-small").config
    # sampling does not depend on it
    rng1, rng2 = np.random.default_rng(3), np.random.default_rng(3)
    assert get_space(c).sample(rng1) == get_space("nasrec-small").sample(rng2)
    recipe = recipe_from_dict({"name": "t", "data": {"path": "x"},
                               "space": {"base": "nasrec-small", "layernorm": False}})
    assert recipe.space == c and recipe_from_dict(yaml.safe_load(dump_recipe(recipe))).space == c


@pytest.mark.parametrize("spec, key", [
    ({"dense_ops": ["fc", "conv"]}, "dense_ops"), ({"dims": [1]}, "dims"), ({"num_blocks": "7"}, "num_blocks"),
    ({"attention_heads": 3}, "attention_heads"), ({"base": "nasrec-huge"}, "base"),
    ({"layernorm": "no"}, "layernorm"),
])
def test_bad_space_config_names_key(spec, key):
    with pytest.raises(RecipeError) as e:
        get_space(spec)
    assert e.value.key == key
