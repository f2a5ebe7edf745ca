"""The NAS-Bench-201 cell space (Dong & Yang, ICLR 2020): 4 nodes, 6 edges, 5 candidate ops, 5^6 = 15,625 cells.

A cell is written as NB201 writes it, node by node with each incoming edge as `op~source`:
`|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`. Edges are kept in that string order throughout
((0,1), (0,2), (1,2), (0,3), (1,3), (2,3) as (source, target)).
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctrnas.errors import ArchValidationError, DataFormatError

OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
# (source, target) of each edge, in the order the NB201 string lists them.
EDGES: tuple[tuple[int, int], ...] = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
NUM_CELLS = len(OPS) ** len(EDGES)

# NASLib's encoding (naslib/search_spaces/nasbench201): its own op order and its own edge order.
_NASLIB_OPS = ("skip_connect", "none", "nor_conv_3x3", "nor_conv_1x1", "avg_pool_3x3")
_NASLIB_EDGES = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))


@dataclass(frozen=True)
class NB201Cell:
    """One NB201 cell: the op on each of the 6 edges, in string order (see EDGES)."""

    ops: tuple[str, ...]

    def __post_init__(self):
        if len(self.ops) != len(EDGES):
            raise ArchValidationError(None, "ops", self.ops, f"expected {len(EDGES)} edge ops")
        for i, op in enumerate(self.ops):
            if op not in OPS:
                raise ArchValidationError(None, f"edge {EDGES[i]}", op, f"expected one of {OPS}")

    # --- string form -------------------------------------------------------------------------
    @classmethod
    def from_str(cls, text: str) -> "NB201Cell":
        """Parse `|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`."""
        nodes = text.strip().split("+")
        if len(nodes) != 3:
            raise ArchValidationError(None, "arch", text, "expected 3 nodes separated by '+'")
        ops: list[str] = []
        for target, node in enumerate(nodes, start=1):
            inner = node.strip()
            if not (inner.startswith("|") and inner.endswith("|")):
                raise ArchValidationError(None, f"node {target}", node, "expected '|op~src|...|'")
            edges = [e for e in inner[1:-1].split("|")]
            if len(edges) != target:
                raise ArchValidationError(None, f"node {target}", node, f"expected {target} incoming edges")
            for source, edge in enumerate(edges):
                op, _, src = edge.partition("~")
                if src != str(source):
                    raise ArchValidationError(None, f"node {target}", edge, f"expected source ~{source}")
                ops.append(op)
        return cls(tuple(ops))

    @classmethod
    def from_digits(cls, text: str) -> "NB201Cell":
        """The compact form of the shipped table: each edge's index in OPS, in string order ("421211")."""
        if len(text) != len(EDGES) or not all(c.isdigit() and int(c) < len(OPS) for c in text):
            raise ArchValidationError(None, "ops", text, f"expected {len(EDGES)} digits 0-{len(OPS) - 1}")
        return cls(tuple(OPS[int(c)] for c in text))

    def to_str(self) -> str:
        """Format as NB201's string (inverse of from_str)."""
        parts, i = [], 0
        for target in (1, 2, 3):
            parts.append("|" + "|".join(f"{self.ops[i + s]}~{s}" for s in range(target)) + "|")
            i += target
        return "+".join(parts)

    def __str__(self) -> str:
        return self.to_str()

    def key(self) -> str:
        """The search de-duplication key (`ctrnas.search` Arch protocol): the NB201 string."""
        return self.to_str()

    def to_json(self) -> str:
        return self.to_str()

    # --- encodings ---------------------------------------------------------------------------
    @property
    def index(self) -> int:
        """Position in `enumerate_cells()`: base-5 number, first edge most significant."""
        value = 0
        for op in self.ops:
            value = value * len(OPS) + OPS.index(op)
        return value

    @classmethod
    def from_index(cls, index: int) -> "NB201Cell":
        if not 0 <= index < NUM_CELLS:
            raise ArchValidationError(None, "index", index, f"expected 0..{NUM_CELLS - 1}")
        digits = []
        for _ in EDGES:
            index, d = divmod(index, len(OPS))
            digits.append(OPS[d])
        return cls(tuple(reversed(digits)))

    def naslib_indices(self) -> tuple[int, ...]:
        """NASLib's op-index tuple (its op order, its edge order), as in nb201_acc.csv."""
        by_edge = dict(zip(EDGES, self.ops))
        return tuple(_NASLIB_OPS.index(by_edge[e]) for e in _NASLIB_EDGES)

    def edge_op(self, source: int, target: int) -> str:
        return self.ops[EDGES.index((source, target))]

    # --- structure ---------------------------------------------------------------------------
    def has_path(self) -> bool:
        """True when some chain of non-`none` edges links the input node 0 to the output node 3."""
        reach = {0}
        for source, target in sorted(EDGES, key=lambda e: e[1]):
            if source in reach and self.edge_op(source, target) != "none":
                reach.add(target)
        return 3 in reach


