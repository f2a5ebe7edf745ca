"""AutoInt+ (Song et al. 2019): multi-head self-attention over feature tokens, plus a deep MLP."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ctrnas.data.schema import DatasetSchema
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.baselines.common import flat_input, mlp_head


class InteractingLayer(nn.Module):
    """One AutoInt interacting layer (AutoInt Eq. 5-8): per head h, a^h_m = sum_k softmax_k(<W_q e_m, W_k e_k>)
    W_v e_k; heads are concatenated and e'_m = ReLU(a_m + W_res e_m).

    Written with batched matmuls rather than nn.MultiheadAttention: for 2 heads of width 8 over ~40 tokens,
    torch's CPU flash-attention kernel was ~10x slower than this (profiled, torch 2.13).
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.res = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v           # [B, heads, T, d/heads]
        return torch.relu(att.transpose(1, 2).reshape(b, t, d) + self.res(x))


class AutoIntPlus(nn.Module):
    """Tokens: the F field embeddings and one token per dense feature (x_i * v_i, AutoInt Eq. 2);
    `layers` interacting layers, flattened to a logit, added to an MLP on [x_dense | e] (the "+")."""

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None, layers: int = 3,
                 heads: int = 2, hidden: Sequence[int] = (400, 400)):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim, row_cap)
        self.dense_tokens = nn.Parameter(torch.randn(schema.dense_dim, dim) * 0.01)
        self.layers = nn.Sequential(*[InteractingLayer(dim, heads) for _ in range(layers)])
        self.att_out = nn.Linear((schema.dense_dim + len(schema.sparse)) * dim, 1)
        self.deep = mlp_head(schema.dense_dim + dim * len(schema.sparse), hidden)

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        e = self.stem(kjt)
        tokens = torch.cat([dense.unsqueeze(2) * self.dense_tokens, e], dim=1)
        att = self.att_out(self.layers(tokens).flatten(1)).squeeze(1)
        return att + self.deep(flat_input(dense, e)).squeeze(1)
