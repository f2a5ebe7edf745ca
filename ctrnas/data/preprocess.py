"""The preprocessing of a prepared dataset, saved as data so a model trained on it can score raw rows.

`prepare` writes two files into the dataset folder, and an export copies them beside the model:
  transform.json    format "ctrnas-transform/1": the raw format, the reader and encoding settings, the
                    dense and sparse field order, each field's encoding and table size
  vocab.parquet     field, key (uint64), id: with vocab encoding every kept category key and its id; with
                    hashing, for the fields whose tables were sized by the data, each seen hash id and its row
`Preprocess.load(folder)` reads them back; `encode(raw)` turns a reader's RawBatch into the ids and dense
values `prepare` wrote for the same rows (same functions: transforms.dense_transform, transforms.hash_ids,
vocab.Vocabulary.lookup). `reader(paths)` is the reader `prepare` used, with its settings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ctrnas.config import from_dict, to_dict
from ctrnas.data.arrow import column_numpy
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.schema import DatasetSchema
from ctrnas.data.transforms import dense_transform, hash_ids
from ctrnas.data.vocab import Vocabulary
from ctrnas.errors import CtrnasError, DamagedFile
from ctrnas.files import atomic_path, atomic_write_text
from ctrnas.safeload import one_line, read_json, read_parquet

TRANSFORM_FORMAT = "ctrnas-transform/1"
TRANSFORM_FILE, VOCAB_FILE = "transform.json", "vocab.parquet"


@dataclass
class Preprocess:
    """Raw rows of format `kind` -> (labels, dense float32 [n, D], ids int64 [n, F]) as `prepare` encoded them."""

    kind: str
    settings: PrepareConfig
    schema: DatasetSchema
    # vocab encoding: one per field; hash: empty, or one per field, None where the field's ids are as hashed
    # and a Vocabulary of its seen hashed ids where its table was sized by the data (prepare's hash_table_size)
    vocabs: list[Vocabulary | None]

    @property
    def buckets(self) -> list[int]:
        return [self.settings.buckets(n) for n in self.schema.sparse_names]

    def reader(self, paths: list[str], kind: str | None = None, labeled: bool = True, **changes):
        """The reader `prepare` used for this format and settings, over `paths` (`changes`: e.g. on_error);
        `labeled=False` reads rows without the label column (labels NaN)."""
        from ctrnas.data.readers.formats import get_format

        kind = kind or self.kind
        if kind != self.kind:
            raise CtrnasError(f"the model was trained on {self.kind} data; its preprocessing cannot read {kind} "
                              f"rows (use --kind {self.kind}, or leave --kind out)")
        fmt = get_format(kind)
        cfg = replace(self.settings, limit=None, **changes)
        r = fmt.make_reader([str(p) for p in paths], cfg)
        if not labeled:
            if fmt.has_labels is None:
                raise CtrnasError(f"{kind} rows cannot be read without their label columns")
            r.without_label()
        if tuple(r.dense_names) != self.schema.dense or tuple(r.sparse_names) != self.schema.sparse_names:
            raise CtrnasError(f"the {kind} reader with these settings gives other fields than the model's "
                              f"({list(r.dense_names) + list(r.sparse_names)} vs "
                              f"{list(self.schema.dense) + list(self.schema.sparse_names)})")
        return r

    def encode(self, raw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(labels float32 [n], dense float32 [n, D], ids int64 [n, F]) of a RawBatch."""
        n = len(raw.labels)
        dense = np.empty((n, len(self.schema.dense)), dtype=np.float32)
        for j in range(dense.shape[1]):
            dense[:, j] = dense_transform(raw.dense[j], self.settings.dense_transform)
        ids = np.empty((n, len(self.schema.sparse)), dtype=np.int64)
        by_vocab = self.settings.sparse_encoding == "vocab"
        for j, b in enumerate(self.buckets):
            if by_vocab:
                ids[:, j] = self.vocabs[j].lookup(raw.keys[j], raw.missing[j])
                continue
            h = hash_ids(raw.keys[j], raw.missing[j], b)
            rows = self.vocabs[j] if self.vocabs else None
            ids[:, j] = h if rows is None else rows.lookup(h.view(np.uint64), raw.missing[j])
        return raw.labels.astype(np.float32), dense, ids

    # ---- files -------------------------------------------------------------------------------------------
    def to_json(self) -> dict:
        fields = []
        by_vocab = self.settings.sparse_encoding == "vocab"
        for j, f in enumerate(self.schema.sparse):
            enc = {"name": f.name, "cardinality": f.cardinality}
            v = self.vocabs[j] if self.vocabs else None
            if by_vocab:
                enc.update({"encoding": "vocab", "vocab_size": v.size})
            else:
                enc.update({"encoding": "hash" if v is None else "hash+rows", "buckets": self.buckets[j]})
                if v is not None:
                    enc["distinct_ids"] = v.size
            fields.append(enc)
        return {"format": TRANSFORM_FORMAT, "kind": self.kind, "label": self.schema.label,
                "dense": list(self.schema.dense), "dense_transform": self.settings.dense_transform,
                "dense_missing": 0.0, "sparse": fields,
                "ids": {"vocab": "0 missing, 1 out-of-vocabulary, 2.. by frequency",
                        "hash": "0 missing, 1 + key mod (buckets - 1)",
                        "hash+rows": "the hash id h, then 0 missing, 1 unseen h, 2.. the seen h in order"},
                "settings": to_dict(self.settings)}

    def save(self, folder: str | Path, own=None) -> list[str]:
        """Write transform.json (and vocab.parquet) into `folder`; `own(name) -> path` lets a folder writer
        list the files first (DatasetWriter.own). Returns the names written."""
        own = own or (lambda name: Path(folder) / name)
        names = [TRANSFORM_FILE]
        if any(v is not None for v in self.vocabs):
            names.append(VOCAB_FILE)
            cols = [(np.full(v.size, j, dtype=np.int32), *v.entries()) for j, v in enumerate(self.vocabs)
                    if v is not None]
            table = pa.table({"field": pa.DictionaryArray.from_arrays(
                                  np.concatenate([c[0] for c in cols]), list(self.schema.sparse_names)),
                              "key": np.concatenate([c[1] for c in cols]),
                              "id": np.concatenate([c[2] for c in cols])})
            with atomic_path(own(VOCAB_FILE)) as tmp:
                pq.write_table(table, tmp)
        atomic_write_text(own(TRANSFORM_FILE), json.dumps(self.to_json(), indent=1) + "\n")  # last
        return names

    @classmethod
    def load(cls, folder: str | Path) -> "Preprocess":
        folder = Path(folder)
        path = folder / TRANSFORM_FILE
        if not path.is_file():
            raise CtrnasError(f"{folder}: no {TRANSFORM_FILE} (the preprocessing of the data the model was "
                              "trained on); export with --data DIR, or prepare the data again with this ctrnas")
        d = read_json(path, "preprocessing file")
        if not isinstance(d, dict):
            raise DamagedFile(path, "not a JSON object; the preprocessing file is one")
        if d.get("format") != TRANSFORM_FORMAT:
            raise CtrnasError(f"{path}: format {d.get('format')!r}, expected {TRANSFORM_FORMAT!r}")
        settings = from_dict(PrepareConfig, d["settings"], source=str(path), prefix="settings.")
        schema = DatasetSchema.from_json({"label": d["label"], "dense": d["dense"], "sparse": d["sparse"]})
        vocabs = []
        if any(f["encoding"] in ("vocab", "hash+rows") for f in d["sparse"]):
            t = read_parquet(folder / VOCAB_FILE, "vocabulary file")
            try:
                field = column_numpy(t.column("field").combine_chunks().indices)
                names = t.column("field").combine_chunks().dictionary.to_pylist()
                keys = column_numpy(t.column("key").combine_chunks())
                ids = column_numpy(t.column("id").combine_chunks())
            except (KeyError, AttributeError, ValueError, TypeError) as e:
                raise DamagedFile(folder / VOCAB_FILE, f"not a ctrnas vocabulary ({one_line(e)})") from None
            for f in d["sparse"]:
                if f["encoding"] == "hash":
                    vocabs.append(None)
                    continue
                sel = field == names.index(f["name"]) if f["name"] in names else np.zeros(len(field), bool)
                vocabs.append(Vocabulary.restore(keys[sel], ids[sel]))
        return cls(d["kind"], settings, schema, vocabs)