def enumerate_cells() -> list[NB201Cell]:
    """All 15,625 cells, in `NB201Cell.index` order."""
    return [NB201Cell(ops) for ops in itertools.product(OPS, repeat=len(EDGES))]


class NB201Space:
    """The NB201 space in the search-strategy interface: sample / mutate / key.

    Mutation follows NB201's REA baseline (Dong & Yang 2020, App.): change one edge to a different op.
    """

    num_edges = len(EDGES)

    def sample(self, rng: np.random.Generator) -> NB201Cell:
        return NB201Cell(tuple(OPS[int(i)] for i in rng.integers(0, len(OPS), size=len(EDGES))))

    def mutate(self, arch: NB201Cell, rng: np.random.Generator) -> NB201Cell:
        edge = int(rng.integers(0, len(EDGES)))
        choices = [op for op in OPS if op != arch.ops[edge]]
        ops = list(arch.ops)
        ops[edge] = choices[int(rng.integers(0, len(choices)))]
        return NB201Cell(tuple(ops))

    def key(self, arch: NB201Cell) -> str:
        return arch.to_str()

    def size(self) -> int:
        return NUM_CELLS


TRUTH_COLUMNS = {
    "cifar10": "cifar10_test",
    "cifar100": "cifar100_test",
    "imagenet16": "imagenet16_test",
    "cifar10_valid": "cifar10_valid_naslib",
}


# The accuracy table shipped with ctrnas (ctrnas/vision/data/README.md: source and columns).
SHIPPED_TABLE = Path(__file__).with_name("data") / "nb201_acc.csv"


@dataclass(frozen=True)
class NB201Table:
    """The benchmark's accuracies, one row per cell, looked up by the cell's string."""

    path: str
    rows: dict  # arch string -> {column: float}

    @classmethod
    def load(cls, path: str | Path) -> "NB201Table":
        path = Path(path)
        if not path.exists():
            raise DataFormatError(str(path), None, None, "file not found")
        rows: dict[str, dict[str, float]] = {}
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            key = next((k for k in ("arch", "ops") if k in (reader.fieldnames or ())), None)
            if key is None:
                raise DataFormatError(str(path), 1, "arch", "header lacks an 'arch' (or 'ops') column")
            for lineno, row in enumerate(reader, start=2):
                try:
                    cell = NB201Cell.from_str(row["arch"]) if key == "arch" else NB201Cell.from_digits(row["ops"])
                except ArchValidationError as e:
                    raise DataFormatError(str(path), lineno, key, str(e)) from None
                values = {}
                for col in TRUTH_COLUMNS.values():
                    if col in row and row[col] not in ("", None):
                        try:
                            values[col] = float(row[col])
                        except ValueError:
                            raise DataFormatError(str(path), lineno, col, f"not a number: {row[col]!r}") from None
                if "naslib_op_indices" in row:
                    values["naslib_op_indices"] = row["naslib_op_indices"]
                rows[cell.to_str()] = values
        return cls(str(path), rows)

    def accuracy(self, cell: NB201Cell, truth: str = "cifar10") -> float:
        """Test accuracy (%) of `cell` on the named dataset (see TRUTH_COLUMNS)."""
        if truth not in TRUTH_COLUMNS:
            raise ArchValidationError(None, "truth", truth, f"expected one of {sorted(TRUTH_COLUMNS)}")
        row = self.rows.get(cell.to_str())
        if row is None or TRUTH_COLUMNS[truth] not in row:
            raise DataFormatError(self.path, None, TRUTH_COLUMNS[truth], f"no value for {cell.to_str()}")
        return row[TRUTH_COLUMNS[truth]]

    def best(self, truth: str = "cifar10") -> tuple[NB201Cell, float]:
        col = TRUTH_COLUMNS[truth]
        arch, row = max(self.rows.items(), key=lambda kv: kv[1].get(col, float("-inf")))
        return NB201Cell.from_str(arch), row[col]
