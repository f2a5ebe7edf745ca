"""What every supernet op shares: its inputs, index helpers, and the standalone-op signature."""

from __future__ import annotations

from typing import NamedTuple

import torch


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
