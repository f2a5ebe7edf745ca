"""The embedding stem shared by the supernet, exported subnets and baselines."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.schema import DatasetSchema


def real_positions(widths: Sequence[int], dim: int) -> list[int]:
    """Where the tables' columns sit in the tokens [F, dim] flattened: field f's first `widths[f]` columns."""
    return [f * dim + c for f, w in enumerate(widths) for c in range(w)]


class EmbeddingStem(nn.Module):
    """One TorchRec table per sparse feature; returns sparse tokens [B, F, dim].

    `row_cap` bounds every table (ids are folded by modulo), as NASRec does for large tables during search.
    The tables start with dense gradients; the trainer switches them to row-sparse gradients with
    `use_sparse_gradients()` (5-10x faster updates on CPU, docs/cpu.md) and finds them through
    `embedding_parameters()` so they get their own (sparse) optimizer.
    """

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None,
                 widths: Sequence[int] | None = None):
        super().__init__()
        self.schema, self.dim, self.row_cap = schema, dim, row_cap
        self.names = list(schema.sparse_names)
        self.rows = [min(c, row_cap) if row_cap else c for c in schema.cardinalities]
        # Per-field table widths (Arch.table_dims): a narrower table's vectors are zero-padded to `dim`, a
        # field of width 0 has no table and a zero token; its ids are still accepted and ignored.
        self.widths = [dim] * len(self.names) if widths is None else [int(w) for w in widths]
        if len(self.widths) != len(self.names) or not all(0 <= w <= dim for w in self.widths):
            raise ValueError(f"widths {self.widths} must give each of the {len(self.names)} sparse fields a width "
                             f"in 0..{dim}")
        if not any(self.widths):
            raise ValueError("every sparse field has width 0: a model needs at least one embedding table")
        tables = [
            EmbeddingBagConfig(name=f"t_{n}", embedding_dim=w, num_embeddings=max(r, 1), feature_names=[n],
                               pooling=PoolingType.SUM)
            for n, r, w in zip(self.names, self.rows, self.widths) if w
        ]
        self.ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))
        self.mixed = any(w != dim for w in self.widths)
        # The lookups come back side by side ([B, sum of widths], tables in field order): uniform tables are a
        # view of them, narrower ones are put at their positions of [B, F x dim] in one index_copy (3x
        # faster than padding and stacking 26 tokens, forward and backward).
        self._keys = [n for n, w in zip(self.names, self.widths) if w]
        pos = real_positions(self.widths, dim) if self.mixed else []
        self.register_buffer("_positions", torch.tensor(pos, dtype=torch.long), persistent=False)
        self._fused = None  # ctrnas.supernet.fused.FusedTables while its TBE trains the tables

    def fuse(self, tables) -> None:
        """Look rows up through `tables` (`ctrnas.supernet.fused.FusedTables`) in training mode; None = plain."""
        self._fused = tables

    def __getstate__(self):
        # a copy (deepcopy, pickle) gets its own tables, which the fused kernel does not train: plain lookups
        return {**self.__dict__, "_fused": None}

    def use_sparse_gradients(self, enabled: bool = True) -> None:
        """Make backward produce row-sparse gradients (only the looked-up rows) for every table."""
        for bag in self.ebc.embedding_bags.values():
            bag.sparse = enabled

    @property
    def sparse_gradients(self) -> bool:
        return all(bag.sparse for bag in self.ebc.embedding_bags.values())

    def embedding_parameters(self) -> list[nn.Parameter]:
        """The embedding tables, in feature order (fields of width 0 have none)."""
        return [bag.weight for bag in self.ebc.embedding_bags.values()]

    @property
    def num_features(self) -> int:
        return len(self.names)

    def lookups(self, kjt: KeyedJaggedTensor | torch.Tensor) -> torch.Tensor:
        """The tables' lookups side by side, [B, sum of widths], in field order (fields of width 0 have none):
        what `forward` lays out, for a reader that lays them out itself (`ctrnas.supernet.compact.split_dots`).
        `kjt` may also be ids [B, F], one per field in field order (the serving artifact's input): a bag of one
        id is its row, so the lookups are plain row reads, which `torch.export` traces without a KJT."""
        if isinstance(kjt, torch.Tensor):
            return self._rows_of(kjt)
        if self.row_cap:
            kjt = KeyedJaggedTensor(keys=kjt.keys(), values=self._fold(kjt), lengths=kjt.lengths())
        if getattr(self, "_fused", None) is not None and self.training:  # None in a stem pickled before it existed
            if kjt.keys() != self._keys:
                at = {k: i for i, k in enumerate(kjt.keys())}
                kjt = kjt.permute([at[k] for k in self._keys])
            return self._fused(kjt.values(), kjt.offsets().long())
        out = self.ebc(kjt)
        if out.keys() == self._keys:
            return out.values()
        kt = out.to_dict()  # tables in another order (a sharded collection may regroup them)
        return torch.cat([kt[n] for n, w in zip(self.names, self.widths) if w], dim=1)

    def forward(self, kjt: KeyedJaggedTensor | torch.Tensor) -> torch.Tensor:
        side = self.lookups(kjt)
        if not self.mixed:
            return side.view(side.shape[0], len(self.names), self.dim)
        flat = side.new_zeros(side.shape[0], len(self.names) * self.dim)
        return flat.index_copy(1, self._positions, side).view(side.shape[0], len(self.names), self.dim)

    def embedding_bytes(self) -> int:
        """Bytes of the tables (float32), as `ctrnas.supernet.counting.embedding_bytes` counts them."""
        return 4 * sum(max(r, 1) * w for r, w in zip(self.rows, self.widths))

    def _rows_of(self, ids: torch.Tensor) -> torch.Tensor:
        if self.row_cap:
            ids = ids % torch.tensor(self.rows, dtype=ids.dtype)
        bags = self.ebc.embedding_bags
        return torch.cat([nn.functional.embedding(ids[:, f], bags[f"t_{n}"].weight)
                          for f, (n, w) in enumerate(zip(self.names, self.widths)) if w], dim=1)

    def _fold(self, kjt: KeyedJaggedTensor) -> torch.Tensor:
        caps = torch.tensor(self.rows, dtype=kjt.values().dtype)
        per_value = torch.repeat_interleave(caps, kjt.length_per_key_tensor() if hasattr(kjt, "length_per_key_tensor")
                                            else torch.tensor(kjt.length_per_key()))
        return kjt.values() % per_value
