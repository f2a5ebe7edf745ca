"""Arch value type: JSON round trip, stable key, structural validation naming block and field."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctrnas.errors import ArchValidationError
from ctrnas.space import Arch, BlockChoice, get_space

ROOT = Path(__file__).resolve().parents[2]


def block(**kw):
    base = dict(dense_idx=(0,), sparse_idx=(0,), dense_left_idx=0, dense_right_idx=0, dense_op="fc",
                sparse_op="efc", dense_dim=16, sparse_tokens=16, dense_sparse_merge=False, fm=False)
    base.update(kw)
    return BlockChoice(**base)


@pytest.mark.parametrize("name", ["nasrec-full", "nasrec-small"])
def test_json_round_trip_of_sampled_archs(name):
    space = get_space(name)
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = space.sample(rng)
        text = json.dumps(a.to_json())
        b = Arch.from_json(json.loads(text))
        assert b == a and hash(b) == hash(a) and b.key() == a.key()
        assert Arch.from_json(a.dumps()) == a


def test_key_is_stable_across_processes():
    a = get_space("nasrec-full").sample(np.random.default_rng(7))
    code = ("import sys; from ctrnas.space import Arch; "
            "print(Arch.from_json(sys.stdin.read()).key())")
    out = subprocess.run([sys.executable, "-c", code], input=a.dumps(), capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "123"}, cwd=ROOT)
    assert out.stdout.strip() == a.key()
    assert len(a.key()) == 16 and int(a.key(), 16) >= 0


def test_key_ignores_dead_blocks_and_unused_inputs_only():
    # block 3 reads only block 1, so block 2 is dead
    a = Arch((block(), block(dense_idx=(0, 1)), block(dense_idx=(1,), sparse_idx=(1,))))
    assert a.live_blocks() == (1, 3)
    dead_changed = Arch((a.blocks[0], block(dense_dim=64, dense_op="dot"), a.blocks[2]))
    assert dead_changed.key() == a.key()
    unused_changed = Arch((block(dense_left_idx=0), a.blocks[1], dataclasses.replace(a.blocks[2], dense_right_idx=2)))
    assert unused_changed.key() == a.key()  # right input unused under FC
    live_changed = Arch((block(dense_dim=32), a.blocks[1], a.blocks[2]))
    assert live_changed.key() != a.key()


def test_live_blocks_follow_binary_inputs():
    a = Arch((block(), block(), block(dense_op="sum", dense_idx=(0,), dense_left_idx=2, dense_right_idx=0)))
    assert a.live_blocks() == (2, 3)  # block 2 through 'left'; sparse input is the stem
    a = Arch((block(), block(), block(dense_op="sum", dense_left_idx=0, dense_right_idx=0, sparse_idx=(0, 1))))
    assert a.live_blocks() == (1, 3)


@pytest.mark.parametrize("mutate, blk, field", [
    (lambda d: d["blocks"][1].update(dense_dim="64"), 2, "dense_dim"),
    (lambda d: d["blocks"][0].update(fm=1), 1, "fm"),
    (lambda d: d["blocks"][2].pop("sparse_op"), 3, "sparse_op"),
    (lambda d: d["blocks"][0].update(colour="red"), 1, "colour"),
    (lambda d: d["blocks"][1].update(dense_idx=[0, "1"]), 2, "dense_idx"),
    (lambda d: d["blocks"][1].update(dense_left_idx=True), 2, "dense_left_idx"),
])
def test_from_json_names_block_and_field(mutate, blk, field):
    d = Arch((block(), block(), block())).to_json()
    mutate(d)
    with pytest.raises(ArchValidationError) as e:
        Arch.from_json(d)
    assert (e.value.block, e.value.field) == (blk, field)
    assert f"block {blk}" in str(e.value) and field in str(e.value)


def test_from_json_rejects_bad_documents():
    for bad in ["not json", "[]", '{"blocks": []}', '{"format": "other/9", "blocks": [{}]}']:
        with pytest.raises(ArchValidationError):
            Arch.from_json(bad)


def test_live_parts_by_hand():
    # 3 reads only block 2's sparse output through EFC; 2's dense output is read by nobody, unless merged.
    b3 = block(dense_idx=(0,), sparse_idx=(2,))
    a = Arch((block(), block(dense_idx=(1,), sparse_idx=(0,)), b3))
    assert a.live_parts() == {2: (False, True, False), 3: (True, True, False)}
    # merge on in block 2: its dense output (and so block 1's dense) becomes live
    a = Arch((block(), block(dense_idx=(1,), sparse_idx=(0,), dense_sparse_merge=True), b3))
    assert a.live_parts() == {1: (True, False, False), 2: (True, True, True), 3: (True, True, False)}
    # Dot-Product reads sparse inputs: block 1's sparse op is live through block 2's dense op only
    a = Arch((block(), block(dense_op="dot", dense_idx=(0,), sparse_idx=(1,)), block(dense_idx=(2,))))
    assert a.live_parts() == {1: (False, True, False), 2: (True, False, False), 3: (True, True, False)}
    # FM makes the sparse op feed the dense output
    a = Arch((block(fm=True), block(dense_idx=(1,)), block(dense_idx=(2,))))
    assert a.live_parts() == {1: (True, True, False), 2: (True, False, False), 3: (True, True, False)}
