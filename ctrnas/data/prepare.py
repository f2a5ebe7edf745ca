"""Raw files -> a prepared dataset folder (train/ val/ test/ Parquet shards + meta.json), in bounded memory.

The raw files are parsed once, streamed in `block_size` chunks (never held whole):
  read   validate, encode (transforms.py, vocab.py), count rejects. With a random split each chunk is
         assigned (split.py) and written to its shards (DatasetWriter: meta.json removed first, written last,
         so an interrupted run leaves a folder that reads as incomplete; re-running the same command rebuilds
         it from scratch) at once: one pass.
  stage  when something must be known before the first row is placed (label counts for the stratified
         split, the row count for the order split, category counts for vocabularies, the hash ids seen for
         tables sized by the data: `hash_table_size: data`, the default), the encoded chunks
         go to an uncompressed Arrow IPC stream in the output folder instead (`.staging-PID.arrows`,
         ~264 bytes per Criteo row with hashed ids), then are read back one at a time, assigned and
         written, and the staging file is deleted. This replaces a second parse of the raw text (it
         cost about as much CPU as the first). In `on_error: raise` mode the first bad row stops the run
         before any shard is written.
Memory: one chunk at a time, plus 1 byte per row for the stratified fold arrays, 16 bytes per distinct
category for vocabularies and 1 byte per hash bucket for sizing tables by the data; never the rows themselves.
The transform (transform.json, vocab.parquet: ctrnas.data.preprocess) is written beside the shards.
Invariant recorded in meta.json: rows read = rows accepted + rows rejected (blank lines are not rows).
With `on_error: skip`, the first `max_rejects` rejects go to DIR/rejects.tsv: file, line (1-based physical
line of the raw file), field, reason, detail, text (tab, newline and backslash escaped as \\t \\n \\\\).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from ctrnas.config import to_dict
from ctrnas.data.dataset import SPLITS, DatasetWriter, atomic_write_text, check_replaceable, raw_source, write_source
from ctrnas.data.ownership import REJECTS_FILE
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.preprocess import TRANSFORM_FILE, Preprocess
from ctrnas.data.readers import make_reader
from ctrnas.data.readers.base import Reject, input_info
from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.data.split import LabelOrder, Splitter
from ctrnas.data.transforms import dense_transform, hash_ids
from ctrnas.data.vocab import KeyCounter, Vocabulary
from ctrnas.errors import CtrnasError, DataFormatError, PathError
from ctrnas.locks import folder_lock


def _progress(cfg: PrepareConfig, desc: str, total: int | None):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="rows", unit_scale=True, disable=not cfg.progress, leave=False)


def _arrow_schema(reader) -> pa.Schema:
    return pa.schema([("label", pa.float32())] + [(n, pa.float32()) for n in reader.dense_names]
                     + [(n, pa.int64()) for n in reader.sparse_names])


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
        self.staged_keys = cfg.sparse_encoding == "vocab"
        # hash ids seen per field (1 byte per bucket), to size the tables by the data after the pass
        self.seen = [np.zeros(b, dtype=bool) for b in self.buckets] if sizes_by_data(cfg) else None
        self.rows: list[Vocabulary | None] = []  # per hashed field: its seen ids -> rows 2.. (or None: as hashed)

    def _dense(self, raw) -> dict:
        cols = {"label": pa.array(raw.labels.astype(np.float32))}
        for j, name in enumerate(self.reader.dense_names):
            cols[name] = pa.array(dense_transform(raw.dense[j], self.cfg.dense_transform))
        return cols

    def _ids(self, j: int, ids: np.ndarray) -> pa.Array:
        self.max_id[j] = max(self.max_id[j], int(ids.max()))
        return pa.array(ids)

    def encode(self, raw) -> pa.RecordBatch:
        cols = self._dense(raw)
        for j, name in enumerate(self.reader.sparse_names):
            if self.vocabs:
                ids = self.vocabs[j].lookup(raw.keys[j], raw.missing[j])
            else:
                ids = hash_ids(raw.keys[j], raw.missing[j], self.buckets[j])
                if self.seen is not None:
                    self.seen[j][ids] = True
            cols[name] = self._ids(j, ids)
        return pa.RecordBatch.from_pydict(cols)

    def stage(self, raw) -> pa.RecordBatch:
        """What the staging file holds: the output batch, except that with vocabularies (not known yet)
        the sparse columns are the uint64 keys, null where missing."""
        if not self.staged_keys:
            return self.encode(raw)
        cols = self._dense(raw)
        for j, name in enumerate(self.reader.sparse_names):
            cols[name] = pa.array(raw.keys[j], mask=raw.missing[j])
        return pa.RecordBatch.from_pydict(cols)

    def unstage(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The output batch of a staged one (vocab lookups; hashed batches are final already)."""
        if self.rows:
            return self._renumber(batch)
        if not self.staged_keys:
            return batch
        cols = {n: batch.column(n) for n in ("label",) + tuple(self.reader.dense_names)}
        for j, name in enumerate(self.reader.sparse_names):
            col = batch.column(name)
            keys = np.frombuffer(col.buffers()[1], dtype=np.uint64, count=len(col), offset=col.offset * 8)
            cols[name] = self._ids(j, self.vocabs[j].lookup(keys, np.asarray(col.is_null())))
        return pa.RecordBatch.from_pydict(cols)

    def size_tables(self) -> None:
        """After the pass: a hashed field with fewer distinct ids than its table has rows gets its seen ids
        re-numbered 2.. in id order (0 stays missing; 1 is an id not seen here, e.g. when scoring new rows),
        so its table has distinct + 2 rows instead of up to `buckets`."""
        rows = []
        for j, seen in enumerate(self.seen):
            seen[0] = False  # id 0 = missing, not a hashed value
            ids = np.flatnonzero(seen).astype(np.uint64)
            small = len(ids) + 2 < self._hashed_rows(j)
            rows.append(Vocabulary.restore(ids, np.arange(2, len(ids) + 2)) if small else None)
        self.seen = None
        if any(v is not None for v in rows):
            self.rows = rows
            self.max_id[:] = 0  # re-measured from the written ids

    def _renumber(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = {n: batch.column(n) for n in batch.schema.names}
        for j, name in enumerate(self.reader.sparse_names):
            ids = np.asarray(cols[name])
            if self.rows[j] is not None:
                ids = self.rows[j].lookup(ids.view(np.uint64), ids == 0)
            cols[name] = self._ids(j, ids)
        return pa.RecordBatch.from_pydict(cols)

    def _hashed_rows(self, j: int) -> int:
        if self.rows and self.rows[j] is not None:
            return self.rows[j].cardinality
        return int(min(self.buckets[j], max(self.max_id[j] + 1, 2)))

    def cardinalities(self) -> list[int]:
        """Vocab: its size + 2; hash: 1 + the largest id written (at most `buckets`), so small-valued
        fields (hour of day, gender) get small tables."""
        if self.vocabs:
            return [v.cardinality for v in self.vocabs]
        return [self._hashed_rows(j) for j in range(len(self.buckets))]

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
                             "table_rows": self._hashed_rows(j), "ids": "0 missing, 1 + key mod (buckets - 1)"}
                if self.rows and self.rows[j] is not None:
                    out[name].update({"encoding": "hash+rows", "distinct_ids": self.rows[j].size, "ids":
                                      "0 missing, 1 unseen, 2.. the distinct hashed ids (1 + key mod (buckets - 1)) "
                                      "seen, in id order"})
        return out


