"""Small helpers for tests and benchmarks: a schema and random batches that follow the batch contract."""

from __future__ import annotations

import numpy as np
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.schema import DatasetSchema, SparseFeature


def make_schema(n_dense: int = 3, cards=(50, 7, 30, 11)) -> DatasetSchema:
    """A schema with `n_dense` dense features I0.. and one sparse feature C<i> per cardinality."""
    return DatasetSchema("label", tuple(f"I{i}" for i in range(n_dense)),
                         tuple(SparseFeature(f"C{i}", int(c)) for i, c in enumerate(cards)))


def make_batch(schema: DatasetSchema, batch: int = 8, seed: int = 0):
    """(dense [B, n_dense] float32, KJT with one id per row per feature, labels [B] float32), from `seed`."""
    rng = np.random.default_rng(seed)
    dense = torch.as_tensor(rng.normal(size=(batch, schema.dense_dim)), dtype=torch.float32)
    ids = np.concatenate([rng.integers(0, c, size=batch) for c in schema.cardinalities])
    kjt = KeyedJaggedTensor.from_lengths_sync(keys=list(schema.sparse_names), values=torch.as_tensor(ids),
                                              lengths=torch.ones(batch * len(schema.sparse), dtype=torch.int32))
    labels = torch.as_tensor(rng.integers(0, 2, size=batch), dtype=torch.float32)
    return dense, kjt, labels


def train_side_by_side(models, schema: DatasetSchema, steps: int, lr: float = 0.05, check=None) -> None:
    """Adagrad steps of `models` on the same batches of 32 (seeds 10, 11, ...); `check(models)` runs after
    each backward, before the step (e.g. to compare gradients)."""
    opts = [torch.optim.Adagrad(m.parameters(), lr=lr) for m in models]
    for step in range(steps):
        dense, kjt, labels = make_batch(schema, batch=32, seed=10 + step)
        for m, opt in zip(models, opts):
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(m(dense, kjt), labels).backward()
        if check is not None:
            check(models)
        for opt in opts:
            opt.step()
