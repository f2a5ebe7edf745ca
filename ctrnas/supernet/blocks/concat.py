"""Concat: the block's dense inputs side by side, unchanged (the identity op; last block only).

The head, one linear layer, then reads several blocks' outputs at once: with an unprojected Cross and a
deep tower as inputs, that is DCN-v2's parallel form (Wang et al. 2021), logit = w . [x_L | h] + b.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.base import OpInput
from ctrnas.supernet.layout import BlockIO, Dims


class Concat(nn.Module):
    def __init__(self, dims: Dims, i: int):
        super().__init__()

    def forward(self, io: BlockIO, x: OpInput) -> torch.Tensor:
        return x.dense

    def extract(self, io: BlockIO, x_cols) -> nn.Module:
        return FixedConcat()

    @staticmethod
    def cost(dims: Dims, io: BlockIO) -> tuple[int, int]:
        return 0, 0


class FixedConcat(nn.Module):
    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return dense
