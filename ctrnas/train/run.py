"""From-scratch training on a prepared dataset folder: train, val during training, test at the end,
and a metrics JSON beside the checkpoint (FuxiCTR habit: recipe, seeds and versions saved with results)."""

from __future__ import annotations

import sys
from pathlib import Path

from torch import nn

from ctrnas.config import to_dict
from ctrnas.data.dataset import read_meta, versions
from ctrnas.files import atomic_write_text
from ctrnas.safeload import save_weights_file
from ctrnas.train.batches import dataset_batches, fraction_rows
from ctrnas.train.config import TrainConfig
from ctrnas.train.metrics import MetricResult, constant_logloss, strict_json
from ctrnas.train.trainer import Trainer


def count_parameters(model: nn.Module) -> dict:
    """Parameter counts: embedding tables, everything else, total."""
    from ctrnas.train.trainer import split_parameters

    emb, dense = split_parameters(model)
    e, d = sum(p.numel() for p in emb), sum(p.numel() for p in dense)
    return {"embedding": e, "dense": d, "total": e + d}


def split_batches(data_dir: str | Path, cfg: TrainConfig, train_fraction: float | None = None,
                  train_rows: int | None = None, val_rows: int | None = None, test_rows: int | None = None):
    """(meta, train, val, test) batch iterables of a dataset folder, each split's first `*_rows` when given;
    val/test are None when empty."""
    meta = read_meta(data_dir)
    splits = meta["splits"]
    train = dataset_batches(data_dir, "train", cfg.batch_size, shuffle=True, seed=cfg.seed, fraction=train_fraction,
                            limit=train_rows)
    val = dataset_batches(data_dir, "val", cfg.eval_batch_size, limit=val_rows) \
        if splits.get("val", {}).get("rows") else None
    test = dataset_batches(data_dir, "test", cfg.eval_batch_size, limit=test_rows) \
        if splits.get("test", {}).get("rows") else None
    return meta, train, val, test


def selected_val(summary: dict, cfg: TrainConfig) -> dict | None:
    """The val metrics of the weights the run ended on: the best evaluation's with restore_best."""
    hist = summary["val_history"]
    if summary.get("diverged"):  # it ended on the diverged weights, whatever was evaluated before
        return MetricResult.missing(f"diverged: {summary['diverged']['reason']}").to_dict()
    if cfg.restore_best and summary.get("best"):
        return next(h for h in hist if h["step"] == summary["best"]["step"])
    return hist[-1] if hist else None


def metrics_record(name: str, data_dir: str | Path, meta: dict, params: dict, summary: dict, test_result,
                   train, train_fraction: float | None, cfg: TrainConfig, extra: dict | None = None) -> dict:
    """The metrics.json content of one from-scratch run."""
    splits = meta["splits"]
    train_ctr = splits.get("train", {}).get("ctr")
    return {
        "model": name,
        "data": str(data_dir),
        "params": params,
        "train": {k: v for k, v in summary.items() if k != "val_history"},
        "train_rows_used": train.rows if train_fraction is None else fraction_rows(splits["train"]["rows"],
                                                                                  train_fraction),
        "val_history": summary["val_history"],
        "val": selected_val(summary, cfg),
        "diverged": summary.get("diverged"),
        "test": test_result.to_dict() if test_result is not None else None,
        # the optimum any model can reach on synthetic data (mean binary entropy of p_true), and the
        # log loss of always predicting the training CTR: a model must land between the two
        "bayes_logloss": meta.get("bayes_logloss"),
        "constant_logloss": constant_logloss(train_ctr) if train_ctr is not None else None,
        "config": to_dict(cfg),
        "versions": versions(),
        **(extra or {}),
    }


def write_results(out_dir: str | Path | None, state_dict: dict, metrics: dict) -> None:
    """model.pt and metrics.json (atomic, strict JSON: NaN/inf become null) under `out_dir`."""
    if out_dir is None:
        return
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_weights_file(state_dict, out / "model.pt", "model weights")
    atomic_write_text(out / "metrics.json", strict_json(metrics, indent=2))


def train_and_test(model: nn.Module, data_dir: str | Path, cfg: TrainConfig, out_dir: str | Path | None,
                   name: str, train_fraction: float | None = None, extra: dict | None = None, **rows) -> dict:
    """Train `model` on the train split (the first `train_fraction` of it when given), evaluate on val
    during training and on test at the end; write `metrics.json` and `model.pt` under `out_dir`. `rows`:
    `train_rows`, `val_rows`, `test_rows` to use only the first rows of a split (as the final stage)."""
    meta, train, val, test = split_batches(data_dir, cfg, train_fraction, **rows)
    empty = [s for s, b in (("val", val), ("test", test)) if b is None]
    if empty:  # a success, but one whose metrics come out null: say why
        print(f"ctrnas: warning: {data_dir}: no {' and no '.join(empty)} rows: the {' and '.join(empty)} "
              "metrics will be null", file=sys.stderr)
    trainer = Trainer(model, cfg, out_dir)
    summary = trainer.fit(train, val)
    if test is None:
        test_result = None
    elif trainer.diverged:  # its numbers would be meaningless (or huge): none, with the reason
        test_result = MetricResult.missing(f"diverged: {trainer.diverged['reason']}")
    else:
        test_result = trainer.evaluate(test)
    metrics = metrics_record(name, data_dir, meta, count_parameters(model), summary, test_result, train,
                             train_fraction, cfg, extra)
    write_results(out_dir, model.state_dict(), metrics)
    return metrics
