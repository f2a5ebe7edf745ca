"""Cross: DCN-v2's cross layers (Wang et al. 2021, Eq. 1) over the block's inputs, projected to its width.

x0 = [dense inputs | sparse input tokens flattened] (n wide), x_{l+1} = x0 * (W_l x_l + b_l) + x_l for
`depth` layers (0: none, x_depth = x0), with W_l full rank (n x n), low rank (U_l V_l^T, rank r) or a
mixture of low-rank experts (DCN-v2 Eq. 3); then y = ReLU(LN_d(P x_depth + c)), the first deep layer of
DCN-v2's stacked form (`out: proj`), or y = x_depth itself (`out: raw`, n wide, over the raw inputs only),
which a `concat` in the last block puts beside a deep tower's output before the head: DCN-v2's parallel
form, whose deep tower starts with a depth-0 Cross (a deep layer over x0).
Exported models hold TorchRec's `CrossNet`, `LowRankCrossNet` or `LowRankMixtureCrossNet` (subclassed only
to script) with the sliced weights.

Weight sharing: the low-rank forms hold weights over the block's max-size input and slice the rows/columns
of the chosen inputs and the first r ranks; layers are shared by depth (depth k uses the first k). The
full-rank form is allowed on the raw inputs only (see the op table), so its n x n weights are stem-sized.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ctrnas.space.ops import CROSS_EXPERTS, op_spec
from ctrnas.supernet.blocks.base import OpInput
from ctrnas.supernet.blocks.crossnets import (ScriptableCrossNet, ScriptableLowRankCrossNet,
                                              ScriptableLowRankMixtureCrossNet)
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims

MAX_DEPTH = max(op_spec("cross").arg_options("depth"))
MAX_RANK = max(op_spec("cross").arg_options("rank"))


def _xavier(*shape) -> nn.Parameter:
    return nn.Parameter(nn.init.xavier_normal_(torch.empty(*shape)))  # TorchRec's crossnet init


def _as_long(cols, full: int, device) -> torch.Tensor:
    if cols is None:
        return torch.arange(full, device=device)
    if isinstance(cols, int):
        return torch.arange(cols, device=device)
    return cols


def x0_cols(dims: Dims, i: int, dense_cols, tok_cols, device="cpu") -> torch.Tensor | None:
    """Positions of a subnet's x0 in block i's max-size x0 [dense layout | token layout flattened]."""
    if dense_cols is None and tok_cols is None:
        return None
    d = _as_long(dense_cols, dims.dense_in_max(i), device)
    t = _as_long(tok_cols, dims.tok_in_max(i), device)
    e = torch.arange(dims.emb, device=device)
    return torch.cat([d, (dims.dense_in_max(i) + t[:, None] * dims.emb + e).flatten()])


def _take(w: torch.Tensor, dim: int, cols) -> torch.Tensor:
    return w if cols is None else w.index_select(dim, cols)


def _args(io: BlockIO) -> dict:
    return dict(io.dense_args)


class Cross(nn.Module):
    def __init__(self, dims: Dims, i: int):
        super().__init__()
        self.dims, self.i = dims, i
        n = dims.dense_in_max(i) + dims.tok_in_max(i) * dims.emb  # block i's max-size x0
        n0 = dims.n_dense + dims.n_sparse * dims.emb  # the raw inputs' x0 (full rank)
        L, r, k = MAX_DEPTH, MAX_RANK, CROSS_EXPERTS
        self.full_w = nn.ParameterList(_xavier(n0, n0) for _ in range(L))
        self.full_b = nn.Parameter(torch.zeros(L, n0))
        self.low_w = nn.ParameterList(_xavier(n, r) for _ in range(L))  # TorchRec's W (n x r)
        self.low_v = nn.ParameterList(_xavier(r, n) for _ in range(L))  # and V (r x n)
        self.low_b = nn.Parameter(torch.zeros(L, n))
        self.mix_u = nn.ParameterList(_xavier(k, n, r) for _ in range(L))
        self.mix_v = nn.ParameterList(_xavier(k, r, n) for _ in range(L))
        self.mix_c = nn.ParameterList(_xavier(k, r, r) for _ in range(L))
        self.mix_b = nn.Parameter(torch.zeros(L, n))
        self.gates = nn.Parameter(nn.init.xavier_uniform_(torch.empty(k, n)))  # one row per expert, all layers
        self.proj = ElasticLinear(n, dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def _cols(self, x: OpInput):
        return x0_cols(self.dims, self.i, x.dense_cols, x.tok_cols, self.proj.weight.device)

    def _full(self, x0: torch.Tensor, depth: int) -> torch.Tensor:
        xl = x0
        for l in range(depth):
            xl = x0 * (F.linear(xl, self.full_w[l]) + self.full_b[l]) + xl
        return xl

    def _low(self, x0, cols, depth: int, r: int) -> torch.Tensor:
        xl = x0
        for l in range(depth):
            xv = F.linear(xl, _take(self.low_v[l][:r], 1, cols))
            xl = x0 * (F.linear(xv, _take(self.low_w[l][:, :r], 0, cols)) + _take(self.low_b[l], 0, cols)) + xl
        return xl

    def _mix(self, x0, cols, depth: int, r: int) -> torch.Tensor:
        xl, gates = x0, _take(self.gates, 1, cols)
        for l in range(depth):
            g = torch.softmax(F.linear(xl, gates), dim=1)  # [B, K]
            u, v = _take(self.mix_u[l][:, :, :r], 1, cols), _take(self.mix_v[l][:, :r], 2, cols)
            h = torch.relu(torch.einsum("krn,bn->bkr", v, xl))
            h = torch.relu(torch.einsum("krs,bks->bkr", self.mix_c[l][:, :r, :r], h))
            experts = x0.unsqueeze(1) * (torch.einsum("knr,bkr->bkn", u, h) + _take(self.mix_b[l], 0, cols))
            xl = torch.einsum("bkn,bk->bn", experts, g) + xl
        return xl

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        x0 = torch.cat([x.dense, x.sparse.flatten(1)], dim=1)
        cols = self._cols(x)
        a = _args(io)
        if not a:  # the full supernet: every form at full depth and rank, summed
            out = self._low(x0, cols, MAX_DEPTH, MAX_RANK) + self._mix(x0, cols, MAX_DEPTH, MAX_RANK)
            if x0.shape[1] == self.full_w[0].shape[0] and io.dense_idx == (0,) and io.sparse_idx == (0,):
                out = out + self._full(x0, MAX_DEPTH)
        elif a["form"] == "full":
            out = self._full(x0, a["depth"])
        elif a["form"] == "lowrank":
            out = self._low(x0, cols, a["depth"], a["rank"])
        else:
            out = self._mix(x0, cols, a["depth"], a["rank"])
        if a and a["out"] == "raw":
            return out
        return torch.relu(self.ln(self.proj(out, io.dense_dim, cols), io.dense_dim))

    @torch.no_grad()
    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        a = _args(io)
        cols = x0_cols(self.dims, self.i, x_cols.dense_cols, x_cols.tok_cols, self.proj.weight.device)
        n, depth, r = io.dense_in + io.tok_in * self.dims.emb, a["depth"], a["rank"]
        if depth == 0:
            net = nn.Identity()  # no cross layer: x_L = x0
        elif a["form"] == "full":
            net = ScriptableCrossNet(n, depth)
            for l in range(depth):
                net.kernels[l].copy_(self.full_w[l])
                net.bias[l].copy_(self.full_b[l].unsqueeze(1))
        elif a["form"] == "lowrank":
            net = ScriptableLowRankCrossNet(n, depth, low_rank=r)
            for l in range(depth):
                net.W_kernels[l].copy_(_take(self.low_w[l][:, :r], 0, cols))
                net.V_kernels[l].copy_(_take(self.low_v[l][:r], 1, cols))
                net.bias[l].copy_(_take(self.low_b[l], 0, cols))
        else:
            net = ScriptableLowRankMixtureCrossNet(n, depth, num_experts=CROSS_EXPERTS, low_rank=r)
            for l in range(depth):
                net.U_kernels[l].copy_(_take(self.mix_u[l][:, :, :r], 1, cols))
                net.V_kernels[l].copy_(_take(self.mix_v[l][:, :r], 2, cols))
                net.C_kernels[l].copy_(self.mix_c[l][:, :r, :r])
                net.bias[l].copy_(_take(self.mix_b[l], 0, cols).unsqueeze(1))
            gates = _take(self.gates, 1, cols)
            for k in range(CROSS_EXPERTS):
                net.gates[k].weight.copy_(gates[k:k + 1])
        if a["out"] == "raw":
            return FixedCross(net, nn.Identity(), nn.Identity(), relu=False)
        return FixedCross(net, self.proj.extract(io.dense_dim, cols), self.ln.extract(io.dense_dim))

    @staticmethod
    def cost(dims: Dims, io: BlockIO, tok_width: int | None = None) -> tuple[int, int]:
        # tok_width: the tokens' flattened width when an export drops padded positions (ctrnas.supernet.compact)
        n, a = io.dense_in + (io.tok_in * dims.emb if tok_width is None else tok_width), _args(io)
        forms = [(a["form"], a["depth"], a.get("rank"))] if a else \
            [("lowrank", MAX_DEPTH, MAX_RANK), ("mixture", MAX_DEPTH, MAX_RANK)]
        raw = bool(a) and a["out"] == "raw"
        p, f = (0, 0) if raw else linear_cost(n, io.dense_dim)
        for form, depth, r in forms:
            if form == "full":
                p, f = p + depth * (n * n + n), f + depth * 2 * n * n
            elif form == "lowrank":
                p, f = p + depth * (2 * n * r + n), f + depth * 4 * n * r
            elif depth > 0:  # K experts of V (r x n), C (r x r), U (n x r) per layer; K gate rows shared
                k = CROSS_EXPERTS
                p += depth * (k * (2 * n * r + r * r) + n) + k * n
                f += depth * k * (4 * n * r + 2 * r * r + 4 * n)  # + gates and the gated sum: 4 n per expert
        return p + (0 if raw else ln_params(io.dense_dim, dims.layernorm)), f


class FixedCross(nn.Module):
    """An exported Cross. With `keep` (a model with narrower tables, `ctrnas.supernet.compact`) it runs on the
    positions of x0 that are not structural zeros and, for `out: raw`, puts x_L back at them in `width` zeros."""

    def __init__(self, cross: nn.Module, proj: nn.Module, ln: nn.Module, relu: bool = True,
                 keep: torch.Tensor | None = None, width: int = 0, scatter: bool = False):
        super().__init__()
        self.cross, self.proj, self.ln, self.relu = cross, proj, ln, relu
        self.register_buffer("keep", torch.empty(0, dtype=torch.long) if keep is None else keep, persistent=False)
        self.width, self.scatter = width, scatter  # x0's padded width when compacted, else 0

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        x0 = torch.cat([dense, sparse.flatten(1)], dim=1)
        if self.width > 0:
            x0 = x0.index_select(1, self.keep)
        y = self.ln(self.proj(self.cross(x0)))
        if self.scatter:
            y = y.new_zeros(y.shape[0], self.width).index_copy(1, self.keep, y)
        return torch.relu(y) if self.relu else y
