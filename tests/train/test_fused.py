"""Fused embedding updates (FBGEMM TBE, exact Adagrad in the backward) against the stem's nn.EmbeddingBags with
torch's sparse Adagrad: the same weights step by step, the same checkpoints, and plain-torch lookups in eval."""

from __future__ import annotations

from copy import deepcopy

import warnings

import pytest
import torch
from torch import nn

from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.baselines.dcnv2 import DCNv2
from ctrnas.train.baselines.dlrm import DLRM
from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig
from ctrnas.train.trainer import Trainer

pytest.importorskip("fbgemm_gpu")
from ctrnas.supernet.fused import FusedAdagrad  # noqa: E402


def _cfg(**kw):
    """Sparse Adagrad on the tables, the reference; `_fused` or `embedding_update="fused"` makes the other side."""
    return TrainConfig(**{**dict(lr=0.1, batch_size=100, progress=False, eval_batch_size=1000,
                                 embedding_update="sparse"), **kw})


def _fused(trainer: Trainer) -> FusedAdagrad:
    """Put `trainer`'s embedding tables under a FusedAdagrad in place of its sparse Adagrad (what the trainer's
    `embedding_update: fused` does): the dense part keeps its fused-kernel Adagrad."""
    fused = FusedAdagrad(trainer.model, trainer.cfg.lr, trainer.cfg.eps)
    trainer.optimizers = [o for o in trainer.optimizers if o.defaults.get("fused")] + [fused]
    return fused


def _model(kind, schema, seed=0, **kw):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        if kind == "dlrm":
            return DLRM(schema, 4, bottom=(16,), top=(32, 16), **kw)
        return DCNv2(schema, 4, hidden=(32, 32), **kw)


@pytest.mark.parametrize("kind,row_cap", [("dlrm", None), ("dcnv2", 12)])
def test_fused_equals_sparse_adagrad_step_by_step(learnable, kind, row_cap):
    schema, dense, ids, y, _ = learnable
    src = TensorBatches(dense[:1500], ids[:1500], y[:1500], schema.sparse_names, 100, shuffle_seed=1)
    cfg = _cfg(epochs=1)
    ref, new = _model(kind, schema, row_cap=row_cap), _model(kind, schema, row_cap=row_cap)
    t_ref, t_new = Trainer(ref, cfg), Trainer(new, cfg)
    _fused(t_new)
    total = len(src)
    for step, batch in enumerate(src.batches()):
        l_ref, l_new = t_ref.train_step(batch, total), t_new.train_step(batch, total)
        assert l_new == pytest.approx(l_ref, rel=1e-6, abs=1e-7), step
        a, b = ref.state_dict(), new.state_dict()
        for k in a:
            torch.testing.assert_close(b[k], a[k], rtol=1e-6, atol=1e-6, msg=lambda m: f"step {step}, {k}: {m}")
    # the tables really moved (an update that never ran would also agree)
    fresh = _model(kind, schema, row_cap=row_cap).state_dict()
    key = next(k for k in fresh if "embedding_bags" in k)
    assert not torch.allclose(new.state_dict()[key], fresh[key])


class Mixed(nn.Module):
    """A stem of mixed widths with a field of width 0 (as the embedding search makes them) and a linear head."""

    def __init__(self, schema, row_cap=None, widths=(8, 4, 0, 4)):
        super().__init__()
        self.stem = EmbeddingStem(schema, 8, row_cap, widths=widths)
        self.head = nn.Linear(schema.dense_dim + 8 * len(schema.sparse), 1)

    def forward(self, dense, kjt):
        return self.head(torch.cat([dense, self.stem(kjt).flatten(1)], 1)).squeeze(1)


def _mixed(schema, seed=0, **kw):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Mixed(schema, row_cap=17, **kw)


def test_fused_mixed_widths_and_a_field_without_table(learnable):
    schema, dense, ids, y, _ = learnable
    src = TensorBatches(dense[:1000], ids[:1000], y[:1000], schema.sparse_names, 100, shuffle_seed=2)
    cfg = _cfg(epochs=2)
    ref, new = _mixed(schema), _mixed(schema)
    Trainer(ref, cfg).fit(src)
    t = Trainer(new, cfg)
    _fused(t)
    t.fit(src)
    a, b = ref.state_dict(), new.state_dict()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-6, atol=1e-6)


def test_a_width_fbgemm_cannot_take_is_a_clear_error(learnable):
    with pytest.raises(ValueError, match="multiples of 4.*t_C1: 2"):
        FusedAdagrad(_mixed(learnable[0], widths=(8, 2, 0, 4)), 0.1, 0.01)


