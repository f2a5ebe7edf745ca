"""Embedding tables trained by FBGEMM's batched kernel (TBE) with exact Adagrad fused into the backward.

`FusedAdagrad(model, lr, eps)` puts all tables of each `EmbeddingStem` of `model` into one
`SplitTableBatchedEmbeddingBagsCodegen` on the CPU: one lookup call and one backward call for all tables,
the backward applying exact Adagrad to the looked-up rows itself, so there is no gradient tensor and no
optimizer step. The update is the one `torch.optim.Adagrad` makes from row-sparse gradients
(state += g * g; w -= lr * g / (sqrt(state) + eps), duplicates of an id summed first), so a run with it
equals a run with the stem's `nn.EmbeddingBag`s and sparse Adagrad up to float rounding.

The stem's own tables become views of the TBE's weights: `state_dict`, evaluation, checkpoints and the export
read and write the same numbers, and a model in `eval()` mode looks its rows up with plain torch, so the
exported `model.pt2` needs no FBGEMM. The handle behaves like an optimizer for the trainer (`param_groups`
carries the learning rate, `step` and `zero_grad` do nothing, `state_dict` holds the Adagrad sums), so the
trainer keeps one list of optimizers.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.supernet.stem import EmbeddingStem


def _tbe(rows: list[int], widths: list[int], lr: float, eps: float) -> nn.Module:
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, PoolingMode
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (ComputeDevice, EmbeddingLocation,
                                                                        SplitTableBatchedEmbeddingBagsCodegen)

    specs = [(r, w, EmbeddingLocation.HOST, ComputeDevice.CPU) for r, w in zip(rows, widths)]
    # FATAL: an id outside its table is an error, as in nn.EmbeddingBag, never silently clamped
    return SplitTableBatchedEmbeddingBagsCodegen(specs, optimizer=EmbOptimType.EXACT_ADAGRAD, learning_rate=lr,
                                                 eps=eps, pooling_mode=PoolingMode.SUM,
                                                 bounds_check_mode=BoundsCheckMode.FATAL)


class FusedTables:
    """One stem's tables in one TBE; the stem's `nn.EmbeddingBag` weights are views of its weights."""

    def __init__(self, stem: EmbeddingStem, group: dict, eps: float):
        bags = list(stem.ebc.embedding_bags.values())
        rows = [b.weight.shape[0] for b in bags]
        widths = [b.weight.shape[1] for b in bags]
        self.group = group  # the handle's param group: its "lr" is the rate of the next update
        self.lr = group["lr"]
        self.tbe = _tbe(rows, widths, self.lr, eps)
        with torch.no_grad():
            for bag, view in zip(bags, self.tbe.split_embedding_weights()):
                view.copy_(bag.weight)
                # shares the TBE's storage; stays trainable, so the model is a plain one again once released
                bag.weight = nn.Parameter(view)
                bag.sparse = False

    def set_lr(self, lr: float) -> None:
        if lr != self.lr:
            self.tbe.set_learning_rate(lr)
            self.lr = lr

    def __call__(self, values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        self.set_lr(self.group["lr"])  # the forward hands the rate to the backward that updates
        return self.tbe(values, offsets)

    @property
    def sums(self) -> torch.Tensor:
        """The Adagrad sums of squared gradients, all tables' rows side by side."""
        return self.tbe.momentum1_host


class FusedAdagrad:
    """Exact Adagrad on every `EmbeddingStem`'s tables, fused into the backward (see the module docstring)."""

    def __init__(self, model: nn.Module, lr: float, eps: float):
        self.stems = [m for m in model.modules() if isinstance(m, EmbeddingStem)]
        why = self.unfit(model)
        if why:
            raise ValueError(why)
        # the trainer writes each step's rate here before the forward, which hands it to the update
        self.param_groups = [{"lr": lr}]
        self.tables = [FusedTables(s, self.param_groups[0], eps) for s in self.stems]
        for s, t in zip(self.stems, self.tables):
            s.fuse(t)

    @staticmethod
    def unfit(model: nn.Module) -> str | None:
        """Why FBGEMM's CPU kernel cannot take `model`'s tables (None: it can)."""
        stems = [m for m in model.modules() if isinstance(m, EmbeddingStem)]
        if any(p.device.type != "cpu" for s in stems for p in s.embedding_parameters()):
            return "fused embedding updates run on the CPU only"
        odd = [f"{n}: {b.weight.shape[1]}" for s in stems for n, b in s.ebc.embedding_bags.items()
               if b.weight.shape[1] % 4]
        if odd:
            return (f"fused embedding updates need table widths that are multiples of 4 (FBGEMM's kernel); "
                    f"got {', '.join(odd)}")
        return None

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing: the tables have no gradients."""

    def step(self) -> None:
        """Nothing: the backward has applied the update."""

    def state_dict(self) -> dict:
        return {"sums": [t.sums.detach().clone() for t in self.tables], "lr": self.param_groups[0]["lr"]}

    def load_state_dict(self, state: dict) -> None:
        sums = state.get("sums") if isinstance(state, dict) else None
        if not isinstance(sums, list) or len(sums) != len(self.tables) or \
                any(s.shape != t.sums.shape for s, t in zip(sums, self.tables)):
            raise ValueError("the checkpoint's embedding optimizer state does not fit the fused tables")
        with torch.no_grad():
            for s, t in zip(sums, self.tables):
                t.sums.copy_(s)
        self.param_groups[0]["lr"] = state["lr"]

    def release(self) -> None:
        """Back to plain lookups (the weights stay where training left them)."""
        for s in self.stems:
            s.fuse(None)
