"""EFC: a linear layer over the token axis of the sparse input, then LN over the embedding and ReLU."""

from __future__ import annotations

import copy

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput, token_linear
from ctrnas.supernet.elastic import ElasticLinear, layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims


class EFC(nn.Module):
    """y[b, :, e] = W[:s, cols] x[b, :, e] + c[:s];  out = ReLU(LN_E(y)): [B, T, E] -> [B, s, E]."""

    def __init__(self, dims: Dims, i: int):
        super().__init__()
        self.lin = ElasticLinear(dims.tok_in_max(i), dims.max_tokens)
        self.ln = layer_norm(dims.emb, dims.layernorm)

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        return torch.relu(self.ln(token_linear(self.lin, x.sparse, io.tokens, x.tok_cols)))

    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        return FixedEFC(self.lin.extract(io.tokens, x_cols.tok_cols), copy.deepcopy(self.ln))

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        p, f = linear_cost(io.tok_in, io.tokens, rows=dims.emb)
        return p + ln_params(dims.emb, dims.layernorm), f


class FixedEFC(nn.Module):
    def __init__(self, lin: nn.Linear, ln: nn.Module):
        super().__init__()
        self.lin, self.ln = lin, ln

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.ln(self.lin(sparse.transpose(1, 2)).transpose(1, 2)))
