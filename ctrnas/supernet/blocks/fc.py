"""FC: dense input -> Linear -> LayerNorm -> ReLU at the chosen width (NASRec `linear-2d`)."""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims


class FC(nn.Module):
    """y = ReLU(LN_d(W[:d, cols] x + b[:d]))."""

    def __init__(self, dims: Dims, i: int):
        super().__init__()
        self.lin = ElasticLinear(dims.dense_in_max(i), dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        return torch.relu(self.ln(self.lin(x.dense, io.dense_dim, x.dense_cols), io.dense_dim))

    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        return FixedFC(self.lin.extract(io.dense_dim, x_cols.dense_cols), self.ln.extract(io.dense_dim))

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        p, f = linear_cost(io.dense_in, io.dense_dim)
        return p + ln_params(io.dense_dim, dims.layernorm), f


class FixedFC(nn.Module):
    def __init__(self, lin: nn.Linear, ln: nn.Module):
        super().__init__()
        self.lin, self.ln = lin, ln

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.ln(self.lin(dense)))
