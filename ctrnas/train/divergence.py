"""Divergence detection for the trainer: stop a model whose training loss blew up, and say when and why.

A training is declared diverged at the first step where
  * the batch loss is NaN or infinite (the optimizer step is skipped, so the weights stay finite), or
  * the mean loss of the last `WINDOW` steps exceeds `factor` x ln 2, checked once the window is full and
    at the last step. ln 2 is the most any constant predictor can lose (its log loss is the label entropy,
    at most ln 2 at a CTR of 0.5) and what an untrained model with logits near 0 scores; so the test fires
    only at more than `factor` times the constant predictor's loss, whatever the CTR, and needs no data.

The default factor 100 (a mean log loss above 69) comes from watching chains of Dot-Product ops without
LayerNorm train on synthetic Avazu data (benchmarks/RESULTS.md, numerics section): a model whose loss
spiked to ~17 recovered to a useful model (0.435 vs 0.456 for the constant predictor), while those that
went past ~1e3 came back at best to the constant predictor's level, having lost what they had learnt. A
model that merely ends worse than the constant predictor is not stopped; model selection sets it aside.
"""

from __future__ import annotations

import math
from collections import deque

DEFAULT_FACTOR = 100.0
WINDOW = 20
REFERENCE = math.log(2.0)  # the largest log loss of a constant predictor


class DivergenceGuard:
    """Watches the per-step training loss; `check` returns the divergence record once it happens.

    `factor` None turns the mean-loss test off (non-finite losses still stop the training).
    """

    def __init__(self, factor: float | None = DEFAULT_FACTOR, window: int = WINDOW):
        self.factor, self.window = factor, window
        self.recent: deque[float] = deque(maxlen=window)

    def check(self, step: int, loss: float, last: bool = False) -> dict | None:
        """The divergence record of 1-based step `step` with batch loss `loss`, or None while it trains fine."""
        if not math.isfinite(loss):
            return {"step": step, "loss": None, "reason": f"non-finite training loss ({loss}) at step {step}"}
        self.recent.append(loss)
        if self.factor is None or (len(self.recent) < self.window and not last):
            return None
        mean = sum(self.recent) / len(self.recent)
        if mean > self.factor * REFERENCE:
            return {"step": step, "loss": mean,
                    "reason": f"mean training loss {mean:.4g} over the last {len(self.recent)} steps exceeds "
                              f"{self.factor:g} x ln 2 (the most a constant predictor loses) at step {step}"}
        return None
