"""What every supernet op shares: its inputs, index helpers, and the standalone-op signature."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import torch
from torch import nn


class OpInput(NamedTuple):
    """A block's inputs on the subnet path: concatenated dense [B, Din] / sparse [B, T, E] and binary inputs.

    `dense_cols`/`tok_cols` say which inputs of the max-size weights they are: None (all), int k (the
    first k) or a LongTensor of indices.
    """

    dense: torch.Tensor | None
    sparse: torch.Tensor
    left: torch.Tensor | None
    right: torch.Tensor | None
    dense_cols: object
    tok_cols: object
    raw: torch.Tensor | None = None  # the stem's tokens [B, F, E], for ops that read the raw embeddings


def as_index(cols: tuple[int, ...] | None, device: torch.device | str = "cpu"):
    """None -> None; 0..k-1 -> k (a slice is cheaper than a gather); else a LongTensor on `device`."""
    if cols is None:
        return None
    if cols == tuple(range(len(cols))):
        return len(cols)
    return torch.tensor(cols, dtype=torch.long, device=device)


def pad_to(x: torch.Tensor, width: int) -> torch.Tensor:
    """Zero-pad the last axis of [B, w] to `width` (NASRec pads the narrower input of a binary op)."""
    return torch.nn.functional.pad(x, (0, width - x.shape[-1])) if x.shape[-1] < width else x


def token_linear(lin, x: torch.Tensor, *args) -> torch.Tensor:
    """Apply `lin` over the token axis of [B, T, E] -> [B, T', E] (EFC, NASRec `linear-3d`)."""
    return lin(x.transpose(1, 2), *args).transpose(1, 2)


class SupernetOp(Protocol):
    """The contract of an op's supernet class (`BLOCKS[key]`, docs/ops.md): the supernet, export and the
    counters call only these. Shapes: B rows, E the embedding width, T tokens.

    Example::

        op = BLOCKS["fc"](dims, i)                  # max-size weights of block i
        y = op(io, x)                               # x: an OpInput; y: [B, io.dense_dim]
        fixed = op.extract(io, x_cols)              # fixed(x.dense, x.sparse, x.left, x.right) equals y
        params, flops = BLOCKS["fc"].cost(dims, io)
    """

    def __init__(self, dims: Any, i: int) -> None:
        """Args:
            dims: the space's largest widths (`ctrnas.supernet.layout.Dims`: `dense_in_max(i)`, `tok_in_max(i)`,
                `max_dense`, `layernorm`, ...); the weights are made this large and sliced per subnet.
            i: the block's number, 1-based.
        """

    def forward(self, io: Any, x: OpInput) -> torch.Tensor:
        """The op on the subnet path.

        Args:
            io: the block's resolved shapes (`ctrnas.supernet.layout.BlockIO`: `dense_dim`, `tokens`,
                `dense_args`, ...); `dense_args` is empty in the full-supernet warm-up (run the op at its largest).
            x: the chosen inputs: dense [B, Din], sparse [B, T, E], left / right [B, w] for binary ops, raw
                [B, F, E]; `dense_cols` / `tok_cols` say which inputs of the max-size weights they are.

        Returns:
            A dense op: [B, io.dense_dim] (the input width for an op that keeps it, `OpSpec.passthrough`);
            a sparse op: [B, io.tokens, E].
        """

    def extract(self, io: Any, x_cols: Any) -> nn.Module:
        """A standalone copy of this block's slices (`x_cols.dense_cols` / `tok_cols`: the inputs read).

        Returns:
            A module with `forward(dense, sparse, left, right)` equal to `forward` on those inputs, that
            TorchScript compiles.
        """

    @staticmethod
    def cost(dims: Any, io: Any) -> tuple[int, int]:
        """Returns:
            (parameters, FLOPs) of the op at these shapes, counted analytically (FLOPs: 2 x the multiply-adds of
            the matrix products).
        """