def test_the_setting_fuses_what_the_kernel_takes_and_keeps_sparse_adagrad_elsewhere(learnable):
    """`embedding_update: fused` on a model the kernel cannot take (a 2-wide table) trains it with sparse
    Adagrad, to the same numbers as `sparse`; on one it can take, the tables' optimizer is the fused one."""
    schema, dense, ids, y, _ = learnable
    src = TensorBatches(dense[:1000], ids[:1000], y[:1000], schema.sparse_names, 100, shuffle_seed=2)
    odd, ref = _mixed(schema, widths=(8, 2, 0, 4)), _mixed(schema, widths=(8, 2, 0, 4))
    t = Trainer(odd, _cfg(embedding_update="fused"))
    assert not any(isinstance(o, FusedAdagrad) for o in t.optimizers)
    t.fit(src)
    Trainer(ref, _cfg(embedding_update="sparse")).fit(src)
    a, b = ref.state_dict(), odd.state_dict()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    t = Trainer(_mixed(schema), _cfg(embedding_update="fused"))
    assert isinstance(t.optimizers[-1], FusedAdagrad)


def test_fused_checkpoint_resumes_to_identical_numbers(learnable, tmp_path):
    schema, dense, ids, y, _ = learnable
    src = TensorBatches(dense[:2000], ids[:2000], y[:2000], schema.sparse_names, 100, shuffle_seed=3)
    cfg = _cfg(epochs=2)
    whole = _model("dlrm", schema)
    _fused(t := Trainer(whole, cfg))
    t.fit(src)
    first = _model("dlrm", schema)
    _fused(t := Trainer(first, cfg, out_dir=tmp_path))
    t.fit(src, max_steps=13)  # stop mid-epoch 1: a checkpoint with the Adagrad sums of the tables
    resumed = _model("dlrm", schema, seed=99)  # other initial weights: the checkpoint must overwrite them
    _fused(t := Trainer(resumed, cfg, out_dir=tmp_path))
    t.fit(src)
    assert t.step == 2 * len(src)
    a, b = whole.state_dict(), resumed.state_dict()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_eval_and_copies_look_up_with_plain_torch(learnable):
    schema, dense, ids, y, _ = learnable
    batch = next(TensorBatches(dense[:300], ids[:300], y[:300], schema.sparse_names, 300).batches())
    model = _model("dcnv2", schema, row_cap=12)
    t = Trainer(model, _cfg())
    _fused(t)
    for b in TensorBatches(dense[:500], ids[:500], y[:500], schema.sparse_names, 100).batches():
        t.train_step(b, 5)
    with torch.no_grad():
        trained = model(batch.dense_features, batch.sparse_features)  # training mode: the TBE's lookups
        model.eval()
        calls = []
        hook = model.stem.ebc.register_forward_hook(lambda *a: calls.append(1))
        plain = model(batch.dense_features, batch.sparse_features)
        hook.remove()
        copy = deepcopy(model).train()  # a copy has its own tables: plain lookups, also in training mode
        copied = copy(batch.dense_features, batch.sparse_features)
    assert calls == [1]
    assert copy.stem._fused is None
    torch.testing.assert_close(plain, trained, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(copied, trained, rtol=1e-6, atol=1e-6)


def test_an_id_outside_its_table_is_an_error(learnable):
    schema, dense, ids, y, _ = learnable
    model = _model("dlrm", schema)
    FusedAdagrad(model, 0.1, 0.01)
    bad = ids[:10].clone()
    bad[3, 1] = schema.cardinalities[1] + 5
    batch = next(TensorBatches(dense[:10], bad, y[:10], schema.sparse_names, 10).batches())
    with pytest.raises(RuntimeError, match="idx < num_rows"):
        model(batch.dense_features, batch.sparse_features)


def test_model_pt2_of_a_fused_run_loads_with_torch_alone(learnable, tmp_path):
    from ctrnas.supernet.serving import save_serving

    schema, dense, ids, y, _ = learnable
    model = _model("dlrm", schema, row_cap=12)
    _fused(t := Trainer(model, _cfg()))
    t.fit(TensorBatches(dense[:500], ids[:500], y[:500], schema.sparse_names, 100))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when an archive's weights share one buffer
        path = save_serving(model, schema, tmp_path)
    assert all(b.weight.data_ptr() == v.data_ptr()  # the fused views stay the trained model's tables
               for s, tab in zip(t.optimizers[-1].stems, t.optimizers[-1].tables)
               for b, v in zip(s.ebc.embedding_bags.values(), tab.tbe.split_embedding_weights()))
    program = torch.export.load(str(path))
    ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert not [o for o in ops if "fbgemm" in o], ops
    batch = next(TensorBatches(dense[:64], ids[:64], y[:64], schema.sparse_names, 64).batches())
    with torch.no_grad():
        want = torch.sigmoid(model.eval()(batch.dense_features, batch.sparse_features))
    torch.testing.assert_close(program.module()(dense[:64], ids[:64]), want, rtol=1e-6, atol=1e-6)
