"""DLRM's interaction (Naumov et al. 2019) as a dense op: z = the dense input (projected to E unless it is E
wide), the F raw embeddings; y = ReLU(LN_d(W [z | triu(Z Z^T)] + b)), Z = [z; e_1..e_F] ([B, F+1, E]).

The pairs are TorchRec's `InteractionArch` (upper triangle, dense vector first); the exported model uses
`PairDots`, the same pairs gathered with one `index_select` (TorchRec's advanced indexing and its backward
cost about 1 ms of a 16 ms DLRM-like step of 512 on one CPU thread). The linear layer after it is a DLRM top
MLP's first layer, so DLRM is a point of the space.

With narrower tables, an exported model whose only reader of the tokens is this op dots them in two parts
(`SplitPairDots`, `ctrnas.supernet.compact.split_dots`): the padded vectors' dot is that of their first
`base` columns plus that of the rest, which only the tables wider than `base` (and z) fill.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torchrec.models.dlrm import InteractionArch

from ctrnas.supernet.blocks.base import OpInput
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims
from ctrnas.supernet.stem import real_positions


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
    def cost(dims: Dims, io: BlockIO, dot_width: int | None = None) -> tuple[int, int]:
        """`dot_width`: the product's width when it runs split (`SplitPairDots`' base; its few elementwise
        dots are not counted, as no elementwise op is), else the common width."""
        p, f = linear_cost(dims.emb + _pairs(dims.n_sparse), io.dense_dim)
        if io.dense_in != dims.emb:
            p1, f1 = linear_cost(io.dense_in, dims.emb)
            p, f = p + p1, f + f1
        f_bmm = 2 * (dims.n_sparse + 1) * (dims.n_sparse + 1) * (dot_width or dims.emb)
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


def _split_cost(widths: Sequence[int], common: int, base: int) -> int:
    """Relative cost of `SplitPairDots` at `base`: rows^2 x width of its two products. A product narrower than
    16 columns ran no faster than at 16 on a CPU (measured: base 8 was slower than 16 on a mix of 8/16/32)."""
    rows, wide = len(widths) + 1, sum(w > base for w in widths)
    return rows * rows * max(base, 16) + (wide and (wide + 1) ** 2 * max(common - base, 16))


def split_base(widths: Sequence[int], common: int) -> int | None:
    """The base width of `SplitPairDots` for tables of `widths` at `common`: the table width of the least cost,
    or None when none costs under 3/4 of the padded product (the second product has costs of its own)."""
    best = min(sorted({w for w in widths if 0 < w < common}, reverse=True),
               key=lambda b: _split_cost(widths, common, b), default=None)
    if best is None or 4 * _split_cost(widths, common, best) > 3 * (len(widths) + 1) ** 2 * common:
        return None
    return best


class SplitPairDots(nn.Module):
    """`PairDots` of tables of `widths` padded to `common`, in two parts: one product over every row's first
    `base` columns, and the dots of the rest of z and of the tables wider than `base` (zeros elsewhere), added
    into their few pairs (multiplied elementwise: a batched product of a few rows cost 0.3 ms a step). The rows
    are laid out from the tables' lookups side by side (`EmbeddingStem.lookups`) with one `index_copy`, never
    padded to `common` first: cutting padded tokens cost what the product saves.
    Padded tokens [B, F, common] (what the exported dense part takes) are accepted too."""

    def __init__(self, widths: Sequence[int], common: int, base: int):
        super().__init__()
        widths = [int(w) for w in widths]
        if not 0 < base < common or any(w > common for w in widths):
            raise ValueError(f"base {base} must be under the common width {common}, tables {widths} at most it")
        self.common, self.base = common, base
        self.n = n = len(widths) + 1
        hi = [0] + [f + 1 for f, w in enumerate(widths) if w > base]  # rows of the second product, z first
        slot = {r: k for k, r in enumerate(hi)}
        self.n_hi = len(hi)
        self.width = n * base + self.n_hi * (common - base)
        # where each column of [z | lookups side by side] goes in [rows x base | hi rows x (common - base)]
        cols = [(r, c) for r, w in enumerate([common] + widths) for c in range(w)]
        place = [r * base + c if c < base else n * base + slot[r] * (common - base) + c - base for r, c in cols]
        i, j = torch.triu_indices(n, n, offset=1)
        a, b = torch.triu_indices(self.n_hi, self.n_hi, offset=1)
        self.register_buffer("place", torch.tensor(place, dtype=torch.long), persistent=False)
        self.register_buffer("pairs", i * n + j, persistent=False)
        self.register_buffer("hi_a", a, persistent=False)
        self.register_buffer("hi_b", b, persistent=False)
        self.register_buffer("hi_at", torch.tensor([hi[x] * n + hi[y] for x, y in zip(a.tolist(), b.tolist())],
                                                   dtype=torch.long), persistent=False)
        self.register_buffer("real", torch.tensor(real_positions(widths, common), dtype=torch.long),
                             persistent=False)

    def forward(self, dense_features: torch.Tensor, sparse_features: torch.Tensor) -> torch.Tensor:
        side = sparse_features
        if side.dim() == 3:  # padded tokens: their real positions are the lookups side by side
            side = side.flatten(1).index_select(1, self.real)
        u = torch.cat([dense_features, side], dim=1)
        buf = u.new_zeros(u.shape[0], self.width).index_copy_(1, self.place, u)  # in place: no clone of zeros
        n, base = self.n, self.base
        lo = buf[:, :n * base].view(-1, n, base)
        dots = torch.bmm(lo, lo.transpose(1, 2)).flatten(1)
        if self.n_hi > 1:
            hi = buf[:, n * base:].view(-1, self.n_hi, self.common - base)
            more = (hi.index_select(1, self.hi_a) * hi.index_select(1, self.hi_b)).sum(2)
            dots = dots.index_add(1, self.hi_at, more)
        return torch.cat([dense_features, dots.index_select(1, self.pairs)], dim=1)
