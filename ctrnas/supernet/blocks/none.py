"""The `none` sparse op (NASRec's zero op): a block without a sparse output of its own ([B, 0, E])."""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput


class NoTokens(nn.Module):
    def __init__(self, dims, i: int):
        super().__init__()

    def forward(self, io, x: OpInput) -> torch.Tensor:
        return x.raw[:, :0]

    def extract(self, io, x_cols) -> nn.Module:
        return FixedNoTokens()

    @staticmethod
    def cost(dims, io) -> tuple[int, int]:
        return 0, 0


class FixedNoTokens(nn.Module):
    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return sparse[:, :0]  # `sparse` is the stem's tokens here: only their batch size and E are used
