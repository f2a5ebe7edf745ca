"""Pieces shared by the hand-crafted baselines: the linear (first-order) part, the FM interaction, MLPs."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torchrec.modules.mlp import MLP
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.schema import DatasetSchema
from ctrnas.supernet.stem import EmbeddingStem


class FirstOrder(nn.Module):
    """Logistic-regression term: a scalar weight per sparse id (a 1-wide stem) plus a linear map of the
    dense features and a bias: w0 + <w, x_dense> + sum_f w_f[id_f]."""

    def __init__(self, schema: DatasetSchema, row_cap: int | None = None):
        super().__init__()
        self.weights = EmbeddingStem(schema, dim=1, row_cap=row_cap)
        self.dense = nn.Linear(schema.dense_dim, 1) if schema.dense_dim else None
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, dense: torch.Tensor, kjt: KeyedJaggedTensor) -> torch.Tensor:
        out = self.weights(kjt).sum(dim=(1, 2)) + self.bias
        if self.dense is not None:
            out = out + self.dense(dense).squeeze(1)
        return out


def fm_interaction(e: torch.Tensor) -> torch.Tensor:
    """Second-order FM term, Rendle (2010) Eq. 5: 1/2 sum_d [(sum_i v_id)^2 - sum_i v_id^2], e: [B, F, D] -> [B].

    (torchrec's FactorizationMachine sums over the flattened F*D values instead, which is not this term.)
    """
    s = e.sum(dim=1)
    return 0.5 * (s * s - (e * e).sum(dim=1)).sum(dim=1)


def mlp_head(in_features: int, hidden: Sequence[int]) -> nn.Module:
    """ReLU MLP (torchrec's) followed by a linear layer to one logit."""
    if not hidden:
        return nn.Linear(in_features, 1)
    return nn.Sequential(MLP(in_features, list(hidden), bias=True, activation="relu"), nn.Linear(hidden[-1], 1))


def flat_input(dense: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """[dense features | flattened field embeddings], the usual deep-part input."""
    return torch.cat([dense, e.flatten(1)], dim=1)
