"""The embedding stem shared by the supernet, exported subnets and baselines."""

from __future__ import annotations

import torch
from torch import nn
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.schema import DatasetSchema


class EmbeddingStem(nn.Module):
    """One TorchRec table per sparse feature; returns sparse tokens [B, F, dim].

    `row_cap` bounds every table (ids are folded by modulo), as NASRec does for large tables during search.
    The tables start with dense gradients; the trainer switches them to row-sparse gradients with
    `use_sparse_gradients()` (5-10x faster updates on CPU, docs/cpu.md) and finds them through
    `embedding_parameters()` so they get their own (sparse) optimizer.
    """

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None):
        super().__init__()
        self.schema, self.dim, self.row_cap = schema, dim, row_cap
        self.names = list(schema.sparse_names)
        self.rows = [min(c, row_cap) if row_cap else c for c in schema.cardinalities]
        tables = [
            EmbeddingBagConfig(name=f"t_{n}", embedding_dim=dim, num_embeddings=max(r, 1), feature_names=[n],
                               pooling=PoolingType.SUM)
            for n, r in zip(self.names, self.rows)
        ]
        self.ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))

    def use_sparse_gradients(self, enabled: bool = True) -> None:
        """Make backward produce row-sparse gradients (only the looked-up rows) for every table."""
        for bag in self.ebc.embedding_bags.values():
            bag.sparse = enabled

    @property
    def sparse_gradients(self) -> bool:
        return all(bag.sparse for bag in self.ebc.embedding_bags.values())

    def embedding_parameters(self) -> list[nn.Parameter]:
        """The embedding tables, in feature order."""
        return [bag.weight for bag in self.ebc.embedding_bags.values()]

    @property
    def num_features(self) -> int:
        return len(self.names)

    def forward(self, kjt: KeyedJaggedTensor) -> torch.Tensor:
        if self.row_cap:
            kjt = KeyedJaggedTensor(keys=kjt.keys(), values=self._fold(kjt), lengths=kjt.lengths())
        kt = self.ebc(kjt).to_dict()
        return torch.stack([kt[n] for n in self.names], dim=1)

    def _fold(self, kjt: KeyedJaggedTensor) -> torch.Tensor:
        caps = torch.tensor(self.rows, dtype=kjt.values().dtype)
        per_value = torch.repeat_interleave(caps, kjt.length_per_key_tensor() if hasattr(kjt, "length_per_key_tensor")
                                            else torch.tensor(kjt.length_per_key()))
        return kjt.values() % per_value
