"""Exported models with narrower tables run their crosses on the real positions only.

A narrower table's token is zero-padded to the common width (docs/embedding-search.md). A Cross over the
stem's tokens flattened (DCN-v2's x0) sees zeros at the padded positions and keeps them zero: x_{l+1} =
x0 * (W_l x_l + b_l) + x_l is 0 wherever x0 and x_l are, and the weights of those positions never reach an
output. So the exported model drops them: its cross keeps the rows and columns of the real positions, and
its cost goes with the sum of the table widths instead of fields x common width (a same-bytes mix with
32-wide tables then trains as fast as uniform 16). The slicing runs after the model's init, so the compact
model starts, and trains, as the padded one would; an unprojected output (`out: raw`) is put back at its
positions in zeros, so later blocks and the head read the padded layout as before.

DLRM's dots (`split_dots`): when the model's only reader of the tokens is DLRM's interaction, the stem hands it
the lookups side by side and the interaction dots them in two narrower products (`SplitPairDots`), the same
logits; the padded product at the common width was what made a mix with 32-wide tables cost uniform 32.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.cross import FixedCross
from ctrnas.supernet.blocks.crossnets import (ScriptableCrossNet, ScriptableLowRankCrossNet,
                                              ScriptableLowRankMixtureCrossNet)
from ctrnas.space import reads_raw
from ctrnas.supernet.blocks.interaction import SplitPairDots, split_base
from ctrnas.supernet.stem import real_positions


def compacts(io, widths: list[int], common: int) -> bool:
    """Block `io` (a resolved `BlockIO`) is a Cross reading the stem's tokens alone while some table is
    narrower than `common`: its x0 then has structural zeros to drop."""
    return bool(io.dense_ops) and io.dense_ops[0] == "cross" and tuple(io.sparse_idx) == (0,) \
        and any(w != common for w in widths)


def flat_keep(dense_in: int, widths: list[int], common: int) -> torch.Tensor:
    """Positions in x0 = [dense (dense_in) | tokens [F, common] flattened] that a table fills."""
    return torch.tensor(list(range(dense_in)) + [dense_in + p for p in real_positions(widths, common)],
                        dtype=torch.long)


def x0_dims(name: str, t: torch.Tensor) -> tuple[int, ...]:
    """The dimensions of a FixedCross's tensor (`name` within it) that run over x0's positions: what
    `compact_cross` slices (so `FixedCross.keep`, or every position when it is not compacted, indexes them)."""
    part = name.split(".")
    if part[0] == "proj":
        return (1,) if part[-1] == "weight" and t.dim() == 2 else ()
    if part[0] != "cross" or len(part) < 2:
        return ()
    return {"kernels": (0, 1), "W_kernels": (0,), "bias": (0,), "U_kernels": (1,), "V_kernels": (t.dim() - 1,),
            "gates": (1,) if part[-1] == "weight" else ()}.get(part[1], ())


@torch.no_grad()
def _slice_net(net: nn.Module, keep: torch.Tensor) -> nn.Module:
    n = len(keep)
    if isinstance(net, ScriptableCrossNet):
        out = ScriptableCrossNet(n, len(net.kernels))
        for new, old in zip(out.kernels, net.kernels):
            new.copy_(old[keep][:, keep])
    elif isinstance(net, ScriptableLowRankCrossNet):
        out = ScriptableLowRankCrossNet(n, len(net.W_kernels), low_rank=net._low_rank)
        for new, old in zip(out.W_kernels, net.W_kernels):
            new.copy_(old[keep])
        for new, old in zip(out.V_kernels, net.V_kernels):
            new.copy_(old[:, keep])
    elif isinstance(net, ScriptableLowRankMixtureCrossNet):
        out = ScriptableLowRankMixtureCrossNet(n, len(net.U_kernels), num_experts=net._num_experts,
                                               low_rank=net._low_rank)
        for new, old in zip(out.U_kernels, net.U_kernels):
            new.copy_(old[:, keep])
        for new, old in zip(out.V_kernels, net.V_kernels):
            new.copy_(old[:, :, keep])
        for new, old in zip(out.C_kernels, net.C_kernels):
            new.copy_(old)
        for new, old in zip(out.gates, net.gates):
            new.weight.copy_(old.weight[:, keep])
    else:  # depth 0: the identity
        return net
    for new, old in zip(out.bias, net.bias):  # [n] (low rank) or [n, 1]
        new.copy_(old[keep])
    return out.to(keep.device)


@torch.no_grad()
def compact_cross(fixed: FixedCross, dense_in: int, widths: list[int], common: int) -> FixedCross:
    """`fixed` (an exported Cross over dense inputs and the stem's tokens) on the real positions only: the
    same outputs, the padded positions' weights left out."""
    device = fixed.keep.device
    keep = flat_keep(dense_in, widths, common).to(device)
    width = dense_in + len(widths) * common
    proj = fixed.proj
    if isinstance(proj, nn.Linear):
        lin = nn.Linear(len(keep), proj.out_features, bias=proj.bias is not None, device=device,
                        dtype=proj.weight.dtype)
        lin.weight.copy_(proj.weight[:, keep])
        if proj.bias is not None:
            lin.bias.copy_(proj.bias)
        proj = lin
    raw = isinstance(fixed.proj, nn.Identity)  # out: raw (x_L itself)
    return FixedCross(_slice_net(fixed.cross, keep), proj, fixed.ln, relu=fixed.relu, keep=keep, width=width,
                      scatter=raw)


class NoTokensOf(nn.Module):
    """The `none` sparse op's [B, 0, width] whatever layout the stem's output has (`FixedNoTokens` keeps its
    input's last dimension, which the lookups side by side do not have)."""

    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor) -> torch.Tensor:
        return sparse.new_zeros(sparse.shape[0], 0, self.width)


def split_dots(blocks, widths: list[int], common: int, field_fm: bool) -> int | None:
    """The base width of `SplitPairDots` for a subnet's resolved blocks (its plan's `BlockIO`s) when DLRM's
    interaction is the only reader of the stem's tokens (another op reading them only takes their batch size:
    `none`) and some table is narrower than `common`, else None; the export and `count_flops` both ask it."""
    if field_fm or not blocks or not any(w != common for w in widths):
        return None
    dots = False
    for io in blocks:
        if 0 in io.sparse_idx:
            return None
        if io.dense_ops and reads_raw(io.dense_ops[0]):
            if io.dense_ops[0] != "interaction":
                return None
            dots = True
        if io.sparse_ops and reads_raw(io.sparse_ops[0]) and io.sparse_ops[0] != "none":
            return None
    return split_base(widths, common) if dots else None


def use_split_dots(model, widths: list[int], common: int, base: int) -> None:
    """`model` (an ExportedModel that `split_dots` allows) dotting its tables' lookups side by side: no
    parameter changes, only how the activations are laid out."""
    for blk in model.net.blocks:
        if blk.dense_raw:
            blk.dense_op.inter = SplitPairDots(widths, common, base).to(model.net.head.weight.device)
        if blk.sparse_raw:
            blk.sparse_op = NoTokensOf(common)
    model.side_by_side = True
