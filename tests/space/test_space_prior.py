"""The ctrnas spaces' sampling prior: Cross as often as any other dense op, and subnets that open with a
Dot-Product on the raw inputs (they train worse on the synthetic Criteo profile) do not dominate."""

from collections import Counter

import numpy as np
import pytest

from ctrnas.space import get_space, op_spec

N = 3000


def _counts(name: str):
    space = get_space(name)
    rng = np.random.default_rng(0)
    ops, first = Counter(), Counter()
    for _ in range(N):
        arch = space.sample(rng)
        live = arch.live_parts()
        for i, parts in live.items():
            if parts.dense:
                ops[arch.blocks[i - 1].dense_op] += 1
        i0 = min(i for i, parts in live.items() if parts.dense)
        b = arch.blocks[i0 - 1]
        first["dot on raw inputs" if b.dense_op == "dot" and 0 in b.sparse_idx else b.dense_op] += 1
    return space, ops, first


@pytest.mark.parametrize("name", ["ctrnas-small", "ctrnas-full"])
def test_cross_is_sampled_about_as_often_as_every_other_dense_op(name):
    space, ops, _ = _counts(name)
    assert set(ops) == set(space.config.dense_ops)
    last_only = {op for op in ops if op_spec(op).last_block_only}  # `concat`: one block of seven
    assert last_only == {"concat"} and 0 < ops["concat"] < N
    everywhere = {op: n for op, n in ops.items() if op not in last_only}
    mean = sum(everywhere.values()) / len(everywhere)
    for op, n in everywhere.items():
        assert abs(n - mean) < 0.1 * mean, (op, n, mean)  # uniform up to sampling noise (~2% sd here)


def test_dot_first_on_raw_inputs_does_not_dominate_samples():
    _, _, small = _counts("ctrnas-small")
    share = small["dot on raw inputs"] / N
    # NASRec-Small opens half of its subnets so (two dense ops); with four ops a quarter, no more than any other
    assert share < 0.3
    # Two shares near 1/4 of N draws differ by sd sqrt(0.5 / N) = 0.013: allow three. (`concat` opens a
    # subnet only when the last block reads nothing but the raw inputs: rarely.)
    assert all(share <= n / N + 0.04 for op, n in small.items() if op not in ("dot", "dot on raw inputs", "concat"))
    _, _, paper = _counts("nasrec-small")
    assert paper["dot on raw inputs"] / N > 0.45  # the paper's space as measured, for contrast


def test_none_is_drawn_for_the_last_block_only():
    space = get_space("ctrnas-small")
    rng = np.random.default_rng(1)
    last = Counter()
    arch = space.sample(rng)
    for _ in range(500):
        arch = space.mutate(arch, rng) if rng.random() < 0.5 else space.sample(rng)
        assert all(b.sparse_op == "efc" for b in arch.blocks[:-1])
        last[arch.blocks[-1].sparse_op] += 1
    assert set(last) == {"efc", "none"}


def test_none_before_the_last_block_is_rejected():
    import dataclasses

    from ctrnas.errors import ArchValidationError

    space = get_space("ctrnas-small")
    arch = space.sample(np.random.default_rng(0))
    bad = dataclasses.replace(arch, blocks=(dataclasses.replace(arch.blocks[0], sparse_op="none"),
                                            *arch.blocks[1:]))
    with pytest.raises(ArchValidationError, match="block 1, field 'sparse_op'"):
        space.validate(bad)
