"""Tiny fixed-weight CTR and CNN models, fixed batches, and an independent numpy forward/backward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

FEATS = ("a", "b")
CARD, DIM, N_DENSE, HIDDEN = 5, 4, 3, 6


class TinyCTR(nn.Module):
    """dense -> Linear; [bottom, emb_a, emb_b] -> Linear -> ReLU -> Linear(1) -> logit [B]."""

    def __init__(self, seed: int = 0):
        super().__init__()
        self.ebc = EmbeddingBagCollection(
            tables=[EmbeddingBagConfig(name=f"t_{f}", embedding_dim=DIM, num_embeddings=CARD, feature_names=[f])
                    for f in FEATS], device=torch.device("cpu"))
        self.bottom = nn.Linear(N_DENSE, DIM)
        self.fc1 = nn.Linear(DIM * (len(FEATS) + 1), HIDDEN)
        self.act = nn.ReLU()
        self.out = nn.Linear(HIDDEN, 1)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.7)

    def forward(self, dense, kjt):
        emb = self.ebc(kjt).values()
        h = torch.cat([self.bottom(dense), emb], dim=1)
        return self.out(self.act(self.fc1(h))).squeeze(-1)


def make_kjt(ids: np.ndarray) -> KeyedJaggedTensor:
    """ids [B, F] -> KJT with one id per row per feature (values grouped by key, then row)."""
    B, nf = ids.shape
    return KeyedJaggedTensor(keys=list(FEATS), values=torch.as_tensor(ids.T.reshape(-1), dtype=torch.long),
                             lengths=torch.ones(B * nf, dtype=torch.int32))


def ctr_batches(k=4, B=8, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        dense = rng.normal(size=(B, N_DENSE)).astype(np.float32)
        ids = rng.integers(0, CARD, size=(B, len(FEATS)))
        y = (rng.random(B) < 0.4).astype(np.float32)
        out.append(((torch.from_numpy(dense), make_kjt(ids)), torch.from_numpy(y), ids))
    return out


def np_params(model: TinyCTR) -> dict[str, np.ndarray]:
    d = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}
    d["emb"] = [model.ebc.embedding_bags[f"t_{f}"].weight.detach().double().numpy() for f in FEATS]
    return d


def np_forward_backward(P, dense, ids, y=None, dy=None, abs_params=False):
    """Hand backprop of TinyCTR in float64. Returns (logits, loss, grads by parameter name, acts).

    With y: mean BCE-with-logits; with dy: the upstream gradient of the logits is given (e.g. ones)."""
    f = (lambda a: np.abs(a)) if abs_params else (lambda a: a)
    Wb, bb, W1, b1, Wo, bo = (f(P[k]) for k in ("bottom.weight", "bottom.bias", "fc1.weight", "fc1.bias",
                                                  "out.weight", "out.bias"))
    E = [f(e) for e in P["emb"]]
    x = dense.astype(np.float64)
    B = x.shape[0]
    z = x @ Wb.T + bb
    h = np.concatenate([z] + [E[j][ids[:, j]] for j in range(len(E))], axis=1)
    a = h @ W1.T + b1
    r = np.maximum(a, 0)
    logit = (r @ Wo.T + bo)[:, 0]
    loss = None
    if y is not None:
        loss = np.mean(np.maximum(logit, 0) - logit * y + np.log1p(np.exp(-np.abs(logit))))
        dy = (1 / (1 + np.exp(-logit)) - y) / B
    gy = dy[:, None]
    g = {"out.weight": gy.T @ r, "out.bias": gy.sum(0)}
    da = (gy @ Wo) * (a > 0)
    g["fc1.weight"], g["fc1.bias"] = da.T @ h, da.sum(0)
    dh = da @ W1
    dz = dh[:, :DIM]
    g["bottom.weight"], g["bottom.bias"] = dz.T @ x, dz.sum(0)
    for j, fname in enumerate(FEATS):
        ge = np.zeros_like(E[j])
        np.add.at(ge, ids[:, j], dh[:, DIM * (j + 1): DIM * (j + 2)])
        g[f"ebc.embedding_bags.t_{fname}.weight"] = ge
    return logit, loss, g, {"a": a, "h": h, "z": z}


def bce(out, y):
    return F.binary_cross_entropy_with_logits(out, y)


class TinyCNN(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 3)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for n, p in self.named_parameters():
                if "bn" not in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.5)

    def forward(self, x):
        return self.fc(self.pool(self.act(self.bn(self.conv(x)))).flatten(1))


def cnn_batches(k=4, B=6, seed=2):
    g = torch.Generator().manual_seed(seed)
    return [((torch.randn(B, 3, 5, 5, generator=g),), torch.randint(0, 3, (B,), generator=g)) for _ in range(k)]


@pytest.fixture
def ctr():
    model = TinyCTR()
    raw = ctr_batches()
    batches = [(inp, y) for inp, y, _ in raw]
    return model, batches, raw


@pytest.fixture
def h():
    """The helpers above, for tests (importlib import mode cannot import conftest by name)."""
    import types
    return types.SimpleNamespace(TinyCTR=TinyCTR, TinyCNN=TinyCNN, ctr_batches=ctr_batches, cnn_batches=cnn_batches,
                                 np_params=np_params, np_forward_backward=np_forward_backward, bce=bce,
                                 make_kjt=make_kjt, FEATS=FEATS)
