"""Data stage: make or reuse the prepared dataset folder; read rows into memory; batch sources for training."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ctrnas.config import to_dict
from ctrnas.data.dataset import (SOURCE_FILE, check_replaceable, complete, raw_source, read_meta, recorded_source,
                                 synthetic_source)
from ctrnas.data.loader import fraction_rows
from ctrnas.data.schema import DatasetSchema
from ctrnas.errors import CtrnasError
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe
from ctrnas.train.batches import TensorRows


def _source_of(recipe: Recipe) -> dict | None:
    d = recipe.data
    if d.synthetic is not None:
        s = d.synthetic
        return synthetic_source(s.profile, s.rows, s.seed, s.settings, s.structure)
    if d.raw is not None:
        return raw_source(d.raw.kind, d.raw.inputs, to_dict(d.prepare))
    return None


def _check_replaceable(path: Path, source: dict, overwrite: bool, output) -> None:
    recorded = recorded_source(path) or {} if complete(path) and not overwrite else {"synthetic": None}
    if "synthetic" in source and "synthetic" not in recorded:
        # the user's own data under a synthetic recipe: never offer to replace it with synthetic rows
        what = (f"prepared from {recorded['raw']['kind']} files" if "raw" in recorded else
                f"that has no readable {SOURCE_FILE} (another tool or an older ctrnas made it)")
        raise CtrnasError(f"data.path {str(path)!r} holds a dataset {what}, and this recipe "
                          "generates synthetic data there. To search that dataset, add --set data.synthetic=null "
                          f"(and --set output=DIR: the results otherwise go to {output}); to generate the "
                          "synthetic data, point data.path at another folder")
    key = "data.raw" if "raw" in source else "data.synthetic"
    check_replaceable(path, source, overwrite, f"data.path {str(path)!r}",
                      f"Point data.path at another folder, use the folder as it is (--set {key}=null), or "
                      "replace it (--set data.overwrite=true)")


def prepare_data(recipe: Recipe) -> DataResult:
    """The recipe's dataset folder, made from raw files or a synthetic profile unless an identical one exists."""
    t0 = time.perf_counter()
    path = recipe.data_dir
    source = _source_of(recipe)
    reused = True
    if source is not None:
        if not (complete(path) and recorded_source(path) == source):
            _check_replaceable(path, source, recipe.data.overwrite, recipe.output_dir)
            reused = False
            d = recipe.data
            # both record the folder's source themselves, last, under the folder's lock
            if d.synthetic is not None:
                from ctrnas.data.synthetic import generate
                from ctrnas.supernet.planted import PlantedClick

                s = d.synthetic
                generate(s.profile, s.rows, s.seed, path, overwrite=recipe.data.overwrite, source=source,
                         structure=s.structure, planted=PlantedClick, **s.settings)
            else:
                from ctrnas.data.prepare import prepare

                prepare(d.raw.kind, list(d.raw.inputs), path, d.prepare, overwrite=recipe.data.overwrite)
    elif not complete(path):
        raise CtrnasError(f"data.path {str(path)!r} is not a prepared dataset folder (no meta.json); "
                          "prepare it with `ctrnas prepare` or give data.synthetic / data.raw in the recipe")
    return open_data(path, time.perf_counter() - t0, reused)


def open_data(path: str | Path, seconds: float = 0.0, reused: bool = True) -> DataResult:
    """A prepared dataset folder as a DataResult (its meta.json read and checked)."""
    meta = read_meta(path)
    return DataResult(path=Path(path), schema=DatasetSchema.from_json(meta["schema"]), meta=meta, seconds=seconds,
                      reused=reused)


def split_rows(data: DataResult, split: str) -> int:
    return int(data.meta["splits"][split]["rows"])


def warmup_rows(data: DataResult, fraction: float) -> int:
    """Rows of the training split the warm-up reads: the loader's own ceil(fraction * N) (0 for no warm-up)."""
    return fraction_rows(split_rows(data, "train"), fraction)


def load_rows(data: DataResult, split: str, offset: int = 0, limit: int | None = None,
              chunk: int = 65_536) -> TensorRows:
    """Rows [offset, offset + limit) of `split` as tensors (in file order, no shuffling)."""
    from ctrnas.data.loader import CtrBatchLoader

    loader = CtrBatchLoader(data.path, split, batch_size=chunk, offset=offset, limit=limit)
    f = len(data.schema.sparse)
    dense, ids, labels = [], [], []
    for batch in loader:
        b = batch.labels.shape[0]
        dense.append(batch.dense_features)
        ids.append(batch.sparse_features.values().reshape(f, b).t())  # KJT values are key-major
        labels.append(batch.labels)
    if not labels:
        return TensorRows(torch.zeros(0, data.schema.dense_dim), torch.zeros(0, f, dtype=torch.int64),
                          torch.zeros(0), data.schema.sparse_names)
    return TensorRows(torch.cat(dense), torch.cat(ids).contiguous(), torch.cat(labels), data.schema.sparse_names)


def rows_after_warmup(data: DataResult, fraction: float, need: int) -> tuple[int, str]:
    """Where the rows a fitness draws start: right after the warm-up rows, or at row 0 when a (near) full
    warm-up leaves fewer than `need` rows (one-shot fine-tunes on training rows the supernet saw, as NASRec)."""
    start = warmup_rows(data, fraction)
    if start + need <= split_rows(data, "train"):
        return start, "after the warm-up rows"
    return 0, "from the start of the training split (the warm-up used nearly all of it)"
