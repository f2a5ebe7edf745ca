"""Every baseline trains with the shared trainer and beats the best constant predictor on held-out rows."""

from __future__ import annotations

import pytest
import torch

from ctrnas.errors import RecipeError
from ctrnas.train.baselines import BASELINES, build_baseline
from ctrnas.train.baselines.common import fm_interaction
from ctrnas.train.baselines.xdeepfm import CIN
from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig
from ctrnas.train.metrics import constant_logloss
from ctrnas.train.trainer import Trainer


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baseline_beats_constant_predictor(name, learnable):
    schema, dense, ids, y, _ = learnable
    names = schema.sparse_names
    train = TensorBatches(dense[:5000], ids[:5000], y[:5000], names, 100, shuffle_seed=0)
    test = TensorBatches(dense[5000:], ids[5000:], y[5000:], names, 1000)
    model = build_baseline(name, schema, dim=8, seed=0)
    t = Trainer(model, TrainConfig(lr=0.05, batch_size=100, epochs=2, progress=False))
    t.fit(train)
    r = t.evaluate(test)
    const = constant_logloss(float(y[:5000].mean()))  # best constant fitted on the training rows
    assert r.logloss < const - 0.02, (name, r.logloss, const)
    assert r.auc > 0.65


def test_same_seed_same_weights_and_rng_untouched(learnable):
    schema = learnable[0]
    state = torch.random.get_rng_state()
    a, b = build_baseline("dcnv2", schema, seed=5), build_baseline("DCN-v2", schema, seed=5)
    assert torch.equal(state, torch.random.get_rng_state())
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    c = build_baseline("dcnv2", schema, seed=6)
    assert not torch.equal(a.stem.embedding_parameters()[0], c.stem.embedding_parameters()[0])


def test_unknown_baseline_is_a_recipe_error(learnable):
    with pytest.raises(RecipeError, match="unknown baseline"):
        build_baseline("wide&deep", learnable[0])


def test_fm_interaction_equals_sum_of_pairwise_dot_products():
    e = torch.randn(3, 5, 4, dtype=torch.float64)
    want = sum((e[:, i] * e[:, j]).sum(1) for i in range(5) for j in range(i + 1, 5))
    torch.testing.assert_close(fm_interaction(e), want)


def test_cin_layer_matches_its_definition():
    torch.manual_seed(0)
    cin = CIN(num_fields=3, layer_sizes=[2]).double()
    x0 = torch.randn(2, 3, 4, dtype=torch.float64)
    W = cin.layers[0].weight.view(2, 3, 3)  # [h, i (previous layer), j (field)]
    bias = cin.layers[0].bias
    want = torch.zeros(2, 2, 4, dtype=torch.float64)
    for h in range(2):
        for i in range(3):
            for j in range(3):
                want[:, h] += W[h, i, j] * x0[:, i] * x0[:, j]
        want[:, h] += bias[h]
    torch.testing.assert_close(cin(x0), torch.relu(want).sum(2))
