"""Raw files -> a prepared dataset folder (train/ val/ test/ Parquet shards + meta.json), in bounded memory.

Passes over the raw files (each streamed in `block_size` chunks, never held whole):
  scan   only when needed: label counts for the stratified split, row count for the order split, category
         counts for vocabularies. In `on_error: raise` mode it also finds the first bad row before any
         shard is written.
  write  validate, encode (transforms.py, vocab.py), assign splits (split.py), write shards
         (DatasetWriter: meta.json removed first, written last, so an interrupted run leaves a folder that
         reads as incomplete; re-running the same command rebuilds it from scratch).
Memory: one chunk at a time, plus 1 byte per row for the stratified fold arrays and 16 bytes per distinct
category for vocabularies; never the rows themselves.
Invariant recorded in meta.json: rows read = rows accepted + rows rejected (blank lines are not rows).
With `on_error: skip`, the first `max_rejects` rejects go to DIR/rejects.tsv: file, line (1-based physical
line of the raw file), field, reason, detail, text (tab, newline and backslash escaped as \\t \\n \\\\).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from ctrnas.config import to_dict
from ctrnas.data.dataset import SPLITS, DatasetWriter, atomic_write_text
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.readers import make_reader
from ctrnas.data.readers.base import Reject, input_info
from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.data.split import LabelOrder, Splitter
from ctrnas.data.transforms import dense_transform, hash_ids
from ctrnas.data.vocab import KeyCounter, Vocabulary
from ctrnas.errors import CtrnasError

REJECTS_FILE = "rejects.tsv"


def _progress(cfg: PrepareConfig, desc: str, total: int | None):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="rows", unit_scale=True, disable=not cfg.progress, leave=False)


def _arrow_schema(reader) -> pa.Schema:
    return pa.schema([("label", pa.float32())] + [(n, pa.float32()) for n in reader.dense_names]
                     + [(n, pa.int64()) for n in reader.sparse_names])


class _Scan:
    """What the scan pass learns: label order/counts, output rows, category counts."""

    def __init__(self, reader, cfg: PrepareConfig):
        self.labels = LabelOrder()
        self.rows = 0
        self.counters = [KeyCounter() for _ in reader.sparse_names] if cfg.sparse_encoding == "vocab" else []
        with _progress(cfg, "scan", None) as bar:
            for raw in reader.batches(keys=bool(self.counters)):
                if cfg.on_error == "raise" and raw.rejects:
                    raise raw.rejects[0].error()
                self.labels.add(raw.labels)
                self.rows += len(raw.labels)
                for j, counter in enumerate(self.counters):
                    counter.add(raw.keys[j][~raw.missing[j]])
                bar.update(raw.accepted + len(raw.rejects))


class _BackgroundWriter:
    """Runs DatasetWriter.write on one worker thread (in order): Parquet encoding overlaps the parsing."""

    def __init__(self, writer: DatasetWriter, depth: int = 2):
        from concurrent.futures import ThreadPoolExecutor

        self.writer, self.depth = writer, depth
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctrnas-write")
        self.pending = []

    def write(self, split: str, table: pa.Table) -> None:
        self.pending.append(self.pool.submit(self.writer.write, split, table))
        while len(self.pending) > self.depth:  # bound the memory held by queued tables
            self.pending.pop(0).result()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            for f in self.pending:
                if exc_type is None:
                    f.result()  # a failed write surfaces here
                else:
                    f.cancel()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
        return False


class _SplitBuffer:
    """Collects a split's rows until a Parquet row group's worth, so small splits do not make tiny groups."""

    ROWS = 1 << 16

    def __init__(self, writer: DatasetWriter, bg: _BackgroundWriter, split: str):
        self.writer, self.bg, self.split, self.parts, self.rows = writer, bg, split, [], 0

    def add(self, batch: pa.RecordBatch) -> None:
        self.parts.append(batch)
        self.rows += batch.num_rows
        if self.rows >= min(self.ROWS, self.writer.writers[self.split].rows_per_shard):
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.bg.write(self.split, pa.Table.from_batches(self.parts))  # chunks go into one row group
        self.parts, self.rows = [], 0


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _write_rejects(out: Path, rejects: list[Reject]) -> None:
    lines = ["file\tline\tfield\treason\tdetail\ttext"]
    lines += ["\t".join([_escape(r.file), str(r.line), r.field or "", r.reason, _escape(r.detail), _escape(r.text)])
              for r in rejects]
    atomic_write_text(out / REJECTS_FILE, "\n".join(lines) + "\n")


class _Encoder:
    """Turns RawBatches into output record batches and keeps the per-split and per-field tallies."""

    def __init__(self, reader, cfg: PrepareConfig, vocabs: list[Vocabulary]):
        self.reader, self.cfg, self.vocabs = reader, cfg, vocabs
        self.buckets = [cfg.buckets(f) for f in reader.sparse_names]
        self.max_id = np.zeros(len(self.buckets), dtype=np.int64)

    def encode(self, raw) -> pa.RecordBatch:
        cols = {"label": pa.array(raw.labels.astype(np.float32))}
        for j, name in enumerate(self.reader.dense_names):
            cols[name] = pa.array(dense_transform(raw.dense[j], self.cfg.dense_transform))
        for j, name in enumerate(self.reader.sparse_names):
            if self.vocabs:
                ids = self.vocabs[j].lookup(raw.keys[j], raw.missing[j])
            else:
                ids = hash_ids(raw.keys[j], raw.missing[j], self.buckets[j])
            self.max_id[j] = max(self.max_id[j], int(ids.max()))
            cols[name] = pa.array(ids)
        return pa.RecordBatch.from_pydict(cols)

    def cardinalities(self) -> list[int]:
        """Vocab: its size + 2; hash: 1 + the largest id written (at most `buckets`), so small-valued
        fields (hour of day, gender) get small tables."""
        if self.vocabs:
            return [v.cardinality for v in self.vocabs]
        return [int(min(b, max(m + 1, 2))) for b, m in zip(self.buckets, self.max_id)]

    def transforms(self) -> dict:
        cfg = self.cfg
        out = {n: {"kind": "dense", "transform": cfg.dense_transform, "missing": 0.0} for n in self.reader.dense_names}
        for j, name in enumerate(self.reader.sparse_names):
            if self.vocabs:
                v = self.vocabs[j]
                out[name] = {"kind": "sparse", "encoding": "vocab", "min_count": cfg.min_count, "vocab_size": v.size,
                             "distinct_seen": v.distinct_seen, "ids": "0 missing, 1 out-of-vocabulary, 2.. by frequency"}
            else:
                out[name] = {"kind": "sparse", "encoding": "hash", "buckets": self.buckets[j],
                             "ids": "0 missing, 1 + key mod (buckets - 1)"}
        return out


class _Tally:
    """Rows read/accepted/rejected/written, per reason and per split."""

    def __init__(self, cfg: PrepareConfig):
        self.cfg = cfg
        self.accepted = self.blank = self.written = 0
        self.by_reason: dict[str, int] = {}
        self.kept: list[Reject] = []
        self.rows = np.zeros(3, dtype=np.int64)
        self.clicks = np.zeros(3, dtype=np.float64)

    def rejects(self, rejects: list[Reject]) -> None:
        if not rejects:
            return
        if self.cfg.on_error == "raise":
            raise rejects[0].error()
        for r in rejects:
            self.by_reason[r.reason] = self.by_reason.get(r.reason, 0) + 1
        self.kept.extend(rejects[:max(0, self.cfg.max_rejects - len(self.kept))])

    def meta(self) -> dict:
        rejected = sum(self.by_reason.values())
        return {"read": self.accepted + rejected, "accepted": self.accepted, "rejected": rejected,
                "rejected_by_reason": dict(sorted(self.by_reason.items())), "written": self.written,
                "blank_lines": self.blank}


def _check_inputs(kind: str, inputs: list[str]) -> None:
    if not inputs:
        raise CtrnasError(f"prepare {kind}: no input files given (--input)")
    for p in inputs:
        if not Path(p).is_file():
            raise CtrnasError(f"prepare {kind}: input {p}: no such file")


def prepare(kind: str, inputs: list[str], out: str | Path, cfg: PrepareConfig) -> dict:
    """Prepare dataset folder `out` from raw files `inputs` of format `kind`; returns its meta.json."""
    t0 = time.time()
    inputs = [str(p) for p in inputs]
    _check_inputs(kind, inputs)
    reader = make_reader(kind, inputs, cfg)
    out = Path(out)
    writer = DatasetWriter(out, _arrow_schema(reader), cfg.rows_per_shard)  # removes meta.json first
    (out / REJECTS_FILE).unlink(missing_ok=True)

    scan = _Scan(reader, cfg) if cfg.split != "random" or cfg.sparse_encoding == "vocab" else None
    splitter = Splitter(cfg.split, tuple(cfg.split_ratios), cfg.seed,
                        labels_seen=scan.labels if scan else None, total_rows=scan.rows if scan else None)
    encoder = _Encoder(reader, cfg, [Vocabulary.from_counter(c, cfg.min_count) for c in scan.counters] if scan else [])
    total = scan.rows if scan else None
    del scan  # the category counts are no longer needed
    tally = _Tally(cfg)
    with _progress(cfg, "write", total) as bar, _BackgroundWriter(writer) as bg:
        buffers = [_SplitBuffer(writer, bg, split) for split in SPLITS]
        for raw in reader.batches():
            tally.rejects(raw.rejects)
            tally.accepted += raw.accepted
            tally.blank += raw.blank
            n = len(raw.labels)
            if n == 0:
                continue
            table = encoder.encode(raw)
            codes = splitter.assign(raw.labels)
            for s in range(len(SPLITS)):
                mask = codes == s
                m = int(mask.sum())
                if m:
                    buffers[s].add(table.filter(pa.array(mask)) if m < n else table)
                    tally.rows[s] += m
                    tally.clicks[s] += float(raw.labels[mask].sum())
            tally.written += n
            bar.update(n)
        for b in buffers:
            b.flush()

    schema = DatasetSchema("label", tuple(reader.dense_names),
                           tuple(SparseFeature(n, c) for n, c in zip(reader.sparse_names, encoder.cardinalities())))
    if tally.kept:
        _write_rejects(out, tally.kept)
    meta = {
        "source": {**reader.describe(), "inputs": input_info(inputs)},
        "schema": schema.to_json(),
        "transforms": encoder.transforms(),
        "rows": tally.meta(),
        "split": splitter.describe(),
        "splits": {s: {"ctr": float(tally.clicks[i] / tally.rows[i]) if tally.rows[i] else None,
                       "clicks": int(tally.clicks[i])} for i, s in enumerate(SPLITS)},
        "rejects_file": REJECTS_FILE if tally.kept else None,
        "settings": to_dict(cfg),
        "seconds": round(time.time() - t0, 3),
    }
    return writer.finish(meta)


def summary(meta: dict, out: str | Path) -> str:
    """One readable paragraph about a finished preparation."""
    rows = meta["rows"]
    parts = [f"{s} {meta['splits'][s]['rows']:,} rows (CTR {meta['splits'][s]['ctr']:.4f})"
             if meta["splits"][s]["ctr"] is not None else f"{s} 0 rows" for s in SPLITS]
    text = (f"Prepared {meta['source']['format']} from {len(meta['source']['inputs'])} file(s) into {out}: "
            f"read {rows['read']:,} rows, accepted {rows['accepted']:,}, rejected {rows['rejected']:,}")
    if rows["rejected"]:
        reasons = ", ".join(f"{k} {v:,}" for k, v in rows["rejected_by_reason"].items())
        text += f" ({reasons}; first ones in {Path(out) / REJECTS_FILE})"
    if rows["blank_lines"]:
        text += f", skipped {rows['blank_lines']:,} blank lines"
    text += f"; wrote {rows['written']:,}: " + ", ".join(parts)
    text += (f". {len(meta['schema']['dense'])} dense ({meta['settings']['dense_transform']}), "
             f"{len(meta['schema']['sparse'])} sparse ({meta['settings']['sparse_encoding']}), "
             f"split {meta['split']['method']}; {meta['seconds']:.1f} s.")
    return text


def dumps(meta: dict) -> str:
    return json.dumps(meta, indent=2)
