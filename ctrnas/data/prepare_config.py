"""Settings of `ctrnas prepare`: a frozen dataclass loaded from YAML (its own file, or a recipe's `data:`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ctrnas.config import from_dict, load_yaml
from ctrnas.errors import RecipeError


@dataclass(frozen=True)
class TableColumns:
    """Column roles of a user's own CSV/Parquet log (`ctrnas prepare table`)."""

    label: str
    dense: tuple[str, ...] = ()
    sparse: tuple[str, ...] = ()
    delimiter: str = ","  # CSV only; the first line must be a header naming the columns


@dataclass(frozen=True)
class LibfmFields:
    """Which `index:value` pairs of a libfm / svmlight row make which field (`ctrnas prepare libfm`): give
    `fields` (the k-th pair of every row is field k; a single number N names them f1..fN) or `ranges` (a pair
    whose index is in [lo, hi] belongs to that field; a field left out of a row is missing)."""

    fields: tuple[str, ...] = ()
    ranges: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dense: tuple[str, ...] = ()  # fields read as numbers (their value); the others are categories keyed by index


@dataclass(frozen=True)
class PrepareConfig:
    """How raw rows become features; defaults follow NASRec (log1p + modulo hashing, stratified 8:1:1)."""

    dense_transform: Literal["log1p", "log_square", "none"] = "log1p"
    sparse_encoding: Literal["hash", "vocab"] = "hash"
    hash_buckets: int = 1_000_000  # per-field cap of hashed ids (id 0 = missing)
    hash_buckets_per_field: dict[str, int] = field(default_factory=dict)  # e.g. NASRec's Avazu {id: 10000}
    # data: a hashed field with fewer distinct ids than buckets gets a table of distinct + 2 rows (its ids
    # re-numbered after the pass); buckets: tables of up to `hash_buckets` rows, ids as hashed
    hash_table_size: Literal["data", "buckets"] = "data"
    min_count: int = 10  # vocab: values seen fewer times share the field's OOV id 1 (id 0 = missing)
    split: Literal["stratified", "random", "order"] = "stratified"
    split_ratios: tuple[float, ...] = (0.8, 0.1, 0.1)
    seed: int = 2018
    on_error: Literal["raise", "skip"] = "raise"
    max_rejects: int = 1000  # first rejected rows kept in rejects.tsv (on_error: skip)
    rows_per_shard: int = 1_000_000
    block_size: int = 16 << 20  # bytes of raw text parsed per batch
    limit: int | None = None  # stop after this many accepted raw rows (quick looks at huge files)
    # a row with too few fields is read with the missing trailing fields empty (some Criteo copies strip
    # trailing tabs); counted in meta.json rows.padded. Off: such a row is a field_count reject
    pad_missing_trailing: bool = False
    avazu_hour: Literal["raw", "split"] = "raw"  # split: hour -> hour_of_day, weekday, is_weekend (BARS x4)
    avazu_drop_id: bool = False  # BARS x4 drops the per-impression `id`; NASRec keeps it
    avazu_pseudo_dense: bool = True  # NASRec feeds Avazu one dense feature that is always 0
    kdd_profile: str | None = None  # userid_profile.txt to join (adds sparse Gender, Age)
    kdd_expand_impressions: bool = False  # one row per impression: `Click` positives, the rest negatives
    table: TableColumns | None = None
    libfm: LibfmFields | None = None
    progress: bool = True

    def __post_init__(self):
        src = "prepare settings"
        if self.hash_buckets < 2:
            raise RecipeError(src, "hash_buckets", f"must be >= 2, got {self.hash_buckets}")
        for k, v in self.hash_buckets_per_field.items():
            if v < 2:
                raise RecipeError(src, f"hash_buckets_per_field.{k}", f"must be >= 2, got {v}")
        if self.min_count < 1:
            raise RecipeError(src, "min_count", f"must be >= 1, got {self.min_count}")
        r = self.split_ratios
        if len(r) != 3 or any(x < 0 for x in r) or abs(sum(r) - 1.0) > 1e-6:
            raise RecipeError(src, "split_ratios", f"expected 3 non-negative numbers summing to 1, got {list(r)}")
        if self.split == "stratified" and any(abs(x * 10 - round(x * 10)) > 1e-6 for x in r):
            raise RecipeError(src, "split_ratios", f"stratified split uses 10 folds: ratios must be tenths, got {list(r)}")
        for name in ("max_rejects", "rows_per_shard", "block_size"):
            if getattr(self, name) < (0 if name == "max_rejects" else 1):
                raise RecipeError(src, name, f"must be positive, got {getattr(self, name)}")
        if self.limit is not None and self.limit < 1:
            raise RecipeError(src, "limit", f"must be >= 1 (rows to keep), got {self.limit}")

    def buckets(self, feature: str) -> int:
        return self.hash_buckets_per_field.get(feature, self.hash_buckets)


def load_prepare_config(path: str | Path | None, overrides: dict | None = None) -> PrepareConfig:
    """PrepareConfig from YAML `path` (its `data:` section if it has one) with `overrides` (CLI flags) on top."""
    data: dict = {}
    source = "command line"
    if path is not None:
        source = str(path)
        data = load_yaml(path)
        if "data" in data:
            data = data["data"]
            if not isinstance(data, dict):
                raise RecipeError(source, "data", "expected a mapping")
            source += " (data:)"
            if isinstance(data.get("prepare"), dict):  # a full ctrnas recipe: data: {path, raw, prepare}
                data = data["prepare"]
                source = source[:-len(" (data:)")] + " (data.prepare:)"
    data = dict(data)
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k in ("table", "libfm") and isinstance(data.get(k), dict) and isinstance(v, dict):
            v = {**data[k], **v}
        data[k] = v
    return from_dict(PrepareConfig, data, source=source)
