"""Small learnable CTR data built in memory: labels from a known logistic model with one interaction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctrnas.data.schema import DatasetSchema, SparseFeature


def make_learnable(rows: int, seed: int = 0, n_dense: int = 3, cards=(20, 30, 10, 15)):
    """Dense N(0,1) features and uniform ids; p_true = sigmoid(w.x + per-id effects + an id x id interaction)."""
    rng = np.random.default_rng(seed)
    schema = DatasetSchema(label="label", dense=tuple(f"I{i}" for i in range(n_dense)),
                           sparse=tuple(SparseFeature(f"C{j}", c) for j, c in enumerate(cards)))
    dense = rng.standard_normal((rows, n_dense)).astype(np.float32)
    ids = np.stack([rng.integers(0, c, rows) for c in cards], axis=1).astype(np.int64)
    w = rng.normal(0, 1.0, n_dense)
    effects = [rng.normal(0, 1.0, c) for c in cards]
    inter = rng.normal(0, 1.5, (cards[0], cards[1]))
    z = dense @ w - 1.0 + sum(e[ids[:, j]] for j, e in enumerate(effects)) + inter[ids[:, 0], ids[:, 1]]
    p = 1.0 / (1.0 + np.exp(-z))
    y = (rng.random(rows) < p).astype(np.float32)
    return schema, torch.from_numpy(dense), torch.from_numpy(ids), torch.from_numpy(y), p


@pytest.fixture(scope="session")
def learnable():
    return make_learnable(6000)


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory):
    """A small synthetic Criteo-profile dataset folder (p_true and bayes_logloss in meta.json)."""
    synthetic = pytest.importorskip("ctrnas.data.synthetic", reason="synthetic generator not available")
    out = tmp_path_factory.mktemp("syn")
    synthetic.generate("criteo", 30_000, 7, out, chunk_rows=10_000)
    return out
