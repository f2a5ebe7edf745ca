"""DLRM's interaction (Naumov et al. 2019) as a dense op: z = the dense input (projected to E unless it is E
wide), the F raw embeddings; y = ReLU(LN_d(W [z | triu(Z Z^T)] + b)), Z = [z; e_1..e_F] ([B, F+1, E]).

The pairs are TorchRec's `InteractionArch` (upper triangle, dense vector first), which the exported model
uses; the linear layer after it is a DLRM top MLP's first layer, so DLRM is a point of the space.
"""

from __future__ import annotations

import torch
from torch import nn
from torchrec.models.dlrm import InteractionArch

from ctrnas.supernet.blocks.base import OpInput
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims


def _pairs(n_sparse: int) -> int:
    return (n_sparse + 1) * n_sparse // 2


class Interaction(nn.Module):
    def __init__(self, dims: Dims, i: int):
        super().__init__()
        self.emb = dims.emb
        self.proj = ElasticLinear(dims.dense_in_max(i), dims.emb)
        self.inter = InteractionArch(dims.n_sparse)
        self.lin = ElasticLinear(dims.emb + _pairs(dims.n_sparse), dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        z = x.dense if io.dense_in == self.emb else self.proj(x.dense, None, x.dense_cols)
        return torch.relu(self.ln(self.lin(self.inter(z, x.raw), io.dense_dim), io.dense_dim))

    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        proj = None if io.dense_in == self.emb else self.proj.extract(None, x_cols.dense_cols)
        return FixedInteraction(proj, InteractionArch(self.inter.F), self.lin.extract(io.dense_dim),
                                self.ln.extract(io.dense_dim))

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        p, f = linear_cost(dims.emb + _pairs(dims.n_sparse), io.dense_dim)
        if io.dense_in != dims.emb:
            p1, f1 = linear_cost(io.dense_in, dims.emb)
            p, f = p + p1, f + f1
        f_bmm = 2 * (dims.n_sparse + 1) * (dims.n_sparse + 1) * dims.emb
        return p + ln_params(io.dense_dim, dims.layernorm), f + f_bmm


class FixedInteraction(nn.Module):
    def __init__(self, proj: nn.Linear | None, inter: InteractionArch, lin: nn.Linear, ln: nn.Module):
        super().__init__()
        self.proj, self.inter, self.lin, self.ln = proj, inter, lin, ln

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        proj = self.proj
        z = dense if proj is None else proj(dense)
        return torch.relu(self.ln(self.lin(self.inter(z, sparse))))