class _Tally:
    """Rows read/accepted/rejected/written, per reason and per split."""

    def __init__(self, cfg: PrepareConfig):
        self.cfg = cfg
        self.accepted = self.blank = self.written = self.padded = 0
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
        out = {"read": self.accepted + rejected, "accepted": self.accepted, "rejected": rejected,
               "rejected_by_reason": dict(sorted(self.by_reason.items())), "written": self.written,
               "blank_lines": self.blank}
        if self.cfg.pad_missing_trailing:
            out["padded"] = self.padded  # accepted rows read with missing trailing fields filled as empty
        return out


class _NoBar:
    def update(self, n: int) -> None:
        pass


def sizes_by_data(cfg: PrepareConfig) -> bool:
    """Whether hashed fields get tables sized by the ids seen (`hash_table_size: data`)."""
    return cfg.sparse_encoding == "hash" and cfg.hash_table_size == "data"


def _check_inputs(kind: str, inputs: list[str], cfg: PrepareConfig) -> None:
    if not inputs:
        raise CtrnasError(f"prepare {kind}: no input files given (--input)")
    for p in inputs + ([cfg.kdd_profile] if kind == "kdd2012" and cfg.kdd_profile else []):
        if Path(p).is_dir():
            raise PathError(p, f"is a folder; prepare {kind} --input takes raw data files")
        if not Path(p).is_file():
            raise PathError(p, "no such file")
        if not os.access(p, os.R_OK):
            raise PathError(p, "cannot read this input file: permission denied")


