"""FM: factorization machine (Rendle 2010) on the field embeddings plus the linear term."""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.data.schema import DatasetSchema
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.baselines.common import FirstOrder, fm_interaction


class FM(nn.Module):
    """logit = LR(x) + sum_{i<j} <v_i, v_j> over the sparse fields (Rendle 2010 Eq. 1, computed as Eq. 5)."""

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None):
        super().__init__()
        self.linear = FirstOrder(schema, row_cap)
        self.stem = EmbeddingStem(schema, dim, row_cap)

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        return self.linear(dense, kjt) + fm_interaction(self.stem(kjt))
