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

import errno
import json
import os
import sys
import time
from pathlib import Path

import pyarrow as pa

from ctrnas.config import to_dict
from ctrnas.data.dataset import SPLITS, DatasetWriter, check_replaceable, raw_source, write_source
from ctrnas.data.encoder import Encoder, sizes_by_data
from ctrnas.data.ownership import REJECTS_FILE, remove_transient
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.prepare_passes import NoBar, accepted_batches, progress_bar, staged, unstaged, write_splits
from ctrnas.data.prepare_tally import Tally, check_rows, summary, write_rejects
from ctrnas.data.preprocess import TRANSFORM_FILE, Preprocess
from ctrnas.data.readers import make_reader
from ctrnas.data.readers.formats import get_format
from ctrnas.data.readers.base import input_info
from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.data.split import Splitter
from ctrnas.data.vocab import Vocabulary
from ctrnas.errors import CtrnasError, PathError
from ctrnas.locks import folder_lock
from ctrnas.safeload import check_regular

__all__ = ["STAGING_GLOB", "dumps", "prepare", "summary"]  # summary lives in prepare_tally.py

STAGING_GLOB = ".staging-*.arrows"


def _arrow_schema(reader) -> pa.Schema:
    return pa.schema([("label", pa.float32())] + [(n, pa.float32()) for n in reader.dense_names]
                     + [(n, pa.int64()) for n in reader.sparse_names])


def _check_inputs(kind: str, inputs: list[str], cfg: PrepareConfig) -> None:
    fmt = get_format(kind)  # an unknown format stops here, naming the known ones
    if not inputs:
        raise CtrnasError(f"prepare {kind}: no input files given (--input)")
    for p in inputs + [getattr(cfg, f) for f in fmt.input_fields if getattr(cfg, f)]:
        if Path(p).is_dir():
            raise PathError(p, f"is a folder; prepare {kind} --input takes raw data files")
        if not Path(p).exists():
            raise PathError(p, "no such file")
        if not os.access(p, os.R_OK):
            raise PathError(p, "cannot read this input file: permission denied")
        check_regular(p, "raw input file")  # a FIFO or a device (/dev/zero) would be read forever


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
        except BaseException as e:
            remove_transient(out)  # the temp files of the write that failed (names only ctrnas makes)
            if isinstance(e, OSError) and (e.errno in _FULL or "No space left" in str(e)):
                raise PathError(e.filename or out, "cannot write the dataset: no space left on the device (or "
                                "quota reached); free some space and run the same command again") from None
            if not isinstance(e, OSError) or not e.filename or \
                    not Path(os.path.abspath(e.filename)).is_relative_to(out.absolute()):
                raise  # a file or folder in `out` we could not write is named below; others propagate
            raise PathError(e.filename, f"cannot write the dataset: {e.strerror}") from None
    empty = [s for s in ("val", "test") if not meta["splits"].get(s, {}).get("rows")]
    if empty and meta["splits"].get("train", {}).get("rows"):
        print(f"ctrnas: warning: {out}: the {' and '.join(empty)} split{'s are' if len(empty) > 1 else ' is'} "
              f"empty: training on this folder reports no {' or '.join(empty)} metrics", file=sys.stderr)
    for label, what in ((0, "no click"), (1, "only clicks")):  # one class: nothing to learn, AUC undefined
        one = [s for s in SPLITS if meta["splits"].get(s, {}).get("ctr") == label]
        if one:
            names = f"{', '.join(one[:-1])} and {one[-1]}" if len(one) > 1 else one[0]
            print(f"ctrnas: warning: {out}: the {names} split{'s have' if len(one) > 1 else ' has'} "
                  f"{what} (every label {label}): AUC is undefined there", file=sys.stderr)
    return meta


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _prepare(reader, inputs: list[str], out: Path, cfg: PrepareConfig, overwrite: bool) -> dict:
    t0 = time.time()
    writer = DatasetWriter(out, _arrow_schema(reader), cfg.rows_per_shard, overwrite)  # removes meta.json first
    tally = Tally(cfg)
    encoder = Encoder(reader, cfg, [])
    ratios = tuple(cfg.split_ratios)
    if cfg.split == "random" and cfg.sparse_encoding != "vocab" and not sizes_by_data(cfg):  # one pass
        splitter = Splitter(cfg.split, ratios, cfg.seed)
        with progress_bar(cfg, "write", None) as bar:
            chunks = ((raw.labels, encoder.encode(raw)) for raw in accepted_batches(reader, tally, bar))
            write_splits(writer, splitter, tally, chunks, NoBar())
    else:
        staging = out / f".staging-{os.getpid()}.arrows"
        try:
            labels, rows, counters = staged(reader, cfg, encoder, tally, staging)
            splitter = Splitter(cfg.split, ratios, cfg.seed, labels_seen=labels, total_rows=rows)
            encoder.vocabs = [Vocabulary.from_counter(c, cfg.min_count) for c in counters]
            if encoder.seen is not None:
                encoder.size_tables()
            del counters  # the category counts are no longer needed
            with progress_bar(cfg, "write", rows) as bar:
                write_splits(writer, splitter, tally, unstaged(encoder, staging, rows), bar)
        finally:
            staging.unlink(missing_ok=True)

    schema = DatasetSchema("label", tuple(reader.dense_names),
                           tuple(SparseFeature(n, c) for n, c in zip(reader.sparse_names, encoder.cardinalities())))
    if tally.kept:
        write_rejects(out, tally.kept)
    check_rows(inputs, out, tally)
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


def dumps(meta: dict) -> str:
    return json.dumps(meta, indent=2)
