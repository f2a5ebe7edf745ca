"""Supernet warm-up: fraction 0 trains nothing, 0.01 sees exactly the first 1% of the train rows, and the
relative full-supernet schedule decays as specified."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch import nn

from ctrnas.data.dataset import load_schema, split_files
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.batches import TensorBatches, dataset_batches
from ctrnas.train.config import TrainConfig, WarmupConfig
from ctrnas.train.warmup import full_probability, step_choice, warmup


class RecordingSupernet(nn.Module):
    """Stands in for the supernet: remembers every dense row and every (full, arch) it was called with."""

    def __init__(self, schema):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim=2)
        self.head = nn.Linear(schema.dense_dim + 2 * len(schema.sparse), 1)
        self.seen, self.calls = [], []

    def forward(self, dense, kjt, arch=None, full=False):
        if self.training:
            self.seen.append(dense.detach().clone())
            self.calls.append((full, arch))
        return self.head(torch.cat([dense, self.stem(kjt).flatten(1)], 1)).squeeze(1)


@dataclasses.dataclass(frozen=True)
class Draw:
    """A stand-in arch: what a space without `emb_dims` draws has no width of its own."""
    value: int
    emb_dim: int | None = None


class CountingSpace:
    def sample(self, rng):
        return Draw(int(rng.integers(1_000_000)))


CFG = TrainConfig(batch_size=64, progress=False)


def test_full_probability_decays_linearly_to_zero():
    assert full_probability(0, 10) == 1.0
    assert full_probability(5, 10) == 0.5
    assert full_probability(10, 10) == 0.0 and full_probability(50, 10) == 0.0
    assert full_probability(0, 0) == 0.0


def test_schedule_is_relative_to_the_warmup_length():
    # With S = 0.2 x steps, the share of full-supernet steps is ~ the integral of (1 - t/S) over [0, S] = S/2,
    # i.e. ~10% of the steps whatever the warm-up length (NASRec's fixed S would make it ~100% at 1%).
    space = CountingSpace()
    for steps in (700, 7000):
        S = 0.2 * steps
        full = sum(step_choice(space, 0, t, S)[0] for t in range(steps))
        assert abs(full / steps - 0.1) < 4 * math.sqrt(0.1 / steps)
        assert not any(step_choice(space, 0, t, S)[0] for t in range(math.ceil(S), steps))


def test_fraction_zero_leaves_weights_untouched(learnable):
    schema, dense, ids, y, _ = learnable
    model = RecordingSupernet(schema)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    src = TensorBatches(dense, ids, y, schema.sparse_names, 64, fraction=0.0)
    summary = warmup(model, CountingSpace(), src, CFG, WarmupConfig(fraction=0.0))
    assert summary["steps"] == 0 and model.seen == []
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


def test_warmup_uses_exactly_the_first_percent_of_the_train_split(synthetic_dir):
    schema = load_schema(synthetic_dir)
    files = split_files(synthetic_dir, "train")
    table = pa.concat_tables([pq.read_table(f, columns=list(schema.dense)) for f in files])
    n_train = table.num_rows
    n = math.ceil(0.01 * n_train)
    want = np.stack([table.column(c).to_numpy()[:n] for c in schema.dense], 1)

    model = RecordingSupernet(schema)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    src = dataset_batches(synthetic_dir, "train", CFG.batch_size, shuffle=True, seed=0, fraction=0.01)
    summary = warmup(model, CountingSpace(), src, CFG, WarmupConfig(fraction=0.01))
    got = torch.cat(model.seen).numpy()
    assert summary["rows"] == n == got.shape[0]
    assert summary["steps"] == math.ceil(n / CFG.batch_size) == len(model.calls)
    key = lambda a: a[np.lexsort(a.T[::-1])]  # noqa: E731 - compare as multisets of rows
    assert np.array_equal(key(got), key(want))
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    # the full supernet is trained only inside the first 20% of steps; the rest are sampled subnets
    horizon = 0.2 * summary["steps"]
    assert all(arch is not None for full, arch in model.calls[math.ceil(horizon):])


def test_real_supernet_warmup_trains_sampled_subnets(learnable):
    sn = pytest.importorskip("ctrnas.supernet.supernet", reason="supernet not available")
    from ctrnas.space.space import get_space

    schema, dense, ids, y, _ = learnable
    space = get_space({"base": "nasrec-small", "num_blocks": 2, "dense_dims": [8, 16], "sparse_tokens": [2, 4]})
    torch.manual_seed(0)
    net = sn.Supernet(schema, space)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    src = TensorBatches(dense, ids, y, schema.sparse_names, 64, fraction=0.1)
    summary = warmup(net, space, src, TrainConfig(batch_size=64, progress=False), WarmupConfig(fraction=0.1))
    assert summary["steps"] == math.ceil(600 / 64) and summary["full_supernet_steps"] <= math.ceil(0.2 * 10)
    assert math.isfinite(summary["train_logloss"])
    assert any(not torch.equal(v, before[k]) for k, v in net.state_dict().items())
