"""Training in bfloat16 matrix products on the CPU: a forward for the trainer, float32 everywhere else.

`bfloat16_forward(forward)` runs `forward` under CPU autocast while the model trains: matrix products
(linear layers, the cross network, attention, the DLRM dots) and their backward run in bfloat16, which
cores with AVX-512 BF16 or AMX do 4-5x faster than float32 (benchmarks/step_profile.py). The weights, their
gradients, Adagrad's sums and the embedding lookups stay float32, and the logits come back as float32 for
the loss. In `eval()` mode nothing changes: evaluation, `predict` and the exported `model.pt2` run in float32.
It changes the numbers (bfloat16 keeps 8 bits of mantissa), so it is a recipe choice measured on quality, not
a free speed-up.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torchrec.datasets.utils import Batch

ForwardFn = Callable[[nn.Module, Batch, int], torch.Tensor]


def bfloat16_supported() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (otherwise bfloat16 is slower than float32)."""
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def bfloat16_forward(forward: ForwardFn, device_type: str = "cpu") -> ForwardFn:
    """`forward` with its matrix products in bfloat16 while the model trains (see the module docstring);
    `device_type` is the model's ("cpu" or "cuda")."""

    def run(model: nn.Module, batch: Batch, step: int) -> torch.Tensor:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=model.training):
            return forward(model, batch, step).float()

    return run
