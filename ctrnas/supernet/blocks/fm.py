"""FM on a block's sparse output, projected to the dense width and added to the dense output (NASRec `deep_fm`)."""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.elastic import ElasticLinear, elastic_layer_norm, linear_cost, ln_params


def fm_interaction(x: torch.Tensor) -> torch.Tensor:
    """Rendle's FM second-order term per embedding channel: 0.5 ((sum_t x_t)^2 - sum_t x_t^2), [B, T, E] -> [B, E]."""
    return 0.5 * (x.sum(dim=1).pow(2) - x.pow(2).sum(dim=1))


class FM(nn.Module):
    """y = LN_d(W[:d] fm(x) + b[:d])."""

    def __init__(self, dims):
        super().__init__()
        self.lin = ElasticLinear(dims.emb, dims.max_dense)
        self.ln = elastic_layer_norm(dims.max_dense, dims.layernorm)

    def forward(self, sparse: torch.Tensor, d: int) -> torch.Tensor:
        return self.ln(self.lin(fm_interaction(sparse), d), d)

    def extract(self, d: int) -> nn.Module:
        return FixedFM(self.lin.extract(d), self.ln.extract(d))

    @staticmethod
    def cost(dims, d: int) -> tuple[int, int]:
        p, f = linear_cost(dims.emb, d)
        return p + ln_params(d, dims.layernorm), f


class FixedFM(nn.Module):
    def __init__(self, lin: nn.Linear, ln: nn.Module):
        super().__init__()
        self.lin, self.ln = lin, ln

    def forward(self, sparse: torch.Tensor) -> torch.Tensor:
        return self.ln(self.lin(fm_interaction(sparse)))
