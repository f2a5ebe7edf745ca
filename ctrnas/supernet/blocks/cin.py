"""CIN: xDeepFM's Compressed Interaction Network (Lian et al. 2018, Eq. 6-8) as a dense op.

X^0 = [z; e_1..e_F] ([B, m, E], m = F + 1): the dense input projected to E (unless it is E wide, as DLRM's
interaction does) and the raw embeddings. Layer k makes `maps` feature maps,
X^k_h = ReLU(sum_{i,j} W^k_{h,(i,j)} (X^{k-1}_i o X^0_j) + b^k_h), a 1x1 convolution over the (i, j) pairs
(ReLU as the project's xDeepFM baseline has it); each layer is sum-pooled over E and the pooled vectors of
the `depth` layers are concatenated (p, depth x maps wide); then y = ReLU(LN_d(P p + c)).

Weight sharing: layer k holds its weights at the largest `maps`; a subnet uses the first `maps` rows and,
from layer 2 on, the columns of the (h, j) pairs of its first `maps` maps. Layers are shared by depth
(depth k uses the first k), and P reads the columns of the pooled maps the subnet makes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ctrnas.space.ops import op_spec
from ctrnas.supernet.blocks.base import OpInput
from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params
from ctrnas.supernet.layout import BlockIO, Dims

MAX_DEPTH = max(op_spec("cin").arg_options("depth"))
MAX_MAPS = max(op_spec("cin").arg_options("maps"))


def _shape(io: BlockIO) -> tuple[int, int]:
    a = dict(io.dense_args)
    return (a["depth"], a["maps"]) if a else (MAX_DEPTH, MAX_MAPS)  # the full supernet: the largest


def cin_layers(x0: torch.Tensor, weights: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """The CIN over x0 [B, m, E] with one (W [H', H m], b [H']) per layer -> the pooled maps [B, sum H']."""
    x0 = x0.transpose(1, 2)  # [B, E, m]: each layer is one broadcast product and one contiguous matmul
    b, e, m = x0.shape
    xk, pooled = x0, []
    for w, bias in weights:
        z = (xk.unsqueeze(3) * x0.unsqueeze(2)).reshape(b, e, -1)  # [B, E, H m], the (h, j) pairs
        xk = torch.relu(F.linear(z, w, bias))  # [B, E, H']
        pooled.append(xk.sum(dim=1))
    return torch.cat(pooled, dim=1)


class CIN(nn.Module):
    def __init__(self, dims: Dims, i: int):
        super().__init__()
        self.emb = dims.emb
        self.m = m = dims.n_sparse + 1  # the tokens of X^0: z and the F embeddings
        self.proj = ElasticLinear(dims.dense_in_max(i), dims.emb)
        self.layers = nn.ModuleList(ElasticLinear((m if k == 0 else MAX_MAPS) * m, MAX_MAPS)
                                    for k in range(MAX_DEPTH))
        self.lin = ElasticLinear(MAX_DEPTH * MAX_MAPS, dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def _weights(self, depth: int, maps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for k in range(depth):
            w, b = self.layers[k].sliced(maps, None if k == 0 else maps * self.m)
            assert b is not None
            out.append((w, b))
        return out

    def _pooled_cols(self, depth: int, maps: int) -> torch.Tensor | int:
        if maps == MAX_MAPS:
            return depth * maps
        cols = [k * MAX_MAPS + h for k in range(depth) for h in range(maps)]
        return torch.tensor(cols, dtype=torch.long, device=self.lin.weight.device)

    def _z(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        return x.dense if io.dense_in == self.emb else self.proj(x.dense, None, x.dense_cols)

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        depth, maps = _shape(io)
        x0 = torch.cat([self._z(io, x).unsqueeze(1), x.raw], dim=1)
        p = cin_layers(x0, self._weights(depth, maps))
        return torch.relu(self.ln(self.lin(p, io.dense_dim, self._pooled_cols(depth, maps)), io.dense_dim))

    @torch.no_grad()
    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        depth, maps = _shape(io)
        proj = None if io.dense_in == self.emb else self.proj.extract(None, x_cols.dense_cols)
        layers = nn.ModuleList()
        for w, b in self._weights(depth, maps):
            lin = nn.Linear(w.shape[1], w.shape[0], device=w.device, dtype=w.dtype)
            lin.weight.copy_(w)
            lin.bias.copy_(b)
            layers.append(lin)
        return FixedCIN(proj, layers, self.lin.extract(io.dense_dim, self._pooled_cols(depth, maps)),
                        self.ln.extract(io.dense_dim))

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        depth, maps = _shape(io)
        m, e = dims.n_sparse + 1, dims.emb
        p, f = linear_cost(depth * maps, io.dense_dim)
        if io.dense_in != e:
            p1, f1 = linear_cost(io.dense_in, e)
            p, f = p + p1, f + f1
        prev = m
        for _ in range(depth):
            pk, fk = linear_cost(prev * m, maps, rows=e)  # the 1x1 convolution at every embedding position
            p, f = p + pk, f + fk + e * prev * m  # and the outer product's multiplies
            prev = maps
        return p + ln_params(io.dense_dim, dims.layernorm), f


class FixedCIN(nn.Module):
    def __init__(self, proj: nn.Linear | None, layers: nn.ModuleList, lin: nn.Linear, ln: nn.Module):
        super().__init__()
        self.proj, self.layers, self.lin, self.ln = proj, layers, lin, ln

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        proj = self.proj
        z = dense if proj is None else proj(dense)
        weights: list[tuple[torch.Tensor, torch.Tensor]] = []
        for layer in self.layers:
            weights.append((layer.weight, layer.bias))
        return torch.relu(self.ln(self.lin(cin_layers(torch.cat([z.unsqueeze(1), sparse], dim=1), weights))))
