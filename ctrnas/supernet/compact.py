"""Exported models with narrower tables run their crosses on the real positions only.

A narrower table's token is zero-padded to the common width (docs/embedding-search.md). A Cross over the
stem's tokens flattened (DCN-v2's x0) sees zeros at the padded positions and keeps them zero: x_{l+1} =
x0 * (W_l x_l + b_l) + x_l is 0 wherever x0 and x_l are, and the weights of those positions never reach an
output. So the exported model drops them: its cross keeps the rows and columns of the real positions, and
its cost goes with the sum of the table widths instead of fields x common width (a same-bytes mix with
32-wide tables then trains as fast as uniform 16). The slicing runs after the model's init, so the compact
model starts, and trains, as the padded one would; an unprojected output (`out: raw`) is put back at its
positions in zeros, so later blocks and the head read the padded layout as before.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.blocks.cross import FixedCross
from ctrnas.supernet.blocks.crossnets import (ScriptableCrossNet, ScriptableLowRankCrossNet,
                                              ScriptableLowRankMixtureCrossNet)


def compacts(io, widths: list[int], common: int) -> bool:
    """Block `io` (a resolved `BlockIO`) is a Cross reading the stem's tokens alone while some table is
    narrower than `common`: its x0 then has structural zeros to drop."""
    return bool(io.dense_ops) and io.dense_ops[0] == "cross" and tuple(io.sparse_idx) == (0,) \
        and any(w != common for w in widths)


def flat_keep(dense_in: int, widths: list[int], common: int) -> torch.Tensor:
    """Positions in x0 = [dense (dense_in) | tokens [F, common] flattened] that a table fills."""
    toks = [dense_in + f * common + c for f, w in enumerate(widths) for c in range(w)]
    return torch.tensor(list(range(dense_in)) + toks, dtype=torch.long)


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


class BandedInteraction(nn.Module):
    """TorchRec's `InteractionArch` (the dense vector and the F tokens, all pairwise dots, upper triangle) for
    tokens of per-field `widths` padded to `common`: the dot of two fields runs over their common columns only.

    Rows are taken widest first, so the fields wider than a width are a prefix: columns [0, w_1) are dotted over
    every kept field, [w_1, w_2) over the fields at least w_2 wide, and so on (the dense vector takes part in
    every band). The same pairs in the same order, at the cost of the sum over pairs of their narrower width.
    """

    def __init__(self, widths: list[int], common: int):
        super().__init__()
        order = sorted(range(len(widths)), key=lambda f: -widths[f])
        row = {f: k + 1 for k, f in enumerate(order)}  # row 0 is the dense vector
        self.register_buffer("order", torch.tensor(order, dtype=torch.long), persistent=False)
        self.rows, self.lo, self.hi = [0], [0], [0]  # bands; the first entry is a typed placeholder, skipped
        lo = 0
        for w in sorted({w for w in widths if w}):
            self.rows.append(1 + sum(1 for x in widths if x >= w))
            self.lo.append(lo)
            self.hi.append(min(w, common))
            lo = w
        self.n = len(widths) + 1
        i, j = torch.triu_indices(self.n, self.n, offset=1).tolist()
        at = [0] + [row[f] for f in range(len(widths))]
        self.register_buffer("pairs", torch.tensor([at[a] * self.n + at[b] for a, b in zip(i, j)],
                                                   dtype=torch.long), persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        t = torch.cat([dense.unsqueeze(1), sparse.index_select(1, self.order)], dim=1)
        z = t.new_zeros(t.shape[0], self.n, self.n)
        for k in range(1, len(self.rows)):
            rows, lo, hi = self.rows[k], self.lo[k], self.hi[k]
            band = t[:, :rows, lo:hi]
            dots = torch.bmm(band, band.transpose(1, 2))
            z = z + torch.nn.functional.pad(dots, [0, self.n - rows, 0, self.n - rows])
        return torch.cat([dense, z.flatten(1).index_select(1, self.pairs)], dim=1)

    def flops(self) -> int:
        """FLOPs per example of the dots (2 x multiply-adds, as `torch.utils.flop_counter` counts bmm)."""
        return sum(2 * r * r * (h - l) for r, l, h in zip(self.rows[1:], self.lo[1:], self.hi[1:]))
