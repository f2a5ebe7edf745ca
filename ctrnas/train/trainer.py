"""The one trainer used by supernet warm-up, from-scratch training of an architecture, and baselines.

Optimisation follows NASRec (docs/nasrec.md): Adagrad on every parameter, LR from `lr_at` (linear warm-up then
cosine), gradient-norm clipping. Embedding tables (every `EmbeddingStem` in the model) get exact Adagrad on
the rows a batch looks up (rows not looked up have zero gradient, so neither their accumulator nor their value
changes): by default from row-sparse gradients with torch's sparse Adagrad, or inside the backward of FBGEMM's
batched kernel (`embedding_update: fused`, ctrnas.supernet.fused), both at a fraction of the cost of dense
gradients over the whole table (docs/cpu.md). Clipping acts on the dense parameters only: sparse Adagrad
already normalises each coordinate, and NASRec's clip mostly guards the MLP/attention weights.
Adam (FuxiCTR's and BARS's optimizer) was measured against Adagrad on six baseline families and trained none of
them better, level within noise at best (benchmarks/RESULTS.md, "Training protocol"): Adagrad is the only optimizer.

Clipping bounds the step, not the forward values: a model whose loss turns NaN or runs far above the
constant predictor's is stopped and marked `diverged` (ctrnas.train.divergence) instead of training on.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torchrec.datasets.utils import Batch
from tqdm.auto import tqdm

from ctrnas.config import to_dict
from ctrnas.device import check_fbgemm, configure, resolve_device
from ctrnas.errors import CtrnasError
from ctrnas.safeload import one_line
from ctrnas.supernet.fused import FusedAdagrad
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.train.batches import BatchSource
from ctrnas.train.checkpoint import FILE as CHECKPOINT_FILE
from ctrnas.train.checkpoint import load_checkpoint, save_checkpoint, state_tensors
from ctrnas.train.config import TrainConfig, lr_at, numeric_settings
from ctrnas.train.divergence import DivergenceGuard
from ctrnas.train.precision import bfloat16_forward, bfloat16_supported
from ctrnas.train.metrics import MetricResult, StreamingMetrics

# torch warns once that sparse-tensor invariant checks are off when Adagrad builds its sparse update; the
# gradients come from embedding_bag and are valid by construction, so the warning is noise here.
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")

log = logging.getLogger("ctrnas.train")

ForwardFn = Callable[[nn.Module, Batch, int], torch.Tensor]


def default_forward(model: nn.Module, batch: Batch, step: int) -> torch.Tensor:
    """The CTR model contract: model(dense, kjt) -> logits [B]."""
    return model(batch.dense_features, batch.sparse_features)


def eval_interval(per_epoch: int, most: int, parts: int = 1) -> int:
    """Steps between the evaluations of a training with model selection: an epoch cut into `parts` equal
    parts, or into the fewest equal parts of at most `most` steps each when that makes more (0: no bound)."""
    n = max(parts, math.ceil(per_epoch / most) if most else 1)
    return max(1, math.ceil(per_epoch / n))


def split_parameters(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(embedding tables of every EmbeddingStem, all other trainable parameters), each without duplicates."""
    emb, seen = [], set()
    for m in model.modules():
        if isinstance(m, EmbeddingStem):
            for p in m.embedding_parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    emb.append(p)
    dense = [p for p in model.parameters() if p.requires_grad and id(p) not in seen]
    return emb, dense


