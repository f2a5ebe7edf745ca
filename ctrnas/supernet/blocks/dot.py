"""Dot-Product: DLRM-style pairwise dot products of the projected dense vector and compressed sparse tokens.

z = [P x_dense ; C over the token axis of x_sparse]  ([B, K+1, E], K = round(sqrt(2 max_dense)) as NASRec),
then the strict lower triangle of z z^T ([B, K(K+1)/2]) -> Linear to the chosen width -> LN.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput, token_linear
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims


def pairwise_dots(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Strict lower triangle of z z^T for z = [p; t]: [B, E], [B, K, E] -> [B, (K+1)K/2]."""
    z = torch.cat([p.unsqueeze(1), t], dim=1)
    n = z.shape[1]
    li, lj = torch.tril_indices(n, n, offset=-1, device=z.device).unbind(0)
    return torch.bmm(z, z.transpose(1, 2))[:, li, lj]


class Dot(nn.Module):
    def __init__(self, dims: Dims, i: int):
        super().__init__()
        k = dims.dot_tokens
        self.proj = ElasticLinear(dims.dense_in_max(i), dims.emb)
        self.compress = ElasticLinear(dims.tok_in_max(i), k)
        self.lin = ElasticLinear((k + 1) * k // 2, dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        p = self.proj(x.dense, None, x.dense_cols)
        t = token_linear(self.compress, x.sparse, None, x.tok_cols)
        return self.ln(self.lin(pairwise_dots(p, t), io.dense_dim), io.dense_dim)

    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        return FixedDot(self.proj.extract(None, x_cols.dense_cols), self.compress.extract(None, x_cols.tok_cols),
                        self.lin.extract(io.dense_dim), self.ln.extract(io.dense_dim))

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        k = dims.dot_tokens
        p1, f1 = linear_cost(io.dense_in, dims.emb)
        p2, f2 = linear_cost(io.tok_in, k, rows=dims.emb)
        p3, f3 = linear_cost((k + 1) * k // 2, io.dense_dim)
        f_bmm = 2 * (k + 1) * (k + 1) * dims.emb
        return p1 + p2 + p3 + ln_params(io.dense_dim, dims.layernorm), f1 + f2 + f3 + f_bmm


class FixedDot(nn.Module):
    def __init__(self, proj: nn.Linear, compress: nn.Linear, lin: nn.Linear, ln: nn.Module):
        super().__init__()
        self.proj, self.compress, self.lin, self.ln = proj, compress, lin, ln

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        t = self.compress(sparse.transpose(1, 2)).transpose(1, 2)
        return self.ln(self.lin(pairwise_dots(self.proj(dense), t)))
