"""The continuous inputs of a model: its floating tensor arguments plus the outputs of its embedding
tables (nn.Embedding / nn.EmbeddingBag, which TorchRec's collections are made of).

Input-space proxies (jacov, EPE-NAS, Zen, Dextr's curvature, the vmap NTK) need to perturb or
differentiate "the input". A CTR model's categorical ids are not continuous and a KeyedJaggedTensor
cannot be vmapped, so the input is taken *after* the lookup: the pooled embeddings, captured on a
forward pass and substituted back by patching the tables' forward (the lookup is skipped), so replacements may even
have a different number of rows than the id batch. Each table is assumed to be called once per forward.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

import torch
from torch import nn

from ctrnas.proxies.base import is_embedding


class ContinuousInputs:
    """Capture and substitute the continuous inputs of `model(*inputs)`."""

    def __init__(self, model: nn.Module, inputs: tuple):
        self.model, self.inputs = model, tuple(inputs)
        self.float_idx = [i for i, x in enumerate(self.inputs) if torch.is_tensor(x) and x.is_floating_point()]
        self.embeddings = [m for m in model.modules() if is_embedding(m)]
        self.names: list[str] = []

    @contextlib.contextmanager
    def _hooks(self, fn):
        handles = [m.register_forward_hook(fn) for m in self.embeddings]
        try:
            yield
        finally:
            for hd in handles:
                hd.remove()

    def capture(self) -> list[torch.Tensor]:
        """[float inputs..., embedding outputs in call order...], detached, batch dimension first."""
        outs: list[torch.Tensor] = []

        def rec(mod, inp, out):
            outs.append(out.detach())

        with self._hooks(rec), torch.no_grad():
            self.model(*self.inputs)
        self.names = [f"input{i}" for i in self.float_idx] + [f"embedding{j}" for j in range(len(outs))]
        return [self.inputs[i].detach() for i in self.float_idx] + outs

    def run(self, replacements: Sequence[torch.Tensor], model_call=None):
        """Call the model with every continuous input replaced (same order as `capture`)."""
        n_float = len(self.float_idx)
        args = list(self.inputs)
        for i, r in zip(self.float_idx, replacements[:n_float]):
            args[i] = r
        emb = iter(replacements[n_float:])
        # The lookup is *skipped* (forward patched on the instance), not overwritten by a hook:
        # embedding_bag on integer ids fails under torch.func transforms, and it is wasted work.
        for m in self.embeddings:
            m.forward = lambda *a, **k: next(emb)
        try:
            return (model_call or self.model)(*args)
        finally:
            for m in self.embeddings:
                del m.forward

def flatten_per_sample(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """[B, D] concatenation of per-sample flattened tensors."""
    return torch.cat([t.reshape(t.shape[0], -1) for t in tensors], dim=1)


def split_like(flat: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Inverse of flatten_per_sample for rows of `flat` (any row count)."""
    out, start = [], 0
    for t in like:
        n = t[0].numel()
        out.append(flat[:, start: start + n].reshape(flat.shape[0], *t.shape[1:]))
        start += n
    return out