class Trainer:
    """Train `model` with `cfg`; checkpoints and metrics go under `out_dir` when given."""

    def __init__(self, model: nn.Module, cfg: TrainConfig, out_dir: str | Path | None = None,
                 forward: ForwardFn = default_forward, eval_forward: ForwardFn = default_forward):
        self.model, self.cfg, self.forward, self.eval_forward = model, cfg, forward, eval_forward
        self.out_dir = Path(out_dir) if out_dir is not None else None
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.device = resolve_device(cfg.device)
        if cfg.precision == "bfloat16":  # training only: eval_forward, predict and the export stay float32
            if self.device.type == "cpu" and not bfloat16_supported():
                log.warning("precision: bfloat16 on a CPU without native bfloat16 products is slower than float32")
            self.forward = bfloat16_forward(forward, self.device.type)
        if self.device.type == "cuda":  # stop before any step when fbgemm cannot run the tables there
            check_fbgemm(self.device)
            configure(self.device)
        model.to(self.device)  # in place: the parameters stay the same objects for the optimizers below
        sparse = cfg.embedding_update != "dense"
        for m in model.modules():
            if isinstance(m, EmbeddingStem):
                m.use_sparse_gradients(sparse)
        fused = None
        # "fused": the tables' Adagrad inside the backward (one TBE call) where FBGEMM's CPU kernel takes
        # them; elsewhere (a GPU, LR's one-wide tables) the same Adagrad from row-sparse gradients
        if cfg.embedding_update == "fused" and FusedAdagrad.unfit(model) is None:
            fused = FusedAdagrad(model, cfg.lr, cfg.eps)
        emb, dense = split_parameters(model)
        self.dense_params = dense
        self.optimizers: list[torch.optim.Optimizer | FusedAdagrad] = []
        if dense:
            self.optimizers.append(self.dense_optimizer(dense))
        if fused is not None:
            self.optimizers.append(fused)  # optimizer-like: the trainer sets its lr; step() has nothing to do
        elif emb:
            self.optimizers.append(self.embedding_optimizer(emb, sparse))
        self.step = 0
        self.loss_sum = 0.0        # sum of per-row training loss this run (for the reported train log loss)
        self.rows_seen = 0
        self.train_seconds = 0.0
        self.history: list[dict] = []
        # model selection over evaluations (cfg.restore_best / early_stop_patience)
        self.best: dict | None = None      # {"step", "logloss"} of the lowest val log loss so far
        self.bad_evals = 0                 # evaluations since the last improvement
        self.cuts = 0                      # evaluations without improvement so far (the "plateau" LR's cuts)
        self.epoch_steps: int | None = None
        self._best_weights: list | None = None
        self.stopped_early = False
        self.guard = DivergenceGuard(cfg.divergence_factor)
        self.diverged: dict | None = None  # {"step", "loss", "reason"} once training blew up
        # the final anneal (cfg.anneal): {"start", "steps", "kept"} once it ran; (start, steps) while it runs
        self.annealed: dict | None = None
        self._annealing: tuple[int, int] | None = None
        # the weights' moving average (cfg.ema): one tensor per floating state tensor, and the steps it has
        # seen; while an evaluation scores it, the trained weights wait in _trained
        self._average: list[torch.Tensor] | None = None
        self._averaged = 0
        self._trained: list[torch.Tensor] | None = None
        self._horizon = 0.0  # the average's horizon in steps, set by fit (0: none)
        self._floats: list[torch.Tensor] = []  # the model's floating state tensors, the average's order (fit)

    def dense_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        """Adagrad over the dense parameters, with torch's fused CPU kernel: ~6x faster than the per-tensor loop
        (benchmarks/supernet.py); sliced supernet weights carry full-size gradients, so the optimizer dominates a
        subnet step without it. (A subclass may put another optimizer here: benchmarks/protocol.py's Adam.)"""
        cfg = self.cfg
        return torch.optim.Adagrad(params, lr=cfg.lr, eps=cfg.eps, weight_decay=cfg.weight_decay, fused=True)

    def embedding_optimizer(self, params: list[nn.Parameter], sparse: bool) -> torch.optim.Optimizer:
        """Adagrad over the embedding tables; with row-sparse gradients torch's sparse Adagrad, which rejects
        weight decay (NASRec uses none)."""
        cfg = self.cfg
        return torch.optim.Adagrad(params, lr=cfg.lr, eps=cfg.eps, weight_decay=0.0 if sparse else cfg.weight_decay)

    @property
    def checkpoint_path(self) -> Path | None:
        return self.out_dir / CHECKPOINT_FILE if self.out_dir is not None else None

    # -- checkpoints --------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizers": [o.state_dict() for o in self.optimizers],
                "step": self.step, "loss_sum": self.loss_sum, "rows_seen": self.rows_seen,
                "train_seconds": self.train_seconds, "history": self.history, "config": to_dict(self.cfg),
                "selection": self.selection_state()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if len(state["optimizers"]) != len(self.optimizers):
            raise CtrnasError("checkpoint was written for a model with a different parameter layout")
        for o, s in zip(self.optimizers, state["optimizers"]):
            o.load_state_dict(s)
        self.step, self.loss_sum, self.rows_seen = state["step"], state["loss_sum"], state["rows_seen"]
        self.train_seconds, self.history = state["train_seconds"], state["history"]
        self.load_selection_state(self._own_copies(state.get("selection")))

    def _own_copies(self, sel: dict | None) -> dict | None:
        """The selection state `sel` with the best weights and average that a distributed checkpoint holds as
        gathered state_dicts turned into this trainer's copies (`_copies`)."""
        if not sel:
            return sel
        return {**sel, **{k: self._copies(sel[k], floating) for k, floating in self.COPIES
                          if isinstance(sel.get(k), dict)}}

    def _copies(self, full: dict, floating: bool) -> list[torch.Tensor]:
        """The full state_dict `full` as copies of the model's state tensors (its floating ones where
        `floating`), in their order; a missing key raises KeyError."""
        return [full[k].to(v.device).clone() for k, v in self.model.state_dict().items()
                if not floating or v.is_floating_point()]

    # the selection state's copies of the model's state tensors, and whether they hold the floating ones only
    COPIES = (("weights", False), ("average", True))

    def _state_tensors(self, floating: bool = False) -> list[torch.Tensor]:
        return [t for t in state_tensors(self.model) if not floating or t.is_floating_point()]

    @staticmethod
    def _copy_into(tensors: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        for t, v in zip(tensors, values, strict=True):
            t.copy_(v)

    def selection_state(self) -> dict:
        return {"best": self.best, "bad_evals": self.bad_evals, "stopped_early": self.stopped_early,
                "weights": self._best_weights, "diverged": self.diverged, "cuts": self.cuts,
                "annealed": self.annealed, "average": self._average, "averaged": self._averaged}

    def load_selection_state(self, sel: dict | None) -> None:
        if sel:
            self.best, self.bad_evals = sel["best"], sel["bad_evals"]
            self.stopped_early, self._best_weights = sel["stopped_early"], sel["weights"]
            self.diverged = sel.get("diverged")
            self.cuts = sel.get("cuts", 0)
            self.annealed = sel.get("annealed")
            self._average, self._averaged = sel.get("average"), sel.get("averaged", 0)

    def save(self) -> None:
        if self.checkpoint_path is not None:
            save_checkpoint(self.checkpoint_path, self.state_dict())

    def try_resume(self) -> bool:
        """Load `out_dir/checkpoint.pt` if present; its recipe must match this run's (except logging)."""
        p = self.checkpoint_path
        if p is None or not p.exists():
            return False
        state = load_checkpoint(p)
        self.check_checkpoint_config(p, state)
        try:
            self.load_state_dict(state)
        except (RuntimeError, KeyError, ValueError, TypeError) as e:
            raise CtrnasError(f"{p}: checkpoint does not fit this run's model: {one_line(e)}") from None
        return True

    def check_checkpoint_config(self, path: Path, state: dict) -> None:
        """A checkpoint resumes only a run with the same numeric settings (logging and pacing may differ)."""
        if not isinstance(state.get("config"), dict):
            raise CtrnasError(f"{path}: damaged ctrnas checkpoint (its recipe is not a mapping)")
        mine, theirs = numeric_settings(self.cfg), numeric_settings(state["config"])
        if mine != theirs:
            diff = sorted(k for k in mine if mine.get(k) != theirs.get(k))
            raise CtrnasError(f"{path}: checkpoint was made with a different recipe (keys {diff}); "
                              "use a new output folder or the same recipe")

    # -- training -----------------------------------------------------------------------------------------
    def fit(self, train: BatchSource, val: BatchSource | None = None, resume: bool = True,
            max_steps: int | None = None) -> dict:
        """Train for cfg.epochs over `train`; evaluate on `val` every cfg.eval_every steps and at the end.

        `max_steps` stops early after that many steps in total (a checkpoint is written first): used to
        interrupt a run on purpose. Returns the training summary.
        """
        cfg = self.cfg
        if resume:
            self.try_resume()
        per_epoch = self.epoch_steps = len(train)
        total = per_epoch * cfg.epochs
        stop = total if max_steps is None else min(total, max_steps)
        selecting = val is not None and (cfg.restore_best or cfg.early_stop_patience is not None)
        interval = eval_interval(per_epoch, cfg.eval_every, cfg.evals_per_epoch) if selecting else cfg.eval_every
        self._horizon = cfg.ema * interval if selecting else 0.0
        # views of the weights, found once: a state_dict per step cost LR's 1M-row step 5%
        self._floats = self._state_tensors(floating=True) if self._horizon else []
        if self.stopped_early or self.diverged:
            stop = self.step
        self.model.train()
        bar = tqdm(total=total, initial=self.step, disable=not cfg.progress, unit="step", dynamic_ncols=True,
                   mininterval=1.0)
        ema = None
        try:
            while self.step < stop:
                epoch, offset = divmod(self.step, per_epoch)
                t0 = time.perf_counter()
                ended = False
                for batch in train.batches(offset, epoch):
                    loss = self.train_step(batch, total)
                    self.diverged = self.guard.check(self.step, loss, last=self.step >= stop)
                    if self.diverged:
                        stop = self.step
                        log.warning("training stopped, diverged: %s", self.diverged["reason"])
                    rows = batch.labels.shape[0]
                    self.loss_sum += loss * rows
                    self.rows_seen += rows
                    ema = loss if ema is None else 0.98 * ema + 0.02 * loss
                    bar.update(1)
                    if cfg.progress and self.step % max(cfg.log_every, 1) == 0:
                        elapsed = self.train_seconds + time.perf_counter() - t0
                        bar.set_postfix(loss=f"{ema:.4f}", samples_s=f"{self.rows_seen / max(elapsed, 1e-9):.0f}")
                    within = self.step - epoch * per_epoch  # steps into this epoch
                    want_eval = val is not None and not self.diverged and (
                        self.step == total or (selecting and (within % interval == 0 or within == per_epoch))
                        or (not selecting and interval and self.step % interval == 0))
                    want_ckpt = (cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0) or self.step == stop
                    if want_eval or want_ckpt:
                        self.train_seconds += time.perf_counter() - t0  # evaluation is not training time
                        if want_eval:
                            self._record_eval(val, epoch)
                            # recorded also where max_steps stops it at the same step: a resumed run ends here
                            if selecting and self._select():
                                self.stopped_early, stop, want_ckpt = self.step < total, self.step, True
                        if want_ckpt:
                            self.save()
                        t0 = time.perf_counter()
                    if self.step % per_epoch == 0 or self.step >= stop:
                        ended = True
                        break
                self.train_seconds += time.perf_counter() - t0
                if not ended:
                    raise CtrnasError(f"the training batches ended at step {self.step}, before the "
                                      f"{per_epoch} batches per epoch the source announced")
        finally:
            bar.close()
        if selecting and cfg.restore_best and self.step >= stop and self.best is not None \
                and self.best["step"] != self.step and not self.diverged:
            self._load_weights(self._best_weights)
        finished = self.stopped_early or self.step >= total
        if selecting and cfg.anneal and finished and self.best is not None and not self.diverged \
                and self.annealed is None:
            self._anneal(train, val, per_epoch, min(per_epoch, (cfg.early_stop_patience or 1) * interval))
        return self.summary()

    def _anneal(self, train: BatchSource, val: BatchSource, per_epoch: int, steps: int) -> None:
        """The final anneal: from the best weights, `steps` more steps (from the start of the epoch it stopped
        in) at a rate falling from `lr` to 0 by a cosine, then one evaluation; its weights are kept only if
        they improve val, else the best evaluation's return. A stopped anneal reruns from the stop's
        checkpoint, which holds what it starts from (the best weights, the optimizer's sums at the stop)."""
        start = self.step
        self._annealing = (start, steps)
        self._horizon = 0.0  # the anneal's own decay replaces the average
        t0 = time.perf_counter()
        try:
            for batch in train.batches(0, start // per_epoch):
                loss = self.train_step(batch, steps)
                if not math.isfinite(loss):
                    break
                rows = batch.labels.shape[0]
                self.loss_sum += loss * rows
                self.rows_seen += rows
                if self.step - start >= steps:
                    break
        finally:
            self._annealing = None
            self.train_seconds += time.perf_counter() - t0
        self._record_eval(val, start // per_epoch)
        self.history[-1]["anneal"] = True
        cur = self.history[-1]["logloss"]
        kept = math.isfinite(cur) and cur < self.best["logloss"]
        if kept:
            self.best = {"step": self.step, "logloss": cur}
        else:
            self._load_weights(self._best_weights)
        self.annealed = {"start": start, "steps": self.step - start, "kept": kept}
        self.save()

    def current_lr(self, total_steps: int) -> float:
        """The rate of the next step: the schedule's (`lr_at`), or during the final anneal a cosine from `lr`
        to 0 over its steps."""
        if self._annealing is not None:
            start, steps = self._annealing
            cosine = dataclasses.replace(self.cfg, schedule="cosine", warmup_ratio=0.0, min_lr=0.0)
            return lr_at(cosine, self.step - start, steps)
        return lr_at(self.cfg, self.step, total_steps, self.epoch_steps, self.cuts)

    def _select(self) -> bool:
        """Track the lowest val log loss after an evaluation; True when early stopping should stop now."""
        cuts = self.cuts
        stop = self._select_evaluated()
        if self._trained is not None:  # the evaluation scored the moving average
            self._after_average(cut=self.cuts > cuts, end=stop or self.step >= self.epoch_steps * self.cfg.epochs)
        return stop

    def _select_evaluated(self) -> bool:
        cur, p = self.history[-1], self.cfg.early_stop_patience
        if math.isfinite(cur["logloss"]) and (
                self.best is None or cur["logloss"] < self.best["logloss"] * (1 - self.cfg.min_improvement)):
            self.best, self.bad_evals = {"step": cur["step"], "logloss": cur["logloss"]}, 0
            if self.cfg.restore_best:
                self._best_weights = None  # the old copy goes first: one copy at a time, not two
                self._best_weights = self._copy_weights()
        elif self.cfg.schedule == "plateau":
            self.bad_evals += 1
            self.cuts += 1
            # the cut goes on from the best weights (the stopping evaluation restores them at the end anyway)
            if self._best_weights is not None and (p is None or self.bad_evals < p):
                self._load_weights(self._best_weights)
        else:
            self.bad_evals += 1
        return p is not None and self.bad_evals >= p

    @torch.no_grad()
    def _update_average(self) -> None:
        """The moving average after a step: the plain mean of the n steps so far (weight 1/n) until 1/n falls
        below 1/horizon, then exponential (torch.optim.swa_utils' averages keep a second model; here the average
        is a list of tensors a checkpoint holds and an evaluation swaps into the model itself)."""
        if self._average is None and self._averaged:
            raise CtrnasError(f"{self.checkpoint_path}: the checkpoint resumed holds no moving average of the "
                              "weights (ema); re-run in a new output folder")
        self._averaged += 1
        if self._average is None:
            self._average = [t.detach().clone() for t in self._floats]
        else:
            torch._foreach_lerp_(self._average, self._floats, max(1.0 / self._horizon, 1.0 / self._averaged))

    @torch.no_grad()
    def _after_average(self, cut: bool, end: bool) -> None:
        """After an evaluation of the average: at the end the model stays on it (or on the best, which fit
        loads); after a cut, which loaded the best average, training and the average go on from that; else
        training goes on from its own weights."""
        trained, self._trained = self._trained, None
        if end:
            return
        if cut and self.cfg.restore_best:
            self._average = [t.clone() for t in self._floats]
        else:
            torch._foreach_copy_(self._floats, trained)

    @torch.no_grad()
    def _copy_weights(self) -> list[torch.Tensor]:
        return [t.detach().clone() for t in self._state_tensors()]

    @torch.no_grad()
    def _load_weights(self, weights: list[torch.Tensor]) -> None:
        tensors = self._state_tensors()
        if weights is None or len(weights) != len(tensors):
            where = f"{self.checkpoint_path}: " if self.checkpoint_path is not None else ""
            raise CtrnasError(f"{where}restore_best: no best evaluation's weights to return to (restore_best off, "
                              "or not in the checkpoint resumed), or those of another model; re-run in a new output "
                              "folder")
        self._copy_into(tensors, weights)

    def to_device(self, batch: Batch) -> Batch:
        """`batch` on the trainer's device (unchanged on the CPU); pinned first, so the copy can overlap."""
        if self.device.type == "cpu":
            return batch
        if self.device.type == "cuda":
            batch = batch.pin_memory()
        return batch.to(self.device, non_blocking=True)

    def train_step(self, batch: Batch, total_steps: int) -> float:
        """One optimizer step on `batch`; returns its mean loss. A NaN/inf loss takes no step (the weights stay
        finite; the caller stops the training)."""
        lr = self.current_lr(total_steps)
        for o in self.optimizers:
            for g in o.param_groups:
                g["lr"] = lr
        batch = self.to_device(batch)
        logits = self.forward(self.model, batch, self.step)
        loss = F.binary_cross_entropy_with_logits(logits.reshape(-1), batch.labels.reshape(-1))
        value = float(loss.detach())
        self.step += 1
        if not math.isfinite(value):
            return value
        for o in self.optimizers:
            o.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.clip_norm is not None and self.dense_params:
            nn.utils.clip_grad_norm_(self.dense_params, self.cfg.clip_norm)
        for o in self.optimizers:
            o.step()
        if self._horizon:
            self._update_average()
        return value

    def _record_eval(self, val: BatchSource, epoch: int) -> None:
        if self._horizon and self._average is not None:  # score the average; _select puts the weights back
            self._trained = [t.detach().clone() for t in self._floats]
            with torch.no_grad():
                torch._foreach_copy_(self._floats, self._average)
        r = self.evaluate(val, max_rows=self.cfg.eval_rows)
        self.history.append({"step": self.step, "epoch": epoch, **r.to_dict()})

    @torch.no_grad()
    def evaluate(self, source: BatchSource, max_rows: int | None = None) -> MetricResult:
        """Log loss and AUC over `source` (its first `max_rows` rows when given), streaming."""
        was_training = self.model.training
        self.model.eval()
        m = StreamingMetrics()
        for batch in source.batches(0):
            batch = self.to_device(batch)
            logits = self.eval_forward(self.model, batch, -1).reshape(-1)
            labels = batch.labels.reshape(-1)
            if max_rows is not None and m.rows + labels.shape[0] > max_rows:
                keep = max_rows - m.rows
                logits, labels = logits[:keep], labels[:keep]
            m.update(logits, labels)
            if max_rows is not None and m.rows >= max_rows:
                break
        self.model.train(was_training)
        return m.result()

    def summary(self) -> dict:
        sec = self.train_seconds
        return {"steps": self.step, "rows": self.rows_seen, "seconds": sec,
                "samples_per_s": self.rows_seen / sec if sec > 0 else float("nan"),
                "train_logloss": self.loss_sum / self.rows_seen if self.rows_seen else float("nan"),
                "best": self.best, "stopped_early": self.stopped_early, "diverged": self.diverged,
                "val_history": self.history}
