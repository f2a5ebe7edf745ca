"""The prepared dataset folder: `train/ val/ test/` Parquet shards plus `meta.json`.

Layout (format "ctrnas-dataset/1"):
  DIR/meta.json              written last, atomically: a folder without it is incomplete
  DIR/{split}/part-00000.parquet ...
  DIR/ctrnas-manifest.json   every file ctrnas wrote here (see ownership.py: nothing else is ever removed)
  DIR/ctrnas-source.json     what the folder was made from
  DIR/.ctrnas.lock           held by the writer (see ctrnas.locks)
Columns: label (float32), dense features (float32, already transformed), sparse features (int64 ids in
[0, cardinality)), and optional extra columns (e.g. `p_true` for synthetic data).
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ctrnas.data import ownership
from ctrnas.data.ownership import META, SOURCE_FILE, SPLITS
from ctrnas.data.schema import DatasetSchema
from ctrnas.errors import CtrnasError, DamagedFile
from ctrnas.files import atomic_write_text

FORMAT = "ctrnas-dataset/1"


_NOT_DATA = ("progress", "block_size", "rows_per_shard", "max_rejects")  # change how, not what, is prepared


def raw_source(kind: str, inputs, prepare_settings: dict) -> dict:
    """The source record of a folder prepared from raw files: the same from `ctrnas prepare` and a recipe,
    so a run reuses a folder prepared by hand with the recipe's settings."""
    return normalize_source({"raw": {"kind": kind, "inputs": list(inputs)}, "prepare": dict(prepare_settings)})


def normalize_source(record: dict) -> dict:
    """A source record in comparable form: file paths absolute (records before this form kept them as given,
    relative to the run's directory), settings that do not change the data left out, and settings added
    since the record was written at their defaults (so adding an option does not orphan older folders)."""
    from ctrnas.config import to_dict
    from ctrnas.data.prepare_config import PrepareConfig

    record = json.loads(json.dumps(record))  # a copy with JSON types (tuples as lists)
    if "raw" in record:
        record["raw"]["inputs"] = [os.path.abspath(p) for p in record["raw"]["inputs"]]
        defaults = json.loads(json.dumps(to_dict(PrepareConfig())))
        prep = {k: v for k, v in {**defaults, **record.get("prepare", {})}.items() if k not in _NOT_DATA}
        if isinstance(prep.get("kdd_profile"), str):
            prep["kdd_profile"] = os.path.abspath(prep["kdd_profile"])
        record["prepare"] = prep
    return record


def synthetic_source(profile: str, rows: int, seed: int, settings: dict, structure: str = "default") -> dict:
    """The source record of a synthetic folder (the same from `ctrnas prepare synthetic` and a recipe); the
    default structure is left out, so folders made before structures existed keep matching; another one is
    recorded with its settings, so a folder made before a structure's definition changed is not reused."""
    from ctrnas.data.synthetic_profiles import get_structure

    record = {"profile": profile, "rows": rows, "seed": seed, "settings": settings}
    if structure != "default":
        record["structure"] = structure
        found = get_structure(structure)
        record["structure_settings"] = dict(found.settings) if found is not None else None
    return normalize_source({"synthetic": record})


def complete(path: str | Path) -> bool:
    """Whether `path` is a finished dataset folder (has a readable ctrnas meta.json)."""
    try:
        read_meta(path)
        return True
    except CtrnasError:
        return False


