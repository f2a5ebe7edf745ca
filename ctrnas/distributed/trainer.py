"""The trainer on N ranks: sharded tables (DMP), replicated dense part, identical to one process.

Why N ranks equal one process on the same global batches. TorchRec divides the gradients coming back
through its embedding all-to-all / reduce-scatter by the world size W (`comm_ops.GRADIENT_DIVISION`, on by
default, to match DDP's averaging). So rank r's loss is W * (sum of its rows' losses) / (global rows): the
tables then get (1/W) * sum_r grad = the gradient of the global mean loss, and `allreduce_dense_grads`
averages the dense gradients to the same thing. Unlike "mean loss per rank", this stays exact when the
last batch does not split evenly. The tables' fused EXACT_ADAGRAD is the one-process trainer's row-sparse
torch Adagrad (same formula, duplicates aggregated), and the dense Adagrad, clipping and LR schedule are
the one-process trainer's, applied to the same gradients.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ctrnas.distributed.checkpoint import gather_local_shards, gather_state_dict
from ctrnas.distributed.data import RankBatches, real_rows
from ctrnas.distributed.dmp import (DistEnv, ShardingConfig, embedding_collections, load_full_state, shard_model,
                                   sharding_summary)
from ctrnas.distributed.reduce import allreduce_dense_grads, gather_rows, sum_scalars
from ctrnas.config import to_dict
from ctrnas.errors import CtrnasError
from ctrnas.train.checkpoint import load_checkpoint, save_checkpoint
from ctrnas.train.config import TrainConfig
from ctrnas.train.metrics import MetricResult, StreamingMetrics
from ctrnas.train.trainer import ForwardFn, Trainer, default_forward


def _fused(p: torch.Tensor) -> bool:
    # TorchRec marks table weights whose optimizer runs inside backward (the fused kernel).
    return hasattr(p, "_in_backward_optimizers")


def _gradient_division() -> bool:
    from torchrec.distributed import comm_ops

    return comm_ops.get_gradient_division()


class DistributedTrainer(Trainer):
    """`Trainer` on a DMP-sharded copy of `model`; call on every rank with the same model seed and recipe.

    Feed it the *global* batch sources: `fit`/`evaluate` take this rank's slice themselves. Only rank 0
    shows progress and writes checkpoints (the gathered, unsharded model, loadable by the 1-process
    trainer and by `ctrnas export`); every rank must call `fit`, `evaluate` and `save` together.
    """

    def __init__(self, model: nn.Module, cfg: TrainConfig, env: DistEnv,
                 sharding: ShardingConfig | None = None, out_dir: str | Path | None = None,
                 forward: ForwardFn = default_forward, eval_forward: ForwardFn = default_forward):
        if cfg.embedding_update == "dense":
            raise CtrnasError("--distributed trains tables with the fused (sparse) Adagrad; "
                              "set embedding_update: sparse or fused")
        # "fused" is what DMP's sharded tables do anyway: the model itself stays plain here
        cfg = dataclasses.replace(cfg, embedding_update="sparse")
        cfg = cfg if env.is_main else dataclasses.replace(cfg, progress=False)
        cfg = dataclasses.replace(cfg, device=str(env.device))  # the rank's device (gloo: cpu, nccl: its GPU)
        super().__init__(model, cfg, out_dir if env.is_main else None, forward, eval_forward)
        self.env = env
        self.ckpt_dir = Path(out_dir) if out_dir is not None else None
        sharding = sharding or ShardingConfig(lr=cfg.lr, eps=cfg.eps)
        tables = tuple(f"{path}." for path in embedding_collections(model))
        self.model, self.plan = shard_model(model, env, dataclasses.replace(sharding, lr=cfg.lr, eps=cfg.eps))
        self.sharding = sharding_summary(self.plan)
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad and not _fused(p)]
        # Replicated (data_parallel) tables: TorchRec already averages their gradients with its own DDP,
        # and like the 1-process trainer's tables they are not clipped and get Adagrad without weight decay.
        self.dp_tables = [p for n, p in named if n.startswith(tables)]
        self.dense_params = [p for n, p in named if not n.startswith(tables)]
        self.optimizers = []
        if self.dense_params:
            self.optimizers.append(torch.optim.Adagrad(self.dense_params, lr=cfg.lr, eps=cfg.eps,
                                                       weight_decay=cfg.weight_decay))
        if self.dp_tables:
            self.optimizers.append(torch.optim.Adagrad(self.dp_tables, lr=cfg.lr, eps=cfg.eps))
        self.fused_optimizer = self.model.fused_optimizer
        # Trainer.fit counts this rank's (padded) rows; the summary reports the global ones counted here.
        self.global_rows, self.global_loss_sum = 0, 0.0

    @property
    def checkpoint_path(self) -> Path | None:
        return self.ckpt_dir / "checkpoint.pt" if self.ckpt_dir is not None else None

    # -- training -----------------------------------------------------------------------------------------
    def fit(self, train, val=None, resume: bool = True, max_steps: int | None = None) -> dict:
        """`Trainer.fit` over this rank's slices of `train` (and `val`)."""
        local_val = RankBatches(val, self.env.rank, self.env.world_size) if val is not None else None
        return super().fit(RankBatches(train, self.env.rank, self.env.world_size), local_val, resume, max_steps)

    def train_step(self, batch, total_steps: int) -> float:
        """One step on this rank's slice; returns the global batch's mean loss (the same on every rank)."""
        lr = self.current_lr(total_steps)
        for g in [*(g for o in self.optimizers for g in o.param_groups), *self.fused_optimizer.param_groups]:
            g["lr"] = lr
        # The fused kernel reads its LR when the forward runs (it is packed into the autograd op), so the
        # new LR must reach it before the forward, not before backward; zero_grad() is what hands it over.
        self.fused_optimizer.zero_grad()
        if self.env.device.type != "cpu":
            batch = batch.to(self.env.device, non_blocking=True)
        labels = batch.labels.reshape(-1)
        keep = real_rows(labels).float()  # padding rows (see data.slice_batch) weigh nothing
        (global_rows,) = sum_scalars(float(keep.sum()))
        logits = self.forward(self.model, batch, self.step)
        loss_sum = (F.binary_cross_entropy_with_logits(logits.reshape(-1), labels.clamp(min=0.0), reduction="none")
                    * keep).sum()
        for o in self.optimizers:
            o.zero_grad(set_to_none=True)
        scale = self.env.world_size if _gradient_division() else 1
        (loss_sum * (scale / global_rows)).backward()
        allreduce_dense_grads(self.dense_params, divide_by=scale)
        if scale != self.env.world_size:  # DDP averaged the replicated tables' gradients by W, not by scale
            for p in self.dp_tables:
                if p.grad is not None:
                    p.grad.mul_(self.env.world_size / scale)
        if self.cfg.clip_norm is not None and self.dense_params:
            nn.utils.clip_grad_norm_(self.dense_params, self.cfg.clip_norm)
        for o in self.optimizers:
            o.step()
        self.fused_optimizer.step()
        self.step += 1
        if self._horizon:  # the weights' moving average, of this rank's shards (cfg.ema)
            self._update_average()
        (total,) = sum_scalars(float(loss_sum.detach()))
        self.global_rows += int(global_rows)
        self.global_loss_sum += total
        return total / global_rows

    def summary(self) -> dict:
        """`Trainer.summary` with global rows (all ranks, padding excluded) instead of this rank's."""
        out = super().summary()
        sec = self.train_seconds
        out.update(rows=self.global_rows, samples_per_s=self.global_rows / sec if sec > 0 else float("nan"),
                   train_logloss=self.global_loss_sum / self.global_rows if self.global_rows else float("nan"),
                   world_size=self.env.world_size, sharding=self.sharding)
        return out

    @torch.no_grad()
    def evaluate(self, source, max_rows: int | None = None) -> MetricResult:
        """Metrics of the global batches: every rank scores its slice, the logits are gathered in rank order
        (= global row order), so the result equals a one-process evaluation and is the same on all ranks."""
        if not isinstance(source, RankBatches):
            source = RankBatches(source, self.env.rank, self.env.world_size)
        was_training = self.model.training
        self.model.eval()
        m = StreamingMetrics()
        for batch in source.batches(0):
            if self.env.device.type != "cpu":
                batch = batch.to(self.env.device, non_blocking=True)
            logits = gather_rows(self.eval_forward(self.model, batch, -1).reshape(-1).float())
            labels = gather_rows(batch.labels.reshape(-1).float())
            logits, labels = logits[real_rows(labels)].cpu(), labels[real_rows(labels)].cpu()
            if max_rows is not None and m.rows + labels.shape[0] > max_rows:
                keep = max_rows - m.rows
                logits, labels = logits[:keep], labels[:keep]
            m.update(logits, labels)
            if max_rows is not None and m.rows >= max_rows:
                break  # the same decision on every rank: m.rows is global
        self.model.train(was_training)
        return m.result()

    # -- checkpoints --------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Collective: the gathered full model and optimizer states on rank 0 (None leaves elsewhere)."""
        model = gather_state_dict(self.model)
        fused = gather_local_shards(dict(self.fused_optimizer.state_dict()))
        return {"model": model, "optimizers": [o.state_dict() for o in self.optimizers],
                "fused_optimizer": fused, "step": self.step, "loss_sum": self.loss_sum,
                "rows_seen": self.rows_seen, "train_seconds": self.train_seconds, "history": self.history,
                "config": to_dict(self.cfg), "sharding": self.sharding,
                "global_rows": self.global_rows, "global_loss_sum": self.global_loss_sum,
                # best-on-val weights and the weights' moving average: this rank's copies of its shards,
                # gathered like the model itself
                "selection": {**self.selection_state(), "weights": self._gathered(self._best_weights, False),
                              "average": self._gathered(self._average, True)}}

    @torch.no_grad()
    def _gathered(self, copies: list[torch.Tensor] | None, floating: bool) -> dict | None:
        """Collective: a full state_dict on rank 0 of `copies`, this rank's copies of the model's state
        tensors (its floating ones where `floating`), by swapping them into the model for one gather. Every
        rank holds copies or none alike: they follow the same global evaluations and steps."""
        if copies is None:
            return None
        tensors = self._state_tensors(floating)
        now = [t.clone() for t in tensors]
        self._copy_into(tensors, copies)
        try:
            return gather_state_dict(self.model)
        finally:
            self._copy_into(tensors, now)

    @torch.no_grad()
    def _copies(self, full: dict, floating: bool) -> list[torch.Tensor]:
        """Collective: this rank's copies (as `_gathered` takes them) of the full state_dict `full`, read by
        loading it into the model; the model's own state is loaded after."""
        load_full_state(self.model, full)
        return [t.clone() for t in self._state_tensors(floating)]

    def save(self) -> None:
        if self.ckpt_dir is None:
            return
        state = self.state_dict()  # every rank gathers; only rank 0 writes
        if self.env.is_main:
            save_checkpoint(self.checkpoint_path, state)

    def try_resume(self) -> bool:
        """Resume from rank 0's checkpoint: tables, dense part, optimizer states. Collective.

        Rank 0 decides whether there is one; every rank then reads the file, so `out_dir` must be on storage
        that all ranks see (always true for torchrun on one node; a shared filesystem across nodes).
        """
        p = self.checkpoint_path
        found = [p is not None and p.exists()] if self.env.is_main else [None]
        dist.broadcast_object_list(found, src=0)
        if not found[0]:
            return False
        if not p.exists():
            raise CtrnasError(f"{p}: rank {self.env.rank} cannot see rank 0's checkpoint; put --out on "
                              "storage shared by all ranks")
        state = load_checkpoint(p)
        self.check_checkpoint_config(p, state)
        sel = state.get("selection")
        if sel and any(isinstance(sel.get(k), list) for k, _ in self.COPIES):
            raise CtrnasError(f"{p}: a one-process checkpoint holds its best weights and average per "
                              "tensor; resume it without --distributed, or re-run in a new output folder")
        sel = self._own_copies(sel)  # back to this rank's copies, before the model's state is loaded
        load_full_state(self.model, state["model"])
        for o, s in zip(self.optimizers, state["optimizers"]):
            o.load_state_dict(s)
        if state.get("fused_optimizer") is not None:
            _load_fused_state(self.fused_optimizer, state["fused_optimizer"])
        self.step, self.loss_sum, self.rows_seen = state["step"], state["loss_sum"], state["rows_seen"]
        self.train_seconds, self.history = state["train_seconds"], state["history"]
        self.global_rows, self.global_loss_sum = state["global_rows"], state["global_loss_sum"]
        self.load_selection_state(sel)
        return True


@torch.no_grad()
def _load_fused_state(fused, full: dict) -> None:
    """Copy gathered fused-optimizer states (e.g. Adagrad's momentum) back into this rank's shards."""
    from ctrnas.distributed.checkpoint import _is_sharded

    def walk(target, source):
        if isinstance(target, dict):
            for k, v in target.items():
                if k in source:
                    walk(v, source[k])
        elif _is_sharded(target):
            for shard in target.local_shards():
                md = shard.metadata
                shard.tensor.copy_(source[tuple(slice(o, o + n) for o, n in zip(md.shard_offsets, md.shard_sizes))])
        elif isinstance(target, torch.Tensor) and isinstance(source, torch.Tensor):
            target.copy_(source)

    walk(dict(fused.state_dict()), full)
