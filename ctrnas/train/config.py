"""Training recipe: a frozen dataclass with NASRec/SiGeo defaults (docs/nasrec.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ctrnas.errors import RecipeError


# TrainConfig keys that change how a run is shown or paced, not its numbers: resume checks and cache
# fingerprints compare everything else
# where a run computes, not what: the device changes numbers only by float rounding (README, "Running on a GPU")
# (eval_every is not among them: with model selection it decides where a training may stop)
RUN_ONLY_KEYS = frozenset({"progress", "log_every", "eval_rows", "checkpoint_every", "threads", "device"})


def numeric_settings(cfg: "TrainConfig | dict") -> dict:
    """The settings that decide a run's numbers (a TrainConfig, or its dict as stored in a checkpoint)."""
    from ctrnas.config import to_dict

    # a dict from an older checkpoint lacks keys added since: they held their defaults then
    d = {**to_dict(TrainConfig()), **cfg} if isinstance(cfg, dict) else to_dict(cfg)
    return {k: v for k, v in d.items() if k not in RUN_ONLY_KEYS}


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults: NASRec supernet recipe (Adagrad lr 0.12 eps 1e-2, batch 512, one epoch,
    cosine with 10% linear warm-up to `min_lr` 1e-8, clip 5)."""

    lr: float = 0.12
    eps: float = 1e-2
    weight_decay: float = 0.0
    batch_size: int = 512
    eval_batch_size: int = 4096
    epochs: int = 1
    # "cosine": NASRec's, over exactly `epochs`; "constant"; "plateau": the linear warm-up over `warmup_ratio`
    # of one epoch's steps, then constant, cut by `plateau_factor` at each val evaluation without a lower log
    # loss (FuxiCTR's reduce-on-plateau), and with restore_best each cut returns to the best evaluation's
    # weights, so the lower rate refines the best model, not one that has begun to overfit. It needs no length
    # in advance, so it goes with early stopping (benchmarks/protocol.py measured it against a cut at every
    # evaluation and against the cut alone)
    schedule: Literal["cosine", "constant", "plateau"] = "cosine"
    warmup_ratio: float = 0.1            # fraction of all steps (of one epoch's, "plateau") in the LR warm-up
    plateau_factor: float = 0.1          # "plateau": the LR's factor at each evaluation without improvement
    min_lr: float = 1e-8
    clip_norm: float | None = 5.0        # on the dense (non-embedding) parameters; None = no clipping
    # How embedding tables get their updates: "sparse" = row-sparse gradients + torch's sparse Adagrad
    # (default; exact Adagrad, 5-10x faster than dense grads on CPU, docs/cpu.md; measured on par with
    # torchrec's FusedEmbeddingBagCollection + EXACT_ADAGRAD here, and checkpointable with plain
    # state_dicts); "dense" = dense gradients over whole tables (the slow reference path); "fused" = all
    # tables in one FBGEMM TBE with exact Adagrad applied inside the backward (ctrnas.supernet.fused; the same
    # numbers as "sparse" to float rounding, 1.1-1.5x faster steps, benchmarks/step_profile.py) where its CPU
    # kernel takes the model's tables (on the CPU, widths multiples of 4), "sparse" elsewhere.
    embedding_update: Literal["sparse", "dense", "fused"] = "sparse"
    # "bfloat16": matrix products and their backward in bfloat16 while training (CPU autocast; weights,
    # lookups, optimizer and evaluation stay float32; ctrnas.train.precision). 2-2.7x faster on cores with
    # AVX-512 BF16 or AMX; test log loss within seed noise on the mean of three seeds for DLRM and DCN-v2,
    # one DCN-v2 seed 0.004 worse (benchmarks/step_profile.py): a choice to measure per model.
    precision: Literal["float32", "bfloat16"] = "float32"
    embedding_dim: int = 16
    row_cap: int | None = None
    seed: int = 0
    # steps between val evaluations; 0 = only at the end. With model selection (restore_best or
    # early_stop_patience) every epoch is cut into `evals_per_epoch` equal parts, or into the fewest equal parts
    # of at most `eval_every` steps when that makes more, each ended by an evaluation (one-epoch data stops
    # early too)
    eval_every: int = 0
    evals_per_epoch: int = 1
    eval_rows: int | None = None         # cap on val rows per evaluation (None = the whole split)
    # FuxiCTR-style model selection: evaluate on val during training (above), stop after
    # `early_stop_patience` evaluations without a lower val log loss, and end on the best evaluation's
    # weights. CTR models overfit after 1-2 epochs (the embeddings memorise), so the last epoch is often
    # not the best one. Off by default: NASRec trains exactly `epochs` and keeps the last weights.
    restore_best: bool = False
    early_stop_patience: int | None = None
    # an evaluation improves only with a val log loss below best x (1 - min_improvement): torch's
    # ReduceLROnPlateau threshold (relative). Gains below it (a slow creep after the rate's cuts) count as
    # evaluations without improvement
    min_improvement: float = 0.0
    # the final anneal, with early stopping: after the stop, from the best weights, `early_stop_patience` more
    # evaluation intervals (at most an epoch) at a rate falling from `lr` to 0 by a cosine, kept only if val
    # improves. The plateau's rate never decays to zero, a gain NASRec's cosine makes (warm-up, stable, decay:
    # WSD); measured in docs/protocol.md, "The final anneal"
    anneal: bool = False
    # with model selection: evaluate, select and end on an exponential moving average of the weights over `ema`
    # evaluation intervals (so over a share of an epoch whatever the data's size), in place of the trained
    # weights; 0: off. A length-free stand-in for the decay at the end of NASRec's cosine (Polyak averaging);
    # measured in docs/protocol.md, "A moving average of the weights"
    ema: float = 0.0
    checkpoint_every: int = 0            # steps between checkpoints; 0 = only at the end
    # Stop a training whose mean loss over 20 steps exceeds this x ln 2 (the most a constant predictor
    # loses), or at once on a NaN/inf loss, and mark it diverged (ctrnas.train.divergence); null: only NaN/inf.
    divergence_factor: float | None = 100.0
    log_every: int = 50
    progress: bool = True
    threads: int | None = None           # torch.set_num_threads; None = leave as is
    device: str = "auto"                 # auto | cpu | cuda | cuda:N (auto: CUDA when torch sees one)

    def __post_init__(self):
        checks = [
            ("lr", self.lr > 0, "must be > 0"),
            ("eps", self.eps > 0, "must be > 0"),
            ("weight_decay", self.weight_decay >= 0, "must be >= 0"),
            ("batch_size", self.batch_size > 0, "must be > 0"),
            ("eval_batch_size", self.eval_batch_size > 0, "must be > 0"),
            ("epochs", self.epochs >= 1, "must be >= 1"),
            ("warmup_ratio", 0.0 <= self.warmup_ratio < 1.0, "must be in [0, 1)"),
            ("plateau_factor", 0.0 < self.plateau_factor <= 1.0, "must be in (0, 1]"),
            ("min_lr", 0.0 <= self.min_lr <= self.lr, "must be in [0, lr]"),
            ("clip_norm", self.clip_norm is None or self.clip_norm > 0, "must be > 0 or null"),
            ("embedding_dim", self.embedding_dim > 0, "must be > 0"),
            ("row_cap", self.row_cap is None or self.row_cap > 0, "must be > 0 or null"),
            ("eval_every", self.eval_every >= 0, "must be >= 0"),
            ("evals_per_epoch", self.evals_per_epoch >= 1, "must be >= 1"),
            ("min_improvement", 0.0 <= self.min_improvement < 1.0, "must be in [0, 1)"),
            ("ema", self.ema >= 0.0 and math.isfinite(self.ema), "must be >= 0 (0: off)"),
            ("early_stop_patience", self.early_stop_patience is None or self.early_stop_patience >= 1,
             "must be >= 1 or null"),
            ("checkpoint_every", self.checkpoint_every >= 0, "must be >= 0"),
            ("divergence_factor", self.divergence_factor is None or self.divergence_factor > 1,
             "must be > 1 or null"),
        ]
        for key, ok, why in checks:
            if not ok:
                raise RecipeError("TrainConfig", key, f"{why}, got {getattr(self, key)!r}")


@dataclass(frozen=True)
class WarmupConfig:
    """Supernet warm-up: NASRec sampling on the first `fraction` of the training split.

    `full_supernet_ratio`: NASRec trains the full supernet with probability 1 - step/S for its first S steps
    (S = 15000 of ~71.6k Criteo steps, i.e. ~21% of an epoch). We set S = ratio x (warm-up steps), so the
    decay is relative to the warm-up length and a 1% warm-up also ends on sampled subnets (the published
    SiGeo code keeps S = 15000 and trains almost only the full supernet at 1%: docs/nasrec.md).
    """

    fraction: float = 0.01
    full_supernet_ratio: float = 0.2
    # an amount instead of a share: the first `rows` training rows (replaces `fraction` when set), since a
    # fraction does not transfer across data sizes (1% is 5 steps of 512 at 240k rows, ~700 on Criteo)
    rows: int | None = None

    def __post_init__(self):
        if not 0.0 <= self.fraction <= 1.0:
            raise RecipeError("WarmupConfig", "fraction", f"must be in [0, 1], got {self.fraction!r}")
        if self.rows is not None and self.rows < 0:
            raise RecipeError("WarmupConfig", "rows", f"must be >= 0 or null, got {self.rows!r}")
        if not 0.0 <= self.full_supernet_ratio <= 1.0:
            raise RecipeError("WarmupConfig", "full_supernet_ratio",
                              f"must be in [0, 1], got {self.full_supernet_ratio!r}")


def lr_at(cfg: TrainConfig, step: int, total_steps: int, epoch_steps: int | None = None, cuts: int = 0) -> float:
    """Learning rate before optimizer step `step` (0-based) of `total_steps`.

    Linear warm-up from min_lr to lr over W = ceil(warmup_ratio * T) steps, then cosine annealing
    lr_t = min_lr + (lr - min_lr) (1 + cos(pi (t - W) / (T - W))) / 2 (SGDR, Loshchilov & Hutter Eq. 5).
    "plateau": T is one epoch's steps (`epoch_steps`), and after the warm-up lr x plateau_factor^cuts, `cuts`
    being the evaluations so far without a lower val log loss (never below min_lr).
    """
    if cfg.schedule == "constant":
        return cfg.lr
    by_evals = cfg.schedule == "plateau"
    warm = math.ceil(cfg.warmup_ratio * ((epoch_steps or total_steps) if by_evals else total_steps))
    if step < warm:
        return cfg.min_lr + (cfg.lr - cfg.min_lr) * step / warm
    if by_evals:
        return max(cfg.min_lr, cfg.lr * cfg.plateau_factor ** cuts)
    span = max(total_steps - warm, 1)
    t = min(step - warm, span)
    return cfg.min_lr + (cfg.lr - cfg.min_lr) * 0.5 * (1.0 + math.cos(math.pi * t / span))


def early_stopping(cfg: TrainConfig, given: "set[str] | frozenset[str]" = frozenset()) -> TrainConfig:
    """`cfg` under the early-stop protocol, for every key not in `given` (the keys a recipe or a flag set):
    at most MAX_EPOCHS epochs, val evaluated EVALS_PER_EPOCH times an epoch (every EVAL_EVERY steps at most),
    stop after PATIENCE evaluations without a lower log loss, end on the best one's weights, and the "plateau"
    schedule (warm-up, then constant, times PLATEAU_FACTOR at each evaluation without improvement), and the
    final anneal where ANNEAL, the weights' moving average over EMA evaluation intervals."""
    import dataclasses

    preset = {"epochs": MAX_EPOCHS, "schedule": "plateau", "restore_best": True, "early_stop_patience": PATIENCE,
              "eval_every": EVAL_EVERY, "evals_per_epoch": EVALS_PER_EPOCH, "plateau_factor": PLATEAU_FACTOR,
              "min_improvement": MIN_IMPROVEMENT, "anneal": ANNEAL, "ema": EMA}
    return dataclasses.replace(cfg, **{k: v for k, v in preset.items() if k not in given})


# the early-stop protocol's settings: CTR models peak after 1-6 epochs, and val every quarter epoch with a
# patience of 4 (about an epoch) and the rate halved at each evaluation without improvement met the goal for
# every model and size measured (benchmarks/RESULTS.md, "Training protocol"; docs/protocol.md); 2000 steps of
# 512 rows bound the work between two evaluations on long epochs
MAX_EPOCHS, PATIENCE, EVAL_EVERY, EVALS_PER_EPOCH, PLATEAU_FACTOR, MIN_IMPROVEMENT = 20, 4, 2000, 4, 0.5, 1e-4
# the final anneal lowers test log loss on small models (docs/protocol.md), but the protocol's tables, the ranking
# study's truth and the pipeline's verdicts are measured without it: a recipe turns it on (final.train.anneal)
ANNEAL = False
# the moving average of the weights (TrainConfig.ema) over one evaluation interval: lower test log loss than the
# trained weights for 38 of 40 model-and-data pairs, in fewer epochs (docs/protocol.md, "A moving average of the
# weights")
EMA = 1.0

# the protocols a training can follow: the length follows the data, or NASRec's fixed number of epochs
PROTOCOLS = ("early-stop", "nasrec")
