"""LR: logistic regression on one-hot sparse ids and the dense features (BARS reference row)."""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.data.schema import DatasetSchema
from ctrnas.train.baselines.common import FirstOrder


class LR(nn.Module):
    """logit = w0 + <w, x_dense> + sum_f w_f[id_f]."""

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None):
        super().__init__()
        self.linear = FirstOrder(schema, row_cap)

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        return self.linear(dense, kjt)
