"""Dense->sparse merge: the dense output projected to m tokens of size E, appended to the sparse output."""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.elastic import ElasticLinear, linear_cost


class Merge(nn.Module):
    """tokens = reshape(W[:, :d] dense + b, [B, m, E])."""

    def __init__(self, dims):
        super().__init__()
        self.m, self.emb = dims.merge_tokens, dims.emb
        self.lin = ElasticLinear(dims.max_dense, dims.merge_tokens * dims.emb)

    def forward(self, dense: torch.Tensor) -> torch.Tensor:
        return self.lin(dense, None, dense.shape[1]).view(dense.shape[0], self.m, self.emb)

    def extract(self, d: int) -> nn.Module:
        return FixedMerge(self.lin.extract(None, d), self.m, self.emb)

    @staticmethod
    def cost(dims, d: int) -> tuple[int, int]:
        return linear_cost(d, dims.merge_tokens * dims.emb)


class FixedMerge(nn.Module):
    def __init__(self, lin: nn.Linear, m: int, emb: int):
        super().__init__()
        self.lin, self.m, self.emb = lin, m, emb

    def forward(self, dense: torch.Tensor) -> torch.Tensor:
        return self.lin(dense).view(dense.shape[0], self.m, self.emb)
