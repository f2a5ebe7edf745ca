"""DeepFM (Guo et al. 2017): LR + FM + a deep MLP sharing the same field embeddings."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ctrnas.data.schema import DatasetSchema
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.baselines.common import FirstOrder, flat_input, fm_interaction, mlp_head


class DeepFM(nn.Module):
    """logit = LR(x) + FM(e) + MLP([x_dense | e_1 .. e_F]) (DeepFM Eq. 1)."""

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None,
                 hidden: Sequence[int] = (400, 400, 400)):
        super().__init__()
        self.linear = FirstOrder(schema, row_cap)
        self.stem = EmbeddingStem(schema, dim, row_cap)
        self.deep = mlp_head(schema.dense_dim + dim * len(schema.sparse), hidden)

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        e = self.stem(kjt)
        return self.linear(dense, kjt) + fm_interaction(e) + self.deep(flat_input(dense, e)).squeeze(1)