def copy_preprocess(data_dir: str | Path, folder: str | Path) -> bool:
    """Copy a dataset folder's transform files into an export `folder`; False if the dataset has none
    (prepared by an older ctrnas, or synthetic)."""
    import shutil

    src = Path(data_dir)
    if not (src / TRANSFORM_FILE).is_file():
        return False
    pre = Preprocess.load(src)  # a damaged one is refused here, in one line
    Path(folder).mkdir(parents=True, exist_ok=True)
    # the files as they are, vocabulary first and transform.json last (as `save` writes them): rebuilding the
    # vocabulary table from numpy would import pandas (~0.5 s of CPU) in every training that exports
    for name in ([VOCAB_FILE] if any(v is not None for v in pre.vocabs) else []) + [TRANSFORM_FILE]:
        with atomic_path(Path(folder) / name) as tmp:
            shutil.copyfile(src / name, tmp)
    return True



def has_labels(pre: Preprocess, path: str | Path) -> bool:
    """Whether raw file `path` holds the label column (rows to score usually do not), as the model's format
    tells it (`readers/formats.py`: Criteo by the field count, Avazu and a table by the header; KDD 2012 rows
    always carry Click and Impression)."""
    from ctrnas.data.readers.formats import get_format

    return get_format(pre.kind).file_has_labels(pre.settings, str(path))
