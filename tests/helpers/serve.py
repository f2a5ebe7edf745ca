"""Prepared samples and models exported from them, for the serving tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ctrnas import api
from ctrnas.data.loader import CtrBatchLoader
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.space.baselines import baseline_arch

IN_ORDER = dict(split="order", split_ratios=(1.0, 0.0, 0.0), progress=False)  # train = the file, in order


def prepared_and_exported(tmp: Path, kind: str, inputs: list[str], arch: str = "dlrm-like", row_cap=None,
                          **settings):
    """(dataset folder, model folder): `inputs` prepared in file order into train/, and a freshly initialised
    `arch` of the ctrnas-small space exported with the dataset's transform (`ctrnas export --data`)."""
    data, model = tmp / f"{kind}-data", tmp / f"{kind}-model"
    prepare(kind, inputs, data, PrepareConfig(**{**IN_ORDER, "on_error": "skip", **settings}))
    arch_file = tmp / "arch.json"
    arch_file.write_text(json.dumps(baseline_arch(arch).to_json()))
    api.export_arch(str(arch_file), model, data_dir=data, space="ctrnas-small", emb_dim=8, init="fresh", seed=3,
                   row_cap=row_cap)
    return data, model


@torch.no_grad()
def training_path_probabilities(model_dir: Path, data_dir: Path, split: str = "train") -> np.ndarray:
    """Probabilities of the exported model on a prepared split, through the training loader's batches."""
    from ctrnas.supernet import load_exported

    model = load_exported(model_dir).eval()
    out = [torch.sigmoid(model(b.dense_features, b.sparse_features))
           for b in CtrBatchLoader(data_dir, split, batch_size=64)]
    return torch.cat(out).numpy()
