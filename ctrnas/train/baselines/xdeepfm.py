"""xDeepFM (Lian et al. 2018): LR + Compressed Interaction Network + a deep MLP."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ctrnas.data.schema import DatasetSchema
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.baselines.common import FirstOrder, flat_input, mlp_head


class CIN(nn.Module):
    """Compressed Interaction Network (xDeepFM Eq. 6-8).

    X^k_{h,*} = sum_{i,j} W^{k,h}_{i,j} (X^{k-1}_{i,*} o X^0_{j,*}); each layer is sum-pooled over the
    embedding axis (Eq. 7) and the pooled vectors of all layers are concatenated (Eq. 8).
    """

    def __init__(self, num_fields: int, layer_sizes: Sequence[int]):
        super().__init__()
        self.layers = nn.ModuleList()
        prev = num_fields
        for h in layer_sizes:
            self.layers.append(nn.Linear(prev * num_fields, h))  # a 1x1 convolution over the (i, j) pairs
            prev = h
        self.out_features = sum(layer_sizes)

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        # Work in [B, D, fields] layout so each layer is one broadcast product and one contiguous matmul.
        x0 = x0.transpose(1, 2)
        b, d, m = x0.shape
        xk, pooled = x0, []
        for layer in self.layers:
            z = (xk.unsqueeze(3) * x0.unsqueeze(2)).reshape(b, d, -1)    # [B, D, H*m], (h, j) pairs
            xk = torch.relu(layer(z))                                     # [B, D, H']
            pooled.append(xk.sum(dim=1))
        return torch.cat(pooled, dim=1)


class XDeepFM(nn.Module):
    """logit = LR(x) + w^T CIN(e) + MLP([x_dense | e]) (xDeepFM Eq. 9).

    CIN widths default to (16, 16): the (h x fields) outer products dominate a CPU step (memory-bound), and
    at 64 per layer a 1M-row epoch took ~4x longer than DeepFM's.
    """

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None,
                 cin: Sequence[int] = (16, 16), hidden: Sequence[int] = (400, 400)):
        super().__init__()
        self.linear = FirstOrder(schema, row_cap)
        self.stem = EmbeddingStem(schema, dim, row_cap)
        self.cin = CIN(len(schema.sparse), cin)
        self.cin_out = nn.Linear(self.cin.out_features, 1)
        self.deep = mlp_head(schema.dense_dim + dim * len(schema.sparse), hidden)

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        e = self.stem(kjt)
        return (self.linear(dense, kjt) + self.cin_out(self.cin(e)).squeeze(1)
                + self.deep(flat_input(dense, e)).squeeze(1))
