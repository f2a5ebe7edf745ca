"""NB201 space: string round trip, the 15,625 count, NASLib encoding and the CSV mapping."""

from pathlib import Path

import numpy as np
import pytest

from ctrnas.errors import ArchValidationError, DataFormatError
from ctrnas.vision.space import (NUM_CELLS, OPS, SHIPPED_TABLE, TRUTH_COLUMNS, NB201Cell, NB201Space, NB201Table,
                                 enumerate_cells)

SHARED_CSV = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "nb201" / "nb201_acc.csv"
# the table shipped with ctrnas; the workspace's source CSV (NB201's strings, more columns) where present
TABLES = (SHIPPED_TABLE,) + ((SHARED_CSV,) if SHARED_CSV.exists() else ())
EXAMPLE = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def test_parse_reads_ops_node_by_node():
    cell = NB201Cell.from_str(EXAMPLE)
    assert cell.edge_op(0, 1) == "nor_conv_3x3"
    assert cell.edge_op(1, 2) == "avg_pool_3x3"
    assert cell.edge_op(0, 3) == "skip_connect"
    assert cell.edge_op(2, 3) == "skip_connect"
    assert cell.to_str() == EXAMPLE


def test_enumeration_has_15625_unique_cells_that_round_trip():
    cells = enumerate_cells()
    strings = {c.to_str() for c in cells}
    assert len(cells) == NUM_CELLS == 5**6 == 15625
    assert len(strings) == 15625
    for i in (0, 1, 4, 5, 777, 15624):
        assert cells[i].index == i
        assert NB201Cell.from_index(i) == cells[i]
        assert NB201Cell.from_str(cells[i].to_str()) == cells[i]


@pytest.mark.parametrize(
    "bad",
    ["|nor_conv_3x3~0|+|nor_conv_3x3~0|", "|conv~0|+|none~0|none~1|+|none~0|none~1|none~2|",
     "|none~1|+|none~0|none~1|+|none~0|none~1|none~2|", "none~0+|none~0|none~1|+|none~0|none~1|none~2|"],
)
def test_malformed_strings_raise_arch_errors(bad):
    with pytest.raises(ArchValidationError):
        NB201Cell.from_str(bad)


def test_has_path_by_hand():
    assert NB201Cell(("skip_connect",) * 6).has_path()
    assert not NB201Cell(("none",) * 6).has_path()
    # only route: 0 -> 2 (conv) -> 3 (skip)
    assert NB201Cell(("none", "nor_conv_3x3", "none", "none", "none", "skip_connect")).has_path()
    # node 3 fed only through node 1, which is cut off from the input
    assert not NB201Cell(("none", "none", "skip_connect", "none", "skip_connect", "none")).has_path()
    # 15625 - cells with no path: counted independently by brute force over reachability matrices
    count = 0
    for c in enumerate_cells():
        adj = np.zeros((4, 4), dtype=int)
        for (s, t), op in zip(((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)), c.ops):
            adj[s, t] = op != "none"
        reach = np.linalg.matrix_power(adj + np.eye(4, dtype=int), 3)
        count += (reach[0, 3] > 0) == c.has_path()
    assert count == 15625


def test_space_sample_and_mutate_change_exactly_one_edge():
    space, rng = NB201Space(), np.random.default_rng(0)
    for _ in range(50):
        a = space.sample(rng)
        b = space.mutate(a, rng)
        assert sum(x != y for x, y in zip(a.ops, b.ops)) == 1
        assert space.key(b) == b.to_str()
    counts = {op: 0 for op in OPS}
    for _ in range(500):
        for op in space.sample(rng).ops:
            counts[op] += 1
    assert all(450 < v < 750 for v in counts.values())  # 600 expected per op


@pytest.mark.parametrize("path", TABLES)
def test_every_cell_maps_to_its_csv_row_and_naslib_encoding_agrees(path):
    table = NB201Table.load(path)
    assert len(table.rows) == 15625
    for cell in enumerate_cells():
        row = table.rows[cell.to_str()]
        if "naslib_op_indices" in row:  # the source form has NASLib's encoding beside NB201's string
            assert row["naslib_op_indices"] == str(cell.naslib_indices())
    best, acc = table.best("cifar10")
    assert acc == pytest.approx(94.37, abs=0.01)  # NB201's published best CIFAR-10 test accuracy
    assert table.accuracy(NB201Cell.from_str(EXAMPLE)) == pytest.approx(93.66, abs=0.01)


if SHARED_CSV.exists():  # an extra check in the project workspace: the shipped table is its source's figures
    def test_shipped_table_holds_the_source_figures():
        shipped, source = NB201Table.load(SHIPPED_TABLE), NB201Table.load(SHARED_CSV)
        assert shipped.rows.keys() == source.rows.keys()
        for cell, row in source.rows.items():
            for col in TRUTH_COLUMNS.values():
                assert shipped.rows[cell][col] == pytest.approx(row[col], rel=1e-9)


def test_compact_cells_parse_and_bad_ones_name_the_line(tmp_path):
    assert NB201Cell.from_digits("334131") == NB201Cell.from_str(EXAMPLE)
    bad = tmp_path / "t.csv"
    bad.write_text("ops,cifar10_test\n334131,93.66\n33413,1\n")
    with pytest.raises(DataFormatError) as e:
        NB201Table.load(bad)
    assert (e.value.line, e.value.field) == (3, "ops")
