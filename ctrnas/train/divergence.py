"""Divergence detection for the trainer: stop a model whose training loss blew up, and say when and why.

A training is declared diverged at the first step where
  * the batch loss is NaN or infinite (the optimizer step is skipped, so the weights stay finite), or
  * the mean loss of the last `WINDOW` steps exceeds `factor` x the reference loss, checked once the window
    is full and at the last step. The reference is the larger of the constant predictor's log loss (the
    label entropy H(ctr), what always predicting the CTR scores) and ln 2 (what an untrained model with
    logits near 0 scores whatever the CTR: without this floor a low-CTR dataset would flag fresh models).
The default factor 100 (a mean log loss above ~57 on Criteo, CTR 0.26, and ~69 on Avazu) comes from
watching chains of Dot-Product ops without LayerNorm train on synthetic Avazu data (benchmarks/RESULTS.md,
numerics section): a model whose loss spiked to ~17 recovered to a useful model (0.423 vs 0.456 for the
constant predictor), while those that went past ~1e3 came back at best to the constant predictor's level,
having lost what they had learnt. A model that merely ends worse than the constant predictor is not
stopped; model selection sets it aside on validation.
"""

from __future__ import annotations

import math
from collections import deque

import torch

from ctrnas.train.metrics import constant_logloss

DEFAULT_FACTOR = 100.0
WINDOW = 20


def reference_loss(constant: float) -> float:
    """The loss the divergence factor multiplies: max(constant predictor's log loss, ln 2)."""
    return max(constant, math.log(2.0))


class DivergenceGuard:
    """Watches the per-step training loss; `check` returns the divergence record once it happens.

    `constant_loss` is the constant predictor's log loss on the training data when the caller knows it
    (the training split's CTR); otherwise it is estimated from the labels seen so far (add-one smoothed).
    `factor` None turns the loss-ratio test off (non-finite losses still stop the training).
    """

    def __init__(self, factor: float | None = DEFAULT_FACTOR, constant_loss: float | None = None,
                 window: int = WINDOW):
        self.factor, self.constant_loss, self.window = factor, constant_loss, window
        self.recent: deque[float] = deque(maxlen=window)
        self.positives = 0.0
        self.rows = 0

    def observe_labels(self, labels: torch.Tensor) -> None:
        if self.constant_loss is None:
            y = labels.reshape(-1)
            y = y[y >= 0]  # padding rows of a sharded batch carry negative labels
            self.positives += float(y.sum())
            self.rows += int(y.numel())

    def reference(self) -> float:
        c = self.constant_loss
        if c is None:
            c = constant_logloss((self.positives + 1.0) / (self.rows + 2.0))
        return reference_loss(c)

    def check(self, step: int, loss: float, last: bool = False) -> dict | None:
        """The divergence record of 1-based step `step` with batch loss `loss`, or None while it trains fine."""
        if not math.isfinite(loss):
            return {"step": step, "loss": None, "reason": f"non-finite training loss ({loss}) at step {step}"}
        self.recent.append(loss)
        if self.factor is None or (len(self.recent) < self.window and not last):
            return None
        mean, ref = sum(self.recent) / len(self.recent), self.reference()
        if mean > self.factor * ref:
            return {"step": step, "loss": mean,
                    "reason": f"mean training loss {mean:.4g} over the last {len(self.recent)} steps exceeds "
                              f"{self.factor:g} x {ref:.4f} (max of the constant predictor's log loss and ln 2) "
                              f"at step {step}"}
        return None
