"""DLRM's interaction (Naumov et al. 2019) as a dense op: z = the dense input (projected to E unless it is E
wide), the F raw embeddings; y = ReLU(LN_d(W [z | triu(Z Z^T)] + b)), Z = [z; e_1..e_F] ([B, F+1, E]).

The pairs are TorchRec's `InteractionArch` (upper triangle, dense vector first); the exported model uses
`PairDots`, the same pairs gathered with one `index_select` (TorchRec's advanced indexing and its backward
cost about 1 ms of a 16 ms DLRM-like step of 512 on one CPU thread). The linear layer after it is a DLRM top
MLP's first layer, so DLRM is a point of the space.
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
        return FixedInteraction(proj, PairDots(self.inter.F), self.lin.extract(io.dense_dim),
                                self.ln.extract(io.dense_dim))

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        p, f = linear_cost(dims.emb + _pairs(dims.n_sparse), io.dense_dim)
        if io.dense_in != dims.emb:
            p1, f1 = linear_cost(io.dense_in, dims.emb)
            p, f = p + p1, f + f1
        f_bmm = 2 * (dims.n_sparse + 1) * (dims.n_sparse + 1) * dims.emb
        return p + ln_params(io.dense_dim, dims.layernorm), f + f_bmm


class PairDots(InteractionArch):
    """TorchRec's `InteractionArch` (the dense vector first, then the F tokens; the upper triangle of their
    dots, then the dense vector) with the pairs gathered by one `index_select` of the flattened dots instead
    of advanced indexing, whose backward (`index_put`) is the slow part on a CPU."""

    def __init__(self, num_sparse_features: int):
        super().__init__(num_sparse_features)
        n = num_sparse_features + 1
        i, j = torch.triu_indices(n, n, offset=1)
        self.register_buffer("pairs", i * n + j, persistent=False)

    def forward(self, dense_features: torch.Tensor, sparse_features: torch.Tensor) -> torch.Tensor:
        u = torch.cat([dense_features.unsqueeze(1), sparse_features], dim=1)
        dots = torch.bmm(u, u.transpose(1, 2)).flatten(1)
        return torch.cat([dense_features, dots.index_select(1, self.pairs)], dim=1)


class FixedInteraction(nn.Module):
    def __init__(self, proj: nn.Linear | None, inter: nn.Module, lin: nn.Module, ln: nn.Module):
        super().__init__()
        self.proj, self.inter, self.lin, self.ln = proj, inter, lin, ln

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        proj = self.proj
        z = dense if proj is None else proj(dense)
        return torch.relu(self.ln(self.lin(self.inter(z, sparse))))
