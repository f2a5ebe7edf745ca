"""Train/val/test assignment of rows, streamed in file order.

stratified  The AutoCTR/NASRec split (docs/nasrec.md, Data): the test folds of
            `sklearn.model_selection.StratifiedKFold(n_splits=10, shuffle=True, random_state=2018)`, folds
            0-7 -> train, 8 -> val, 9 -> test. Reproduced *exactly* without the label vector: sklearn gives
            the i-th row of class k (classes numbered by first appearance) entry i of
            `shuffle(repeat(arange(10), allocation[:, k]))`, where `allocation` is the round-robin count of
            sorted labels per fold and the shuffles use one `RandomState(2018)`, class 0 first. Only the
            class counts are needed up front (a first pass), then each class's fold array (int8: 1 byte
            per row, e.g. 46 MB for Criteo Kaggle) is consumed in order.
random      Each row independently: u ~ U[0,1) from numpy's PCG64(seed), drawn in row order (so the result
            does not depend on how rows are chunked); train if u < r0, val if u < r0 + r1, else test.
order       By position (time/file order): the first round(N*r0) rows train, the next round(N*r1) val,
            the rest test (N = accepted rows, from a first pass).
"""

from __future__ import annotations

import numpy as np

from ctrnas.data.dataset import SPLITS

TRAIN, VAL, TEST = 0, 1, 2


def stratified_allocation(class_counts: list[int], n_splits: int) -> np.ndarray:
    """allocation[i, k]: rows of class k in test fold i, as sklearn's round robin over the sorted labels."""

    def upto(x: int, i: int) -> int:  # how many j in [0, x) with j % n_splits == i
        return max(0, (x - i + n_splits - 1) // n_splits)

    bounds = np.concatenate([[0], np.cumsum(class_counts)]).astype(np.int64)
    return np.array([[upto(int(bounds[k + 1]), i) - upto(int(bounds[k]), i) for k in range(len(class_counts))]
                     for i in range(n_splits)], dtype=np.int64)


class StratifiedFolds:
    """Streams sklearn StratifiedKFold(n_splits, shuffle=True, random_state=seed) test folds of binary labels."""

    def __init__(self, class_counts: list[int], n_splits: int = 10, seed: int = 2018):
        """`class_counts`: rows per class, classes in order of first appearance in the label stream."""
        rng = np.random.RandomState(seed)
        alloc = stratified_allocation(class_counts, n_splits)
        self._folds = []
        for k in range(len(class_counts)):
            folds = np.repeat(np.arange(n_splits, dtype=np.int8), alloc[:, k])
            rng.shuffle(folds)  # the draws depend only on the length, so int8 gives sklearn's permutation
            self._folds.append(folds)
        self._next = [0] * len(class_counts)

    def folds(self, class_index: np.ndarray) -> np.ndarray:
        """Test fold of each next row, given its class index (0 = the class that appeared first)."""
        out = np.empty(len(class_index), dtype=np.int8)
        for k, folds in enumerate(self._folds):
            sel = class_index == k
            m = int(sel.sum())
            out[sel] = folds[self._next[k]:self._next[k] + m]
            self._next[k] += m
        return out


class LabelOrder:
    """Tracks the class order of first appearance (sklearn's encoding) and class counts of a label stream."""

    def __init__(self):
        self.first: list[float] = []
        self.counts: dict[float, int] = {}

    def add(self, labels: np.ndarray) -> None:
        vals, idx, cnt = np.unique(labels, return_index=True, return_counts=True)
        for v, i, c in sorted(zip(vals.tolist(), idx.tolist(), cnt.tolist()), key=lambda t: t[1]):
            if v not in self.counts:
                self.first.append(v)
                self.counts[v] = 0
            self.counts[v] += c

    def class_index(self, labels: np.ndarray) -> np.ndarray:
        out = np.zeros(len(labels), dtype=np.int8)
        for k, v in enumerate(self.first):
            out[labels == v] = k
        return out

    def ordered_counts(self) -> list[int]:
        return [self.counts[v] for v in self.first]


class Splitter:
    """Assigns split codes (TRAIN/VAL/TEST) to consecutive chunks of labels."""

    def __init__(self, method: str, ratios: tuple[float, float, float], seed: int,
                 labels_seen: LabelOrder | None = None, total_rows: int | None = None, n_folds: int = 10):
        self.method, self.ratios, self.seed = method, ratios, seed
        self.position = 0
        if method == "stratified":
            fold_ratios = [r * n_folds for r in ratios]
            if any(abs(f - round(f)) > 1e-9 for f in fold_ratios):
                raise ValueError(f"stratified split needs ratios in multiples of 1/{n_folds}, got {ratios}")
            cut = np.cumsum([round(f) for f in fold_ratios])
            self._fold_split = np.searchsorted(cut, np.arange(n_folds), side="right").astype(np.int8)
            self._order = labels_seen
            self._folds = StratifiedFolds(labels_seen.ordered_counts(), n_folds, seed)
        elif method == "random":
            self._rng = np.random.Generator(np.random.PCG64(seed))
        elif method == "order":
            n_train = round(total_rows * ratios[0])
            n_val = round(total_rows * (ratios[0] + ratios[1])) - n_train
            self._bounds = np.array([n_train, n_train + n_val], dtype=np.int64)
        else:
            raise ValueError(f"unknown split method {method!r}")

    def assign(self, labels: np.ndarray) -> np.ndarray:
        """Split code of each next row."""
        n = len(labels)
        if self.method == "stratified":
            out = self._fold_split[self._folds.folds(self._order.class_index(labels))]
        elif self.method == "random":
            u = self._rng.random(n)
            out = np.searchsorted(np.cumsum(self.ratios[:2]), u, side="right").astype(np.int8)
        else:
            pos = np.arange(self.position, self.position + n)
            out = np.searchsorted(self._bounds, pos, side="right").astype(np.int8)
        self.position += n
        return out

    def describe(self) -> dict:
        d = {"method": self.method, "ratios": list(self.ratios), "seed": self.seed}
        if self.method == "stratified":
            d["folds"] = {s: np.flatnonzero(self._fold_split == i).tolist() for i, s in enumerate(SPLITS)}
            d["reproduces"] = (f"sklearn StratifiedKFold(n_splits={len(self._fold_split)}, shuffle=True, "
                               f"random_state={self.seed}) test folds on the accepted rows' labels")
        return d