def _check_rows(inputs: list[str], out: Path, tally: "_Tally") -> None:
    """No dataset from no rows: every row of the input was rejected (empty files fail in the reader)."""
    if tally.accepted:
        return
    rows = tally.meta()
    reasons = ", ".join(f"{k} {v:,}" for k, v in rows["rejected_by_reason"].items())
    where = f"; the first ones are in {out / REJECTS_FILE}" if tally.kept else ""
    raise DataFormatError(", ".join(inputs), None, None,
                          f"no rows left to prepare: all {rows['rejected']:,} rows read were rejected ({reasons}){where}")


def _heap_trimmer():
    """glibc's malloc_trim, or None (another libc)."""
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _heap_trimmer()


def _release_heap() -> None:
    """Hand freed heap memory back to the OS once per chunk. Every chunk allocates and frees ~100 MB of numpy
    arrays and bytes on three threads; glibc keeps freed memory in per-thread arenas, and without this the
    peak RSS crept up with the number of chunks (measured VmHWM over imports, 1M vs 4M Criteo rows: 354 vs
    427 MiB without, 342 vs 373 MiB with; no measurable CPU cost)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _accepted(reader, tally: _Tally, bar):
    """The reader's RawBatches with at least one row; rejects, accepted and blank rows tallied on the way."""
    for raw in reader.batches():
        _release_heap()
        tally.rejects(raw.rejects)
        tally.accepted += raw.accepted
        tally.blank += raw.blank
        tally.padded += raw.padded
        bar.update(raw.accepted + len(raw.rejects))
        if len(raw.labels):
            yield raw


def _write(writer: DatasetWriter, splitter: Splitter, tally: _Tally, items, bar) -> None:
    """Assign the rows of each (labels, output batch) to splits and write them to their shards."""
    with _BackgroundWriter(writer) as bg:
        buffers = [_SplitBuffer(writer, bg, split) for split in SPLITS]
        for labels, table in items:
            n = len(labels)
            codes = splitter.assign(labels)
            for s in range(len(SPLITS)):
                mask = codes == s
                m = int(mask.sum())
                if m:
                    buffers[s].add(table.filter(pa.array(mask)) if m < n else table)
                    tally.rows[s] += m
                    tally.clicks[s] += float(labels[mask].sum())
            tally.written += n
            bar.update(n)
        for b in buffers:
            b.flush()


STAGING_GLOB = ".staging-*.arrows"


def _staged(reader, cfg: PrepareConfig, encoder: _Encoder, tally: _Tally, staging: Path):
    """Pass 1 of a staged run: encode every chunk into the IPC stream `staging`; returns (label order and
    counts, accepted output rows, per-field key counters or [])."""
    labels, rows = LabelOrder(), 0
    counters = [KeyCounter() for _ in reader.sparse_names] if encoder.staged_keys else []
    with _progress(cfg, "read", None) as bar, pa.OSFile(str(staging), "wb") as sink:
        stream = None
        try:
            for raw in _accepted(reader, tally, bar):
                labels.add(raw.labels)
                rows += len(raw.labels)
                for j, counter in enumerate(counters):
                    counter.add(raw.keys[j][~raw.missing[j]])
                batch = encoder.stage(raw)
                if stream is None:
                    stream = pa.ipc.new_stream(sink, batch.schema)
                stream.write_batch(batch)
        finally:
            if stream is not None:
                stream.close()
    return labels, rows, counters


def _unstaged(encoder: _Encoder, staging: Path, rows: int):
    """(labels, output batch) of each staged chunk, read back one at a time."""
    if rows == 0:
        return
    with pa.OSFile(str(staging), "rb") as source:
        for batch in pa.ipc.open_stream(source):
            _release_heap()
            batch = encoder.unstage(batch)
            yield np.asarray(batch.column("label")), batch


