"""Sum: zero-pad the two inputs to a common width, add, Linear to the chosen width, LayerNorm (no activation)."""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput, pad_to
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims


class Sum(nn.Module):
    """y = LN_d(W[:d, :w] (pad_w(left) + pad_w(right)) + b[:d]),  w = max(width(left), width(right))."""

    def __init__(self, dims: Dims, i: int):
        super().__init__()
        self.lin = ElasticLinear(dims.pad_width, dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        w = max(io.left_w, io.right_w)
        s = pad_to(x.left, w) + pad_to(x.right, w)
        return self.ln(self.lin(s, io.dense_dim, w), io.dense_dim)

    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        w = max(io.left_w, io.right_w)
        return FixedSum(self.lin.extract(io.dense_dim, w), self.ln.extract(io.dense_dim), w)

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        p, f = linear_cost(max(io.left_w, io.right_w), io.dense_dim)
        return p + ln_params(io.dense_dim, dims.layernorm), f


class FixedSum(nn.Module):
    def __init__(self, lin: nn.Linear, ln: nn.Module, width: int):
        super().__init__()
        self.lin, self.ln, self.width = lin, ln, width

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return self.ln(self.lin(pad_to(left, self.width) + pad_to(right, self.width)))
