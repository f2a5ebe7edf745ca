"""edit_distance counts `mutate` steps: one step is 0 or 1 edit (0 exactly when the network is the same), k steps
at most k, a hand-made change of live choices is its count, dead blocks cost nothing."""

import dataclasses

import numpy as np
import pytest

from ctrnas.space import edit_distance, get_space
from ctrnas.space.baselines import baseline_arch


@pytest.mark.parametrize("space", ["ctrnas-small", "ctrnas-full", "ctrnas-small-cin", "nasrec-full"])
def test_one_mutation_is_one_edit_or_none_and_none_means_the_same_network(space):
    sp = get_space(space)
    rng = np.random.default_rng(0)
    for _ in range(400):
        a = sp.sample(rng)
        b = sp.mutate(a, rng)
        d = edit_distance(a, b)
        assert d in (0, 1) and (d == 0) == (a.key() == b.key())
        path = [a]
        for _ in range(5):
            path.append(sp.mutate(path[-1], rng))
        assert edit_distance(a, path[-1]) <= 5


def _set(arch, block, **changes):
    blocks = list(arch.blocks)
    blocks[block - 1] = dataclasses.replace(blocks[block - 1], **changes)
    return dataclasses.replace(arch, blocks=tuple(blocks))


def test_hand_counted_edits_of_dlrm_like():
    dlrm = baseline_arch("dlrm-like")  # live blocks 1, 2, 3, 7 (blocks 4-6 dead)
    assert edit_distance(dlrm, dlrm) == 0
    dead = _set(dlrm, 5, dense_op="dot", dense_dim=400, sparse_tokens=32)
    assert edit_distance(dlrm, dead) == 0 and edit_distance(dead, dlrm) == 0
    three = _set(_set(dlrm, 1, dense_dim=128), 3, dense_op="dot", dense_dim=64)
    assert edit_distance(dlrm, three) == 3  # width of block 1; op and width of block 3
    # block 7 reads dead block 5 beside block 3: 1 edit from dlrm-like, whose block 5 already is what it reads;
    # from `dead` (block 5 a Dot-Product, 400 wide, 32 tokens) also those 2 choices of block 5 that are read
    wired = _set(dlrm, 7, dense_idx=(3, 5))
    assert edit_distance(dlrm, wired) == 1
    assert edit_distance(dead, wired) == 3  # dense_idx of 7; dense_op and dense_dim of 5 (its tokens: unread)
    assert edit_distance(wired, dead) == 1  # back: only block 7's inputs
    assert edit_distance(dlrm, dataclasses.replace(dlrm, first_order=True, field_fm=True)) == 2
    with pytest.raises(ValueError, match="block count"):
        edit_distance(dlrm, dataclasses.replace(dlrm, blocks=dlrm.blocks[:-1]))


def test_dcnv2_cross_choices_count_only_when_the_op_stays():
    dcn = baseline_arch("dcnv2-like")  # block 1: a full-rank cross, depth 3 (its rank shapes nothing)
    rank = dict(dcn.blocks[0].dense_args)
    assert edit_distance(dcn, _set(dcn, 1, dense_args=tuple(sorted({**rank, "rank": 32}.items())))) == 0
    low = _set(dcn, 1, dense_args=tuple(sorted({**rank, "form": "lowrank", "rank": 32}.items())))
    assert edit_distance(dcn, low) == 2  # the form, then the rank a low-rank cross has