def prepare(kind: str, inputs: list[str], out: str | Path, cfg: PrepareConfig, overwrite: bool = False) -> dict:
    """Prepare dataset folder `out` from raw files `inputs` of format `kind`; returns its meta.json.

    The folder is locked while written (ctrnas.locks). A complete folder made from other inputs or settings,
    or one holding files ctrnas did not write, is refused unless `overwrite` (ownership.py); only files
    ctrnas wrote are ever removed. The folder's source record is written last."""
    inputs = [str(p) for p in inputs]
    _check_inputs(kind, inputs, cfg)
    out = Path(out)
    source = raw_source(kind, inputs, to_dict(cfg))
    with folder_lock(out, f"prepare {kind}"):
        check_replaceable(out, source, overwrite, f"--out {str(out)!r}",
                          "Prepare into another folder, or replace it (--overwrite)")
        reader = make_reader(kind, inputs, cfg)
        try:
            meta = _prepare(reader, inputs, out, cfg, overwrite)
            write_source(out, source)
        except OSError as e:  # a file or folder in `out` we could not write (names it); others propagate
            if not e.filename or not Path(os.path.abspath(e.filename)).is_relative_to(out.absolute()):
                raise
            raise PathError(e.filename, f"cannot write the dataset: {e.strerror}") from None
    return meta


def _prepare(reader, inputs: list[str], out: Path, cfg: PrepareConfig, overwrite: bool) -> dict:
    t0 = time.time()
    writer = DatasetWriter(out, _arrow_schema(reader), cfg.rows_per_shard, overwrite)  # removes meta.json first
    tally = _Tally(cfg)
    encoder = _Encoder(reader, cfg, [])
    ratios = tuple(cfg.split_ratios)
    if cfg.split == "random" and cfg.sparse_encoding != "vocab" and not sizes_by_data(cfg):  # one pass
        splitter = Splitter(cfg.split, ratios, cfg.seed)
        with _progress(cfg, "write", None) as bar:
            _write(writer, splitter, tally, ((raw.labels, encoder.encode(raw)) for raw in _accepted(reader, tally, bar)),
                   _NoBar())
    else:
        staging = out / f".staging-{os.getpid()}.arrows"
        try:
            labels, rows, counters = _staged(reader, cfg, encoder, tally, staging)
            splitter = Splitter(cfg.split, ratios, cfg.seed, labels_seen=labels, total_rows=rows)
            encoder.vocabs = [Vocabulary.from_counter(c, cfg.min_count) for c in counters]
            if encoder.seen is not None:
                encoder.size_tables()
            del counters  # the category counts are no longer needed
            with _progress(cfg, "write", rows) as bar:
                _write(writer, splitter, tally, _unstaged(encoder, staging, rows), bar)
        finally:
            staging.unlink(missing_ok=True)

    schema = DatasetSchema("label", tuple(reader.dense_names),
                           tuple(SparseFeature(n, c) for n, c in zip(reader.sparse_names, encoder.cardinalities())))
    if tally.kept:
        _write_rejects(out, tally.kept)
    _check_rows(inputs, out, tally)
    Preprocess(reader.format, cfg, schema, encoder.vocabs or encoder.rows).save(out, own=writer.own)  # travels with models
    meta = {
        "source": {**reader.describe(), "inputs": input_info(inputs)},
        "schema": schema.to_json(),
        "transforms": encoder.transforms(),
        "rows": tally.meta(),
        "split": splitter.describe(),
        "splits": {s: {"ctr": float(tally.clicks[i] / tally.rows[i]) if tally.rows[i] else None,
                       "clicks": int(tally.clicks[i])} for i, s in enumerate(SPLITS)},
        "rejects_file": REJECTS_FILE if tally.kept else None,
        "transform_file": TRANSFORM_FILE,
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
    if rows.get("padded"):
        text += f", filled the missing trailing fields of {rows['padded']:,} rows"
    text += f"; wrote {rows['written']:,}: " + ", ".join(parts)
    text += (f". {len(meta['schema']['dense'])} dense ({meta['settings']['dense_transform']}), "
             f"{len(meta['schema']['sparse'])} sparse ({meta['settings']['sparse_encoding']}), "
             f"split {meta['split']['method']}; {meta['seconds']:.1f} s.")
    return text


def dumps(meta: dict) -> str:
    return json.dumps(meta, indent=2)
