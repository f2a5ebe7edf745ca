"""NB201 network: published parameter counts, ops, and the no-path cell."""

import pytest
import torch

from ctrnas.vision.network import FactorizedReduce, InferCell, build_network, count_parameters
from ctrnas.vision.space import NB201Cell


@pytest.mark.parametrize(
    "op,expected",
    [("nor_conv_3x3", 1_531_546), ("skip_connect", 73_306), ("none", 73_306), ("avg_pool_3x3", 73_306)],
)
def test_parameter_counts_match_nb201(op, expected):
    # NB201 (Dong & Yang 2020): 1.53 MB for the all-3x3 cell, 0.073 MB for parameter-free cells, 10 classes.
    assert count_parameters(build_network(NB201Cell((op,) * 6), num_classes=10, seed=0)) == expected


def test_parameter_count_by_hand_for_all_1x1():
    # skip network (73,306) + 15 cells x 6 one-by-one ReLU-Conv-BN: 5 cells each at C = 16, 32, 64
    per_cell = lambda c: 6 * (c * c + 2 * c)
    expected = 73_306 + 5 * (per_cell(16) + per_cell(32) + per_cell(64))
    assert count_parameters(build_network(NB201Cell(("nor_conv_1x1",) * 6), seed=0)) == expected


def test_cell_without_path_gives_constant_output():
    cut = NB201Cell.from_str("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|none~0|none~1|none~2|")
    assert not cut.has_path()
    cell = InferCell(cut, 4, 4)
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(2, 4, 8, 8, generator=g), torch.randn(2, 4, 8, 8, generator=g)
    assert torch.equal(cell(x1), torch.zeros(2, 4, 8, 8))
    net = build_network(cut, seed=0).eval()
    y1, y2 = net(torch.randn(3, 3, 32, 32, generator=g)), net(torch.randn(3, 3, 32, 32, generator=g))
    assert torch.allclose(y1, y2) and torch.allclose(y1, y1[0].expand_as(y1))


def test_cell_sums_edges_into_nodes():
    # all skip cell at equal width: node1 = x, node2 = 2x, node3 = x + x + 2x = 4x
    cell = InferCell(NB201Cell(("skip_connect",) * 6), 3, 3)
    x = torch.randn(2, 3, 5, 5)
    assert torch.allclose(cell(x), 4 * x)


def test_factorized_reduce_halves_resolution():
    fr = FactorizedReduce(8, 16, 2)
    assert fr(torch.randn(2, 8, 32, 32)).shape == (2, 16, 16, 16)


def test_seeded_build_is_reproducible_and_leaves_global_rng_alone():
    cell = NB201Cell.from_str("|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_3x3~2|")
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, b = build_network(cell, seed=7), build_network(cell, seed=7)
    after = torch.rand(1)
    assert torch.equal(before, after)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    assert build_network(cell, num_classes=100, seed=0)(torch.randn(2, 3, 32, 32)).shape == (2, 100)
