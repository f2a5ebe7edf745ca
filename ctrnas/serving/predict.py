"""Score rows with an exported model: raw files (with the preprocessing saved beside the model), a prepared
dataset folder, or an in-memory table.

The output has one row per accepted input row, in input order: `file`, `line` (physical line of a text
file, 1-based row of a Parquet file or table, row of a prepared split), `probability` (float32), and
`label` when any input has labels. Rejected rows are the ones `prepare` rejects (`on_error: skip`); they are
counted by reason and the first ones named, so rows read = accepted + rejected (blank lines are not rows),
and written = accepted (unless the format expands rows: KDD 2012 impressions).
Memory is bounded: one reader chunk (`block_size` bytes of text) at a time, the metrics in bounded memory
(`train.metrics.StreamingMetrics`), the output streamed to Parquet (atomic: a temp file renamed at the end).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from ctrnas.data.arrow import column_numpy
from ctrnas.data.preprocess import Preprocess, has_labels
from ctrnas.errors import CtrnasError, PathError
from ctrnas.files import FULL, disk_full
from ctrnas.safeload import check_regular, one_line
from ctrnas.serving.program import PROGRAM_FILE, Program, load_program

OUT_SCHEMA = [("file", pa.string()), ("line", pa.int64()), ("probability", pa.float32())]


def load_model(model_dir: str | Path, data_dir: str | Path | None = None, program: bool = True):
    """(model, its Preprocess or None, how it scores): the transform beside the model, else `data_dir`'s.
    The model is the folder's `model.pt2` run with torch alone where it can be (`ctrnas.serving.program`),
    else (or with `program=False`) the model rebuilt from model.pt and the card, which imports TorchRec."""
    scorer, why = load_program(model_dir) if program else (None, "asked for the rebuilt model")
    if scorer is not None:
        model, how = scorer, f"{PROGRAM_FILE} (torch alone)"
    else:
        from ctrnas.train.baselines.folder import load_baseline

        model = load_baseline(Path(model_dir)) or _load_exported(model_dir)
        model = model.cpu().eval()
        how = f"model.pt rebuilt with TorchRec: {why}"
    where = Path(data_dir) if data_dir else Path(model_dir)
    pre = Preprocess.load(where) if (where / "transform.json").is_file() else None
    schema = getattr(model, "schema", None)
    if pre is not None and schema is not None and (schema.sparse, schema.dense) != (pre.schema.sparse, pre.schema.dense):
        raise CtrnasError(f"{where}/transform.json: its fields or table sizes are not the model's "
                          f"({model_dir}): the model was trained on other data")
    return model, pre, how


def _load_exported(model_dir):
    from ctrnas.supernet.io import load_exported

    return load_exported(model_dir)


def _no_transform(model_dir, data_dir) -> str:
    """Why raw rows cannot be scored: a model of synthetic data (no raw format) scores prepared rows only."""
    if data_dir is not None:
        return (f"{data_dir}: no transform.json either (synthetic data has none: it has no raw format), so this "
                "model scores prepared rows only: give a prepared dataset folder as --input (with --split)")
    return (f"{model_dir}: no transform.json beside the model, so it scores prepared rows only: give a prepared "
            "dataset folder as --input (with --split). A model trained on data `ctrnas prepare` made from raw "
            "files carries its transform (give --data DIR for one exported without it)")


def kjt_of(ids: np.ndarray, names):
    """One id per field and row: ids [n, F] -> a KJT (feature-major values, every length 1)."""
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    n = ids.shape[0]
    values = torch.from_numpy(np.ascontiguousarray(ids.T).reshape(-1))
    return KeyedJaggedTensor.from_lengths_sync(list(names), values, torch.ones(n * len(names), dtype=torch.int32))


@torch.inference_mode()
def logits_of(model, dense: np.ndarray, ids: np.ndarray, names, batch_rows: int = 8192) -> np.ndarray:
    """Logits [n] of rows (dense [n, n_dense], ids [n, F]) in batches: a `Program` takes the ids as they are,
    a rebuilt model as a KJT."""
    out = []
    for s in range(0, len(ids), batch_rows):
        d = torch.from_numpy(np.ascontiguousarray(dense[s:s + batch_rows], dtype=np.float32))
        if isinstance(model, Program):
            i = torch.from_numpy(np.ascontiguousarray(ids[s:s + batch_rows], dtype=np.int64))
            try:
                out.append(model.logits(d, i).float())
            except (RuntimeError, ValueError, IndexError, TypeError) as e:  # e.g. an id past a table
                raise CtrnasError(f"{model.path}: cannot score these rows ({one_line(e)}): the program does "
                                  "not fit its model card") from None
        else:
            out.append(model(d, kjt_of(ids[s:s + batch_rows], names)).float())
    return torch.cat(out).numpy() if out else np.zeros(0, np.float32)


class _Tally:
    def __init__(self, max_rejects: int):
        self.max_rejects = max_rejects
        self.written = self.accepted = self.blank = self.padded = 0
        self.by_reason: dict[str, int] = {}
        self.first: list[dict] = []

    def add(self, raw) -> None:
        self.blank += raw.blank
        self.accepted += raw.accepted
        self.padded += getattr(raw, "padded", 0)
        for r in raw.rejects:
            self.by_reason[r.reason] = self.by_reason.get(r.reason, 0) + 1
            if len(self.first) < self.max_rejects:
                self.first.append({"file": r.file, "line": r.line, "field": r.field, "reason": r.reason,
                                   "detail": r.detail})

    def rows(self) -> dict:
        rejected = sum(self.by_reason.values())
        # read = accepted + rejected; written = accepted, except where a format expands rows (KDD impressions)
        return {"read": self.accepted + rejected, "accepted": self.accepted, "written": self.written,
                "rejected": rejected,
                "rejected_by_reason": dict(sorted(self.by_reason.items())), "blank_lines": self.blank,
                **({"padded": self.padded} if self.padded else {})}


def _raw_chunks(pre: Preprocess, paths: list[str], kind: str | None, tally: _Tally, bar, pad: bool | None = None):
    """(file, lines, labels, dense, ids) per reader chunk of each raw file; `pad`: pad_missing_trailing (None:
    as the model's data was prepared)."""
    changes = {} if pad is None else {"pad_missing_trailing": pad}
    for path in paths:
        reader = pre.reader([path], kind, labeled=has_labels(pre, path), on_error="skip", progress=False, **changes)
        for raw in reader.batches():
            tally.add(raw)
            bar.update(raw.accepted + len(raw.rejects))
            if len(raw.labels):
                yield (Path(path).name, raw.lines, *pre.encode(raw))


def _prepared_chunks(folder: Path, split: str, schema, bar):
    """(file, rows, labels, dense, ids) per record batch of a prepared dataset folder's split."""
    from ctrnas.data.dataset import load_schema, split_files

    if schema is not None and load_schema(folder).sparse != schema.sparse:
        raise CtrnasError(f"{folder}: its fields or table sizes are not the model's: prepared from other data")
    schema = schema or load_schema(folder)
    from ctrnas.safeload import parquet_errors, parquet_file

    for f in split_files(folder, split):
        first = 1
        with parquet_errors(f, "data shard"):  # a shard damaged past its footer
            for b in parquet_file(f, "data shard").iter_batches(batch_size=65536):
                n = b.num_rows
                dense = np.stack([column_numpy(b.column(c)) for c in schema.dense], 1).astype(np.float32) \
                    if schema.dense else np.zeros((n, 0), np.float32)
                ids = np.stack([column_numpy(b.column(c)) for c in schema.sparse_names], 1).astype(np.int64)
                bar.update(n)
                yield f"{split}/{f.name}", np.arange(first, first + n), column_numpy(b.column("label")), dense, ids
                first += n


def predict_file(model_dir, inputs, out, kind: str | None = None, split: str = "test", data_dir=None,
                 batch_rows: int = 8192, overwrite: bool = False, progress: bool = True,
                 max_rejects: int = 100, summary=None, pad_missing_trailing: bool | None = None,
                 program: bool = True) -> dict:
    """Score `inputs` (raw files of the model's format, or one prepared dataset folder: its `split`) into
    Parquet file `out`; returns the summary (rows read/written/rejected, log loss and AUC if labelled, and
    `scored_with`: model.pt2 or the rebuilt model, and why), also written as strict JSON to `summary` if given.
    `pad_missing_trailing`: None reads rows as the model's data was prepared. `program=False`: score with the
    model rebuilt from model.pt (TorchRec) even where model.pt2 would do."""
    t0 = time.perf_counter()
    inputs = [str(p) for p in ([inputs] if isinstance(inputs, (str, Path)) else inputs)]
    if not inputs:
        raise CtrnasError("predict: no input given (--input)")
    for p in inputs:
        if not Path(p).exists():
            raise PathError(p, "no such file or folder")
        if not Path(p).is_dir():
            check_regular(p, "input file")  # a FIFO or a device (/dev/zero) would be read forever
    out = Path(out)
    if out.is_dir():
        raise PathError(str(out), "is a folder; --out names the Parquet file to write")
    if out.exists() and not overwrite:
        raise PathError(str(out), "exists; choose another --out, or replace it (--overwrite)")
    folder = len(inputs) == 1 and Path(inputs[0]).is_dir()
    import contextlib

    from ctrnas.locks import reading

    # a prepared folder (and the data folder giving the transform) is read under a reader's lock: no
    # `prepare` replaces it meanwhile
    with reading(inputs[0], "predict") if folder else contextlib.nullcontext(), \
            reading(data_dir, "predict") if data_dir else contextlib.nullcontext():
        return _predict_file(model_dir, inputs, out, kind, split, data_dir, batch_rows, progress, max_rejects,
                             summary, folder, t0, pad_missing_trailing, program)


def _predict_file(model_dir, inputs, out, kind, split, data_dir, batch_rows, progress, max_rejects, summary,
                  folder, t0, pad=None, program: bool = True) -> dict:
    from tqdm import tqdm

    from ctrnas.train.metrics import StreamingMetrics, finite_or_none

    model, pre, how = load_model(model_dir, data_dir, program)
    schema = getattr(model, "schema", None) or (pre.schema if pre else None)
    if schema is None and folder:  # a baseline (no schema of its own) of data with no transform: the folder's
        from ctrnas.data.dataset import load_schema

        schema = load_schema(inputs[0])
    if not folder and pre is None:
        raise CtrnasError(_no_transform(model_dir, data_dir))
    labelled = folder or any(has_labels(pre, p) for p in inputs)
    tally, metrics = _Tally(max_rejects), StreamingMetrics()
    fields = OUT_SCHEMA + ([("label", pa.float32())] if labelled else [])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        with tqdm(desc="predict", unit="rows", unit_scale=True, disable=not progress, leave=False) as bar, \
                pq.ParquetWriter(tmp, pa.schema(fields)) as writer:
            chunks = _prepared_chunks(Path(inputs[0]), split, schema, bar) if folder else \
                _raw_chunks(pre, inputs, kind, tally, bar, pad)
            names = schema.sparse_names
            for name, lines, labels, dense, ids in chunks:
                z = logits_of(model, dense, ids, names, batch_rows)
                known = ~np.isnan(labels)
                if known.any():
                    metrics.update(z[known], labels[known])
                cols = {"file": pa.array([name] * len(z), pa.string()),
                        "line": pa.array(lines if lines is not None else np.full(len(z), -1), pa.int64()),
                        "probability": pa.array(torch.sigmoid(torch.from_numpy(z)).numpy(), pa.float32())}
                if labelled:
                    cols["label"] = pc.if_else(pa.array(known), pa.array(labels, pa.float32()),
                                               pa.scalar(None, pa.float32()))
                writer.write_table(pa.table(cols, schema=pa.schema(fields)))
                tally.written += len(z)
        if not folder and tally.accepted == 0 and tally.by_reason:
            first = tally.first[0] if tally.first else {}
            raise CtrnasError(f"{', '.join(inputs)}: no row accepted ({sum(tally.by_reason.values())} rejected, "
                              f"e.g. {first.get('file')}, line {first.get('line')}: {first.get('reason')}): "
                              "not the model's format? nothing written")
        tmp.replace(out)
    except (OSError, RuntimeError) as e:
        if not disk_full(e):
            raise
        raise PathError(str(out), f"cannot write the predictions: {FULL}") from None
    finally:
        tmp.unlink(missing_ok=True)
    seconds = time.perf_counter() - t0
    rows = tally.rows() if not folder else {"read": tally.written, "accepted": tally.written, "written": tally.written,
                                                    "rejected": 0}
    m = metrics.result().to_dict() if metrics.rows else None
    result = finite_or_none({"model": str(model_dir), "inputs": inputs, "out": str(out), "rows": rows,
                           "metrics": m, "first_rejects": tally.first, "scored_with": how, "seconds": round(seconds, 3),
                           "rows_per_second": round(rows["read"] / seconds, 1) if seconds > 0 else None})
    if summary:
        from ctrnas.data.dataset import atomic_write_text
        from ctrnas.train.metrics import strict_json

        atomic_write_text(summary, strict_json(result) + "\n")
    return result


def _as_text_columns(table: pa.Table, kind: str) -> pa.RecordBatch:
    """The table as its reader sees a parsed chunk: empty strings are missing, and for the ad-log formats
    (whose readers compare text, '1' for a click) integer columns are text."""
    cols = []
    for c in table.columns:
        c = c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
        if pa.types.is_dictionary(c.type):
            c = c.cast(c.type.value_type)
        if kind != "table" and pa.types.is_integer(c.type):
            c = c.cast(pa.string())
        if pa.types.is_string(c.type) or pa.types.is_large_string(c.type):
            c = pc.if_else(pc.equal(c, ""), pa.scalar(None, c.type), c).cast(pa.string())
        cols.append(c)
    return pa.RecordBatch.from_arrays(cols, names=table.column_names)


def predict_table(model_dir, table, kind: str | None = None, data_dir=None, batch_rows: int = 8192,
                  program: bool = True) -> pa.Table:
    """Score the rows of an Arrow table (a pandas DataFrame is converted) holding the raw columns of the
    model's format. One output row per input row, aligned: `line` (1-based), `probability` (null where the
    row is rejected), `reject` (the reason, else null) and `label` when the input has the label column.
    `program`: as `predict_file`'s."""
    from ctrnas.data.readers.base import LinedBatch

    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    model, pre, _ = load_model(model_dir, data_dir, program)
    if pre is None:
        raise CtrnasError(f"{model_dir}: no transform.json beside the model (give data_dir)")
    reader = pre.reader([], kind, labeled=False, on_error="skip", progress=False)
    labelled = reader.label_column in table.column_names
    if labelled:
        reader = pre.reader([], kind, on_error="skip", progress=False)
    missing = [c for c in reader.columns if c not in table.column_names] if pre.kind != "table" else \
        [c for c in reader.declared if c not in table.column_names]
    if missing:
        raise CtrnasError(f"table: column(s) {missing} not found (has: {', '.join(table.column_names[:50])})")
    if pre.kind == "table":
        reader.columns = table.column_names
    else:
        table = table.select(reader.columns)
    n = table.num_rows
    raw = reader.convert(LinedBatch(_as_text_columns(table, pre.kind), np.arange(1, n + 1), []), "table",
                         blanks=False)  # an all-empty row of a table is a row, as in Parquet
    labels, dense, ids = pre.encode(raw)
    prob = np.full(n, np.nan, dtype=np.float32)
    z = logits_of(model, dense, ids, pre.schema.sparse_names, batch_rows)
    prob[raw.lines - 1] = torch.sigmoid(torch.from_numpy(z)).numpy()
    reason = [None] * n
    for r in raw.rejects:
        reason[r.line - 1] = r.reason
    cols = {"line": pa.array(np.arange(1, n + 1)), "probability": pa.array(prob, mask=np.isnan(prob)),
            "reject": pa.array(reason, pa.string())}
    if labelled:
        lab = np.full(n, np.nan, dtype=np.float32)
        lab[raw.lines - 1] = labels
        cols["label"] = pa.array(lab, mask=np.isnan(lab))
    return pa.table(cols)
