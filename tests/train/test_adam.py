"""The Adam that benchmarks/protocol.py measured against the trainer's Adagrad (a Trainer subclass there, since
Adam lost and the project ships Adagrad only): its updates against Adam's formula by hand (lazy on the embedding
rows), torch's Adam with dense tables, and the same training loop (resume to identical numbers)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig, early_stopping
from tests.helpers.bench_scripts import load_script
from tests.train.test_trainer import Tiny

AdamTrainer = load_script("protocol").adam_trainer()


def _model(schema, seed=0):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Tiny(schema)


def _adam(**kw):
    base = dict(lr=0.01, eps=1e-8, batch_size=100, progress=False, eval_batch_size=1000,
                schedule="constant", clip_norm=None, embedding_update="sparse")  # lazy Adam needs sparse rows
    return TrainConfig(**{**base, **kw})


def _grads(model, batch) -> dict[str, torch.Tensor]:
    """Each parameter's gradient of the mean log loss on `batch`, dense (rows not looked up: zero)."""
    model.zero_grad(set_to_none=True)
    logits = model(batch.dense_features, batch.sparse_features)
    F.binary_cross_entropy_with_logits(logits.reshape(-1), batch.labels.reshape(-1)).backward()
    return {n: (p.grad.to_dense() if p.grad.is_sparse else p.grad).clone() for n, p in model.named_parameters()}


def test_two_adam_steps_follow_the_formula(learnable):
    # Kingma & Ba's Adam: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr m/(1 - b1^t) / (sqrt(v/(1 - b2^t))
    # + eps). On the tables it is lazy (a row not looked up in a step keeps its value and its moments) and in the
    # paper's second form, eps added before the bias correction: p -= lr sqrt(1 - b2^t)/(1 - b1^t) m/(sqrt(v) + eps)
    schema, dense, ids, y, _ = learnable
    # three small batches: some rows are first looked up in a later step, some never
    src = TensorBatches(dense[:30], ids[:30], y[:30], schema.sparse_names, 10)
    batches = list(src.batches())
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    model = _model(schema)
    ref = copy.deepcopy(model)
    trainer = AdamTrainer(model, _adam(lr=lr, batch_size=10))
    tables = {n for n, p in model.named_parameters() if "stem" in n}
    assert tables, "the tiny model has embedding tables"
    params = dict(ref.named_parameters())
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    v = {n: torch.zeros_like(p) for n, p in params.items()}
    count = {n: 0 for n in params}  # SparseAdam counts steps per table, not per row
    for batch in batches:
        g = _grads(ref, batch)
        trainer.train_step(batch, len(batches))
        with torch.no_grad():
            for n, p in params.items():
                count[n] += 1
                t = count[n]
                rows = (g[n] != 0).any(dim=1) if n in tables else torch.ones(p.shape[0], dtype=torch.bool)
                m[n][rows] = b1 * m[n][rows] + (1 - b1) * g[n][rows]
                v[n][rows] = b2 * v[n][rows] + (1 - b2) * g[n][rows] ** 2
                if n in tables:
                    step = lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t) * m[n] / (v[n].sqrt() + eps)
                else:
                    step = lr * (m[n] / (1 - b1 ** t)) / ((v[n] / (1 - b2 ** t)).sqrt() + eps)
                p[rows] -= step[rows]
    got = dict(model.named_parameters())
    for n, p in params.items():
        torch.testing.assert_close(got[n], p, rtol=1e-5, atol=1e-6, msg=lambda s: f"{n}: {s}")
    # the check has teeth: every parameter moved, and some table rows were never looked up and did not
    start = dict(_model(schema).named_parameters())
    for n in params:
        assert not torch.equal(got[n], start[n]), n
    untouched = [(got[n] == start[n]).all(dim=1).sum().item() for n in tables]
    assert sum(untouched) > 0
    first = _grads(_model(schema), batches[0])
    late = [((first[n] == 0).all(dim=1) & (got[n] != start[n]).any(dim=1)).sum().item() for n in tables]
    assert sum(late) > 0


def test_adam_dense_tables_are_torch_adam(learnable):
    # embedding_update: dense gives the tables plain (not lazy) Adam: the same weights as torch.optim.Adam over
    # every parameter of an identical model
    schema, dense, ids, y, _ = learnable
    src = TensorBatches(dense[:300], ids[:300], y[:300], schema.sparse_names, 100)
    model, ref = _model(schema), _model(schema)
    AdamTrainer(model, _adam(embedding_update="dense")).fit(src)
    opt = torch.optim.Adam(ref.parameters(), lr=0.01, eps=1e-8)
    for batch in src.batches():
        _grads(ref, batch)
        for p in ref.parameters():
            if p.grad.is_sparse:
                p.grad = p.grad.to_dense()
        opt.step()
    for (n, a), b in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=lambda s: f"{n}: {s}")


def test_interrupted_adam_training_resumes_to_identical_numbers(learnable, tmp_path):
    schema, dense, ids, y, _ = learnable
    names = schema.sparse_names
    train = TensorBatches(dense[:2000], ids[:2000], y[:2000], names, 100, shuffle_seed=3)
    val = TensorBatches(dense[5000:], ids[5000:], y[5000:], names, 1000)
    cfg = early_stopping(_adam(lr=0.003, clip_norm=5.0))  # the protocol measured: plateau schedule, best restored
    cfg = dataclasses.replace(cfg, epochs=3)
    ref = _model(schema)
    ref_summary = AdamTrainer(ref, cfg).fit(train, val)

    AdamTrainer(_model(schema), cfg, out_dir=tmp_path).fit(train, val, max_steps=27)  # mid-epoch 2
    fresh = _model(schema, seed=99)                                                  # overwritten by the resume
    t = AdamTrainer(fresh, cfg, out_dir=tmp_path)
    summary = t.fit(train, val)
    assert summary["steps"] == ref_summary["steps"] > 27
    assert summary["train_logloss"] == ref_summary["train_logloss"]
    assert [h["logloss"] for h in summary["val_history"]] == [h["logloss"] for h in ref_summary["val_history"]]
    for k, a in ref.state_dict().items():
        assert torch.equal(a, fresh.state_dict()[k]), k
    # what resumed was Adam: the checkpoint holds its moments
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert any("exp_avg_sq" in s for o in state["optimizers"] for s in o["state"].values())


def test_fused_tables_refuse_adam(learnable):
    with pytest.raises(ValueError, match="fused"):
        AdamTrainer(_model(learnable[0]), _adam(embedding_update="fused"))
