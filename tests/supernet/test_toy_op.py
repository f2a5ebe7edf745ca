"""Adding an op touches only the places docs/ops.md names: the op table and the block registry.

A toy dense op (y = -(W x + b) over the concatenated dense inputs) is declared with a table entry and a
block class registered under its key; sampling, validation, the supernet path, export and counting then
work on it with no other change.
"""

import numpy as np
import pytest
import torch
from torch import nn

from ctrnas.space import Arch, get_space, ops
from ctrnas.space.ops import OpSpec
from ctrnas.supernet import Supernet, blocks, count_flops, count_params, export
from ctrnas.supernet.elastic import ElasticLinear, linear_cost
from ctrnas.supernet.testing import make_batch, make_schema


class Neg(nn.Module):
    def __init__(self, dims, i):
        super().__init__()
        self.lin = ElasticLinear(dims.dense_in_max(i), dims.max_dense)

    def forward(self, io, x):
        return -self.lin(x.dense, io.dense_dim, x.dense_cols)

    def extract(self, io, x_cols):
        return FixedNeg(self.lin.extract(io.dense_dim, x_cols.dense_cols))

    @staticmethod
    def cost(dims, io):
        return linear_cost(io.dense_in, io.dense_dim)


class FixedNeg(nn.Module):
    def __init__(self, lin):
        super().__init__()
        self.lin = lin

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return -self.lin(dense)


@pytest.fixture
def toy_op(monkeypatch):
    monkeypatch.setitem(ops.OPS, "neg", OpSpec("neg", "dense", 1, False, "neg-block", "Linear(dense_in -> d)"))
    monkeypatch.setitem(blocks.BLOCKS, "neg-block", Neg)


def test_a_toy_op_runs_through_space_supernet_export_and_counting(toy_op):
    blocks.check_blocks()
    schema = make_schema()
    space = get_space({"dense_ops": ["fc", "neg"], "sparse_ops": ["efc"], "num_blocks": 3, "dense_dims": [4, 6],
                       "sparse_tokens": [2, 3], "merge_tokens": 2})
    torch.manual_seed(0)
    net = Supernet(schema, space)
    dense, kjt, _ = make_batch(schema)
    rng = np.random.default_rng(0)
    seen = 0
    for _ in range(20):
        arch = space.sample(rng)
        live = arch.live_parts()
        seen += any(arch.blocks[i - 1].dense_op == "neg" and p.dense for i, p in live.items())
        model = export(net, arch)
        torch.testing.assert_close(model(dense, kjt), net(dense, kjt, arch), atol=1e-6, rtol=0)
        assert count_params(schema, space, arch) == sum(p.numel() for p in model.net.parameters())
        assert count_flops(schema, space, arch) > 0
        assert Arch.from_json(arch.to_json()) == arch
    assert seen >= 5


def test_the_paper_presets_do_not_take_a_new_op(toy_op):
    assert "neg" not in get_space("nasrec-full").config.dense_ops


def test_an_op_without_a_block_class_is_caught():
    table = dict(ops.OPS, neg=OpSpec("neg", "dense", 1, False, "neg-block", ""))
    with pytest.raises(RuntimeError, match="no class for \\['neg-block'\\]"):
        blocks.check_blocks(table)


def test_an_op_declares_its_product_degree_in_the_table(monkeypatch):
    """`final.layernorm: auto` reads each op's degree from its OpSpec: a toy squaring op (declared degree 2 x
    its input's) gives a chain of two of them degree 4, the same chain of FC ops degree 1."""
    from ctrnas.space import BlockChoice
    from ctrnas.train.normalise import product_degree

    sq = OpSpec("sq", "dense", 1, False, "fc", "x^2", degree=lambda ins, tokens: 2 * max(ins))
    monkeypatch.setitem(ops.OPS, "sq", sq)

    def chain(op):
        b = [BlockChoice(dense_op=op, sparse_op="efc", dense_idx=(i,), sparse_idx=(i,), dense_left_idx=0,
                         dense_right_idx=0, dense_dim=4, sparse_tokens=2, fm=False, dense_sparse_merge=False)
             for i in range(2)]
        return Arch(tuple(b))

    assert product_degree(chain("sq")) == 4 and product_degree(chain("fc")) == 1
    assert ops.OPS["dot"].output_degree((1, 3), 2) == 6 and ops.OPS["gating"].output_degree((5, 2), 1) == 2
    assert ops.OPS["sum"].output_degree((5, 2), 1) == 5 and ops.OPS["attention"].output_degree((), 4) == 1
    assert ops.OPS["efc"].output_degree((), 4) == 4
