"""Fused embedding updates (FBGEMM TBE, exact Adagrad in the backward) against the stem's nn.EmbeddingBags with
torch's sparse Adagrad: the same weights step by step, the same checkpoints, and plain-torch lookups in eval."""

from __future__ import annotations

import pytest
import torch

from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.baselines.dcnv2 import DCNv2
from ctrnas.train.baselines.dlrm import DLRM
from ctrnas.train.batches import TensorBatches
from ctrnas.train.config import TrainConfig
from ctrnas.train.trainer import Trainer

pytest.importorskip("fbgemm_gpu")
from ctrnas.supernet.fused import FusedAdagrad  # noqa: E402


def _cfg(**kw):
    return TrainConfig(**{**dict(lr=0.1, batch_size=100, progress=False, eval_batch_size=1000), **kw})


def _fused(trainer: Trainer) -> FusedAdagrad:
    """Put `trainer`'s embedding tables under a FusedAdagrad in place of its sparse Adagrad."""
    fused = FusedAdagrad(trainer.model, trainer.cfg.lr, trainer.cfg.eps)
    trainer.optimizers = [o for o in trainer.optimizers if not any(p.is_sparse or getattr(p, "_is_emb", False)
                                                                   for g in o.param_groups for p in g["params"])]
    trainer.optimizers = trainer.optimizers[:1] + [fused]
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
