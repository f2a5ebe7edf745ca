"""DCN-v2 (Wang et al. 2021), parallel form: torchrec's full-rank CrossNet beside a deep MLP."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torchrec.modules.crossnet import CrossNet
from torchrec.modules.mlp import MLP

from ctrnas.data.schema import DatasetSchema
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.baselines.common import flat_input


class DCNv2(nn.Module):
    """x0 = [x_dense | e]; cross layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l (DCN-v2 Eq. 1) in parallel
    with an MLP; the two outputs are concatenated and mapped to a logit."""

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None, cross_layers: int = 3,
                 hidden: Sequence[int] = (400, 400)):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim, row_cap)
        n = schema.dense_dim + dim * len(schema.sparse)
        self.cross = CrossNet(n, cross_layers)
        self.deep = MLP(n, list(hidden), bias=True, activation="relu")
        self.out = nn.Linear(n + hidden[-1], 1)

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        x0 = flat_input(dense, self.stem(kjt))
        return self.out(torch.cat([self.cross(x0), self.deep(x0)], dim=1)).squeeze(1)
