"""FLOPs of one forward pass per sample, counted by `torch.utils.flop_counter.FlopCounterMode`.

Counts matmul/conv/attention FLOPs (2 per multiply-add); embedding lookups and element-wise ops count 0,
as in the usual FLOPs tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from ctrnas.proxies.base import Proxy, forward, register


@register("flops")
@dataclass(frozen=True)
class Flops(Proxy):
    """Forward FLOPs per sample on the first batch."""

    needs_labels = False

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model, "eval")
        batch = batches[0]
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            out = forward(model, batch)
        n = int(out.shape[0]) if out.ndim else 1
        total = float(counter.get_total_flops())
        per_module = {k: float(sum(v.values())) for k, v in counter.get_flop_counts().items()}
        return total / n, {"flops_per_sample": total / n, "flops_batch": total}, {"per_module": per_module,
                                                                               "batch_size": n}
