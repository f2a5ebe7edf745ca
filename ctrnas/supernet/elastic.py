"""Elastic layers: one max-size weight, used at a smaller width by slicing (the supernet's weight sharing).

Slicing rather than NASRec's masking: a width-d output is `W[:d] x + b[:d]`, and an input made of some
of the possible sources reads only their columns of W (`cols`). `benchmarks/supernet.py` measures this
against masking (full-width matmul, then zero the unused outputs) and slicing is the faster one; it is also
what makes an exported subnet small and bit-equal to its supernet path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def copied_linear(w: torch.Tensor, b: torch.Tensor | None) -> nn.Linear:
    """A standalone `nn.Linear` holding copies of weight `w` [out, in] and bias `b`."""
    if w.shape[1]:
        lin = nn.Linear(w.shape[1], w.shape[0], bias=b is not None, device=w.device, dtype=w.dtype)
    else:  # no inputs (a dataset without dense columns): torch warns when asked to draw an empty weight
        lin = nn.Linear(1, w.shape[0], bias=b is not None, device="meta", dtype=w.dtype).to_empty(device=w.device)
        lin.in_features, lin.weight = 0, nn.Parameter(w.new_empty(w.shape))
    with torch.no_grad():
        lin.weight.copy_(w)
        if b is not None:
            lin.bias.copy_(b)
    return lin


def init_linear(lin: nn.Linear) -> None:
    """NASRec's init (docs/nasrec.md): Xavier-uniform weight, zero bias."""
    nn.init.xavier_uniform_(lin.weight)
    if lin.bias is not None:
        nn.init.zeros_(lin.bias)


class ElasticLinear(nn.Linear):
    """A max-size `nn.Linear` that can run at `out` output rows over a subset `cols` of its inputs.

    `cols` is None (all inputs), an int k (the first k inputs) or a LongTensor of input indices.
    It stays an `nn.Linear`, so proxies that walk `nn.Linear` modules see it (unused slices get zero grads).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        init_linear(self)

    def reset_parameters(self) -> None:
        if self.weight.numel():
            super().reset_parameters()
        elif self.bias is not None:  # no inputs: skip the empty weight (torch warns), draw the bias as nn.Linear
            nn.init.uniform_(self.bias, 0.0, 0.0)

    def sliced(self, out: int | None = None, cols=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = self.weight if out is None else self.weight[:out]
        b = None if self.bias is None else (self.bias if out is None else self.bias[:out])
        if isinstance(cols, int):
            w = w[:, :cols]
        elif cols is not None:
            w = w.index_select(1, cols)
        return w, b

    def forward(self, x: torch.Tensor, out: int | None = None, cols=None) -> torch.Tensor:
        w, b = self.sliced(out, cols)
        return F.linear(x, w, b)

    def extract(self, out: int | None = None, cols=None) -> nn.Linear:
        """A standalone `nn.Linear` holding a copy of the slice."""
        return copied_linear(*self.sliced(out, cols))


class ElasticLayerNorm(nn.LayerNorm):
    """LayerNorm over the first `d` features with the first `d` affine parameters (elastic LN, as in OFA)."""

    def forward(self, x: torch.Tensor, d: int | None = None) -> torch.Tensor:
        if d is None:
            return super().forward(x)
        return F.layer_norm(x, (d,), self.weight[:d], self.bias[:d], self.eps)

    def extract(self, d: int | None = None) -> nn.LayerNorm:
        d = self.normalized_shape[0] if d is None else d
        ln = nn.LayerNorm(d, eps=self.eps, device=self.weight.device, dtype=self.weight.dtype)
        with torch.no_grad():
            ln.weight.copy_(self.weight[:d])
            ln.bias.copy_(self.bias[:d])
        return ln


class ElasticIdentity(nn.Module):
    """The stand-in for `ElasticLayerNorm` when the space has `layernorm: false`: no parameters."""

    def forward(self, x: torch.Tensor, d: int | None = None) -> torch.Tensor:
        return x

    def extract(self, d: int | None = None) -> nn.Module:
        return nn.Identity()


def elastic_layer_norm(d: int, on: bool = True) -> nn.Module:
    """`ElasticLayerNorm(d)`, or `ElasticIdentity()` when LayerNorm is off (`Dims.layernorm`)."""
    return ElasticLayerNorm(d) if on else ElasticIdentity()


def layer_norm(d: int, on: bool = True) -> nn.Module:
    """`nn.LayerNorm(d)`, or `nn.Identity()` when LayerNorm is off (`Dims.layernorm`)."""
    return nn.LayerNorm(d) if on else nn.Identity()


def linear_cost(n_in: int, n_out: int, rows: int = 1, bias: bool = True) -> tuple[int, int]:
    """(params, FLOPs) of a linear layer applied to `rows` vectors; FLOPs = 2 * multiply-adds, bias not counted."""
    return n_in * n_out + (n_out if bias else 0), 2 * rows * n_in * n_out


def ln_params(d: int, on: bool = True) -> int:
    """Parameters of a LayerNorm over d features (scale and shift); 0 when LayerNorm is off."""
    return 2 * d if on else 0
