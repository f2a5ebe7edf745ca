"""Streaming binary-classification metrics: log loss and ROC AUC in bounded memory.

Log loss is exact: per-example losses are computed from the logits in float64 and summed.

AUC is exact (scikit-learn's `roc_auc_score` on the kept predictions) while the split has at most
`exact_limit` rows. Past that, the buffer is dropped and AUC comes from a fixed histogram of the
predicted probabilities (`bins` equal-width bins on [0, 1]), memory O(bins) whatever the row count.
Ranking inside a bin is unknown; the histogram counts within-bin positive/negative pairs as ties (half
a concordant pair), so its error is at most half the fraction of positive-negative pairs that share a
bin, `auc_max_error` = sum_b pos_b * neg_b / (2 * P * N). That bound is computed and reported.

A model that outputs NaN or infinite logits has no meaningful metrics: those rows are counted, kept out of
the sums (so nothing overflows or crashes scikit-learn), and the result's numbers are NaN with a `reason`;
JSON writers turn them into null (`strict_json`).
"""

from __future__ import annotations

import logging

from dataclasses import dataclass

import json
import math

import numpy as np
import torch


@dataclass(frozen=True)
class MetricResult:
    """Metrics of one split; `auc_max_error` is 0 when AUC was computed exactly. `reason` says why the
    numbers are missing (NaN): the model's predictions were not finite, or (AUC only) the split has one class."""

    rows: int
    logloss: float
    auc: float
    auc_max_error: float
    ctr: float
    mean_prediction: float
    reason: str | None = None

    def to_dict(self) -> dict:
        d = {"rows": self.rows, "logloss": self.logloss, "auc": self.auc, "auc_max_error": self.auc_max_error,
             "ctr": self.ctr, "mean_prediction": self.mean_prediction}
        return {**d, "reason": self.reason} if self.reason else d

    @classmethod
    def missing(cls, reason: str, rows: int = 0) -> "MetricResult":
        """No metrics (e.g. the model diverged and was not evaluated): every number NaN, with `reason`."""
        nan = math.nan
        return cls(rows, nan, nan, nan, nan, nan, reason)


class StreamingMetrics:
    """Accumulate (logits, labels) batch by batch; `result()` gives log loss and AUC."""

    def __init__(self, exact_limit: int = 2_000_000, bins: int = 1 << 20):
        self.exact_limit, self.bins = exact_limit, bins
        self.rows = 0
        self.loss_sum = 0.0
        self.label_sum = 0.0
        self.pred_sum = 0.0
        self.non_finite = 0  # rows whose logit was NaN or infinite
        self._probs: list[np.ndarray] | None = []
        self._labels: list[np.ndarray] | None = []
        self._pos = self._neg = None  # histogram, allocated only once the buffer overflows

    def update(self, logits: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray) -> None:
        z = np.asarray(logits.detach().cpu() if isinstance(logits, torch.Tensor) else logits, dtype=np.float64)
        y = np.asarray(labels.detach().cpu() if isinstance(labels, torch.Tensor) else labels, dtype=np.float64)
        z, y = z.reshape(-1), y.reshape(-1)
        ok = np.isfinite(z)
        if not ok.all():
            self.non_finite += int(z.size - ok.sum())
            z, y = z[ok], y[ok]
        # BCE from logits, softplus(z) - y z, written to stay finite for large |z|.
        self.loss_sum += float(np.sum(np.logaddexp(0.0, z) - y * z))
        p = _sigmoid(z)
        self.rows += z.size
        self.label_sum += float(y.sum())
        self.pred_sum += float(p.sum())
        if self._probs is not None and self.rows <= self.exact_limit:
            self._probs.append(p)
            self._labels.append(y)
            return
        if self._probs is not None:  # too many rows to keep: move the buffer into the histogram
            for bp, by in zip(self._probs, self._labels):
                self._bin(bp, by)
            self._probs = self._labels = None
        self._bin(p, y)

    def _bin(self, p: np.ndarray, y: np.ndarray) -> None:
        if self._pos is None:
            self._pos = np.zeros(self.bins, dtype=np.int64)
            self._neg = np.zeros(self.bins, dtype=np.int64)
        idx = np.minimum((p * self.bins).astype(np.int64), self.bins - 1)
        pos = y > 0.5
        self._pos += np.bincount(idx[pos], minlength=self.bins)
        self._neg += np.bincount(idx[~pos], minlength=self.bins)

    def result(self) -> MetricResult:
        if self.non_finite:
            total = self.rows + self.non_finite
            return MetricResult.missing(f"non-finite predictions on {self.non_finite} of {total} rows", total)
        n = self.rows
        if n == 0:
            nan = float("nan")
            return MetricResult(0, nan, nan, nan, nan, nan)
        if self._probs is not None:
            P = int(sum(int((y > 0.5).sum()) for y in self._labels))
        else:
            P = int(self._pos.sum())
        reason = None
        if P == 0 or P == n:  # AUC needs both classes: null in JSON, with the reason beside it
            auc, err = float("nan"), 0.0
            reason = f"AUC undefined: all {n} labels are {'0' if P == 0 else '1'} (a single-class split)"
            logging.getLogger(__name__).warning(reason)
        elif self._probs is not None:
            from sklearn.metrics import roc_auc_score  # here: scikit-learn costs 100 MB to import

            auc, err = float(roc_auc_score(np.concatenate(self._labels), np.concatenate(self._probs))), 0.0
        else:
            auc, err = histogram_auc(self._pos, self._neg)
        return MetricResult(n, self.loss_sum / n, auc, err, self.label_sum / n, self.pred_sum / n, reason)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-z) without overflow warnings for large negative z (e^-z is capped; the result is 0 either way)."""
    return 1.0 / (1.0 + np.exp(-np.maximum(z, -700.0)))


def histogram_auc(pos: np.ndarray, neg: np.ndarray) -> tuple[float, float]:
    """AUC from per-bin positive/negative counts (bins in increasing score), and its worst-case error.

    AUC = P(s+ > s-) + P(s+ = s-)/2 over positive/negative pairs (Mann-Whitney U / (P N)), counting pairs
    in one bin as ties. The true AUC differs by at most sum_b pos_b neg_b / (2 P N).
    """
    pos = pos.astype(np.float64)
    neg = neg.astype(np.float64)
    P, N = pos.sum(), neg.sum()
    neg_below = np.cumsum(neg) - neg
    concordant = float(np.sum(pos * neg_below))
    same_bin = float(np.sum(pos * neg))
    return (concordant + 0.5 * same_bin) / (P * N), same_bin / (2.0 * P * N)


def constant_logloss(ctr: float) -> float:
    """Log loss of the best constant predictor (the label entropy): -(c ln c + (1-c) ln(1-c))."""
    if ctr <= 0.0 or ctr >= 1.0:
        return 0.0
    return float(-(ctr * np.log(ctr) + (1 - ctr) * np.log(1 - ctr)))


def finite_or_none(v):
    """`v` with every non-finite float (also inside dicts, lists, numpy scalars) replaced by None."""
    if isinstance(v, dict):
        return {str(k): finite_or_none(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite_or_none(x) for x in v]
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def strict_json(obj, indent: int | None = 1) -> str:
    """JSON text with NaN/inf written as null, so strict readers (and other languages) can load it."""
    return json.dumps(finite_or_none(obj), indent=indent, allow_nan=False)