def differences(old, new, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two source records."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            out += differences(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [] if old == new else [f"{prefix[:-1]}: {old!r} -> {new!r}"]


def recorded_source(path: str | Path) -> dict | None:
    """The folder's source record in comparable form; None if missing or unreadable (treated as unknown)."""
    from ctrnas.files import read_json

    try:
        return normalize_source(read_json(Path(path) / SOURCE_FILE, "source record"))
    except (CtrnasError, KeyError, TypeError, AttributeError):
        return None


def check_replaceable(path: str | Path, source: dict, overwrite: bool, subject: str, remedies: str) -> None:
    """Refuse to replace a complete dataset folder made from something else: it may hold hours of preparing.
    `subject` names the folder as the user gave it, `remedies` says what they can do instead."""
    path = Path(path)
    if overwrite or not complete(path):
        return  # nothing there, or an interrupted run: (re)make it
    recorded = recorded_source(path)
    if recorded == source:
        return
    if recorded is None:
        why = (f"it has no readable {SOURCE_FILE} saying what it was made from (another tool or an older ctrnas "
               "made it)")
    else:
        diff = differences(recorded, source)
        why = "it was made from another source: " + "; ".join(diff[:5]) + (" ..." if len(diff) > 5 else "")
    raise CtrnasError(f"{subject} already holds a prepared dataset and {why}. {remedies}")


def write_source(path: str | Path, record: dict) -> None:
    atomic_write_text(Path(path) / SOURCE_FILE, json.dumps(record, indent=1))


def versions() -> dict:
    """Package versions recorded beside every result (FuxiCTR habit); read from metadata, no heavy imports."""
    from importlib import metadata

    import ctrnas

    out = {"python": platform.python_version(), "ctrnas": ctrnas.__version__}
    for pkg in ("numpy", "pyarrow", "torch", "torchrec", "fbgemm-gpu-cpu"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


class ShardWriter:
    """Streams record batches of one split into Parquet shards of at most `rows_per_shard` rows."""

    def __init__(self, folder: Path, schema: pa.Schema, rows_per_shard: int = 1_000_000, on_file=None):
        """`on_file(name)` is called before a shard file is created (the folder's manifest lists it)."""
        self.folder, self.schema, self.rows_per_shard = Path(folder), schema, rows_per_shard
        self.on_file = on_file
        self.folder.mkdir(parents=True, exist_ok=True)
        self.files: list[str] = []
        self.rows = 0
        self._writer = None
        self._tmp = None
        self._in_shard = 0

    def _open(self):
        name = f"part-{len(self.files):05d}.parquet"
        if self.on_file is not None:
            self.on_file(name)
        self._tmp = self.folder / f".{name}.tmp-{os.getpid()}"
        # LZ4 without dictionary pages: about half the CPU of zstd with dictionaries (Criteo-like data, 200k
        # rows: write 0.135 s vs 0.24 s, read 0.06 s vs 0.08-0.12 s) for 1.6x the bytes; writing was a
        # quarter of `prepare`'s CPU. Row groups are whatever the caller writes at once (prepare: ~64k rows).
        self._writer = pq.ParquetWriter(self._tmp, self.schema, compression="lz4", use_dictionary=False)
        self._final = self.folder / name
        self._in_shard = 0

    def _close(self):
        if self._writer is not None:
            self._writer.close()
            os.replace(self._tmp, self._final)
            self.files.append(self._final.name)
            self._writer = None

    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        table = table.select(self.schema.names).cast(self.schema)
        start = 0
        while start < table.num_rows:
            if self._writer is None:
                self._open()
            n = min(table.num_rows - start, self.rows_per_shard - self._in_shard)
            self._writer.write_table(table.slice(start, n))
            self._in_shard += n
            self.rows += n
            start += n
            if self._in_shard >= self.rows_per_shard:
                self._close()

    def close(self) -> list[str]:
        """Finish the last shard; an empty split still gets one (empty) shard so readers see its schema."""
        if self._writer is None and not self.files:
            self._open()
        self._close()
        return self.files


class DatasetWriter:
    """Writes a dataset folder: removes its old files (ours only, meta.json first), writes shards, then
    meta.json last. A folder holding files ctrnas did not write is refused unless `overwrite`."""

    def __init__(self, out_dir: str | Path, arrow_schema: pa.Schema, rows_per_shard: int = 1_000_000,
                 overwrite: bool = False):
        self.out = Path(out_dir)
        old = ownership.claim(self.out, overwrite)
        self.out.mkdir(parents=True, exist_ok=True)
        ownership.remove(self.out, [f for f in old if f != ownership.MANIFEST])
        # the old list stays until finish: a run killed before then leaves every file it may have written listed
        self.manifest = ownership.Manifest(self.out, set(old) | {META, SOURCE_FILE, ownership.REJECTS_FILE})
        self.writers = {s: ShardWriter(self.out / s, arrow_schema, rows_per_shard, self._on_file(s)) for s in SPLITS}

    def _on_file(self, split: str):
        return lambda name: self.manifest.add(f"{split}/{name}")

    def own(self, name: str) -> Path:
        """The path of another file the caller writes into the folder, listed in the manifest first."""
        self.manifest.add(name)
        return self.out / name

    def write(self, split: str, table: pa.Table | pa.RecordBatch) -> None:
        self.writers[split].write(table)

    def finish(self, meta: dict) -> dict:
        """Close shards and write meta.json (adds format, per-split files and rows, versions)."""
        splits = meta.setdefault("splits", {})
        for s, w in self.writers.items():
            files = w.close()
            splits.setdefault(s, {}).update({"rows": w.rows, "files": [f"{s}/{f}" for f in files]})
        meta["format"] = FORMAT
        meta.setdefault("versions", versions())
        written = {f for s in splits.values() for f in s.get("files", [])}
        extra = {f for f in self.manifest.files if "/" not in f and (self.out / f).is_file()}
        self.manifest.reset(written | extra | {META, SOURCE_FILE})
        atomic_write_text(self.out / META, json.dumps(meta, indent=2, sort_keys=False))
        return meta


def read_meta(data_dir: str | Path) -> dict:
    """The meta.json of a complete dataset folder; a clear error if the folder is incomplete."""
    p = Path(data_dir) / "meta.json"
    if not p.exists():
        raise CtrnasError(f"{data_dir}: no meta.json: not a prepared dataset, or its preparation did not "
                          "finish (re-run `ctrnas prepare`)")
    from ctrnas.safeload import read_json

    meta = read_json(p, "dataset's meta.json")
    if not isinstance(meta, dict):
        raise DamagedFile(p, "not a JSON object; a dataset's meta.json is one")
    if meta.get("format") != FORMAT:
        raise CtrnasError(f"{p}: format {meta.get('format')!r}, expected {FORMAT!r}")
    return meta


def load_schema(data_dir: str | Path) -> DatasetSchema:
    return DatasetSchema.from_json(read_meta(data_dir)["schema"])


def require_rows(data_dir: str | Path, split: str) -> int:
    """Rows of a split, or a clear error if it has none (training or evaluating on it would give NaN)."""
    meta = read_meta(data_dir)
    rows = int(meta.get("splits", {}).get(split, {}).get("rows", 0))
    if rows == 0:
        total = sum(int(s.get("rows", 0)) for s in meta.get("splits", {}).values())
        raise CtrnasError(f"{data_dir}: split {split!r} has 0 rows (of {total:,} in the folder): nothing to "
                          "train or evaluate on; prepare more rows or change split_ratios")
    return rows


def split_files(data_dir: str | Path, split: str) -> list[Path]:
    """Shard paths of one split, in order."""
    meta = read_meta(data_dir)
    if split not in meta["splits"]:
        raise CtrnasError(f"{data_dir}: no split {split!r} (has {sorted(meta['splits'])})")
    return [Path(data_dir) / f for f in meta["splits"][split]["files"]]
