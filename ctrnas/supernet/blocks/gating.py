"""Sigmoid-Gating: sigmoid(Linear(left)) * right at a common width, then Linear to the chosen width and LN.

NASRec switched (2022-09-24) from right * sigmoid(W left) on the other orientation to this form "for
better weight sharing"; we follow the released code (docs/nasrec.md).
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput, pad_to
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims


class Gating(nn.Module):
    """g = sigmoid(G[:w, :wl] left + c[:w]);  y = LN_d(W[:d, :w] (g * pad_w(right)) + b[:d]),  w = max(wl, wr)."""

    def __init__(self, dims: Dims, i: int):
        super().__init__()
        self.gate = ElasticLinear(dims.pad_width, dims.pad_width)
        self.lin = ElasticLinear(dims.pad_width, dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        w = max(io.left_w, io.right_w)
        g = torch.sigmoid(self.gate(x.left, w, io.left_w))
        return self.ln(self.lin(g * pad_to(x.right, w), io.dense_dim, w), io.dense_dim)

    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        w = max(io.left_w, io.right_w)
        return FixedGating(self.gate.extract(w, io.left_w), self.lin.extract(io.dense_dim, w),
                           self.ln.extract(io.dense_dim), w)

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        w = max(io.left_w, io.right_w)
        p1, f1 = linear_cost(io.left_w, w)
        p2, f2 = linear_cost(w, io.dense_dim)
        return p1 + p2 + ln_params(io.dense_dim, dims.layernorm), f1 + f2


class FixedGating(nn.Module):
    def __init__(self, gate: nn.Linear, lin: nn.Linear, ln: nn.Module, width: int):
        super().__init__()
        self.gate, self.lin, self.ln, self.width = gate, lin, ln, width

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(self.gate(left))
        return self.ln(self.lin(g * pad_to(right, self.width)))
