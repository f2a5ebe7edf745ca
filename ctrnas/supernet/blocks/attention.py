"""Attention: project the token axis to s tokens + LN, multi-head self-attention with residual and LN,
feed-forward E -> E -> E with residual and LN (NASRec `transformer`, docs/nasrec.md).

With `layernorm: false` only the LN after the projection goes (the identity); the two residual LNs stay,
as in NASRec's Transformer, whose `use_layernorm` gates only `_proj_ln`."""

from __future__ import annotations

import copy

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput, token_linear
from ctrnas.supernet.elastic import ElasticLinear, init_linear, layer_norm, linear_cost, ln_params


class _Encoder(nn.Module):
    """x -> LN(x + MHA(x)) -> LN(. + FFN(.)); width-independent, so shared as is and copied on export."""

    def __init__(self, emb: int, heads: int, layernorm: bool = True):
        super().__init__()
        self.ln0 = layer_norm(emb, layernorm)  # the op's own LN: the identity when LayerNorm is off
        self.mha = nn.MultiheadAttention(emb, heads, batch_first=True)
        # NASRec starts this LN's scale at 0.17, "tuned manually" for its data (docs/nasrec.md); we keep
        # the standard 1.0 rather than carry a dataset-specific constant.
        self.ln1 = nn.LayerNorm(emb)
        self.ff1, self.ff2 = nn.Linear(emb, emb), nn.Linear(emb, emb)
        self.ln2 = nn.LayerNorm(emb)
        for lin in (self.ff1, self.ff2):
            init_linear(lin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln0(x)
        x = self.ln1(x + self.mha(x, x, x, need_weights=False)[0])
        return self.ln2(x + self.ff2(torch.relu(self.ff1(x))))


class Attention(nn.Module):
    def __init__(self, dims, i: int):
        super().__init__()
        self.proj = ElasticLinear(dims.tok_in_max(i), dims.max_tokens)
        self.enc = _Encoder(dims.emb, dims.heads, dims.layernorm)

    def forward(self, io, x: OpInput) -> torch.Tensor:
        return self.enc(token_linear(self.proj, x.sparse, io.tokens, x.tok_cols))

    def extract(self, io, x_cols) -> nn.Module:
        return FixedAttention(self.proj.extract(io.tokens, x_cols.tok_cols), copy.deepcopy(self.enc))

    @staticmethod
    def cost(dims, io) -> tuple[int, int]:
        e, s = dims.emb, io.tokens
        p_proj, f_proj = linear_cost(io.tok_in, s, rows=e)
        p_mha = 4 * e * e + 4 * e  # in-projection (3E x E + 3E) and out-projection (E x E + E)
        f_mha = 2 * s * e * 3 * e + 2 * s * e * e + 2 * 2 * s * s * e  # projections + QK^T + AV
        p_ff, f_ff = linear_cost(e, e, rows=s)
        return p_proj + p_mha + 2 * p_ff + ln_params(e, dims.layernorm) + 2 * ln_params(e), f_proj + f_mha + 2 * f_ff


class FixedAttention(nn.Module):
    def __init__(self, proj: nn.Linear, enc: _Encoder):
        super().__init__()
        self.proj, self.enc = proj, enc

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return self.enc(self.proj(sparse.transpose(1, 2)).transpose(1, 2))
