"""The raw formats `prepare` reads, by name: the one list that `ctrnas prepare KIND`, `ctrnas predict --kind`,
a recipe's `data.raw.kind` and the saved preprocessing (`data/preprocess.py`) all read.

A format declares its name, one line of help, its reader, how to tell whether a file holds the label column,
and its own options (command-line flags that set PrepareConfig fields). The reader and the label check are
named as "module:attribute" and imported when a file is read, so listing the formats (`ctrnas --help`)
imports no reader. `register_format` adds one (a built-in one below, or a user's before they run).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from ctrnas.errors import CtrnasError


@dataclass(frozen=True)
class Option:
    """A format's own command-line flag: `flags` as argparse takes them, setting PrepareConfig field `dest`
    ("table.label": field `label` of the nested `table` section); `kwargs` go to `add_argument`."""

    flags: tuple[str, ...]
    dest: str
    help: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RawFormat:
    """A raw log format. `reader`: called as `(paths, PrepareConfig)` -> a reader (`readers/base.py`);
    `has_labels`: `(PrepareConfig, path) -> bool`, whether a file to score holds the label column; None: its
    rows always carry their labels (they cannot be read without). Either may be given as "module:name",
    imported on first use. `input_fields`: PrepareConfig fields that name further input files (checked like
    `--input`)."""

    name: str
    help: str
    reader: str | Callable
    has_labels: str | Callable | None = None
    options: tuple[Option, ...] = ()
    input_fields: tuple[str, ...] = ()

    def make_reader(self, paths: list[str], cfg):
        return _load(self.reader)(paths, cfg)

    def file_has_labels(self, cfg, path: str) -> bool:
        return True if self.has_labels is None else bool(_load(self.has_labels)(cfg, str(path)))


def _load(ref: str | Callable) -> Callable:
    if callable(ref):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


_FORMATS: dict[str, RawFormat] = {}


def register_format(fmt: RawFormat) -> RawFormat:
    """Make `fmt` known by its name (a second format under a taken name is an error)."""
    if fmt.name in _FORMATS and _FORMATS[fmt.name] != fmt:
        raise CtrnasError(f"raw format {fmt.name!r} registered twice")
    _FORMATS[fmt.name] = fmt
    return fmt


def format_names() -> tuple[str, ...]:
    """The known formats, in registration order (the built-in ones first)."""
    return tuple(_FORMATS)


def get_format(name: str) -> RawFormat:
    """The format called `name`; an unknown name is a one-line error listing the known ones."""
    if name not in _FORMATS:
        raise CtrnasError(f"unknown raw format {name!r}; expected one of {', '.join(map(repr, _FORMATS))}")
    return _FORMATS[name]


def csv_list(s: str) -> list[str]:
    """`a, b,c` -> ["a", "b", "c"] (a list-valued flag)."""
    return [x.strip() for x in s.split(",") if x.strip()]


def _ranges(text: str) -> dict[str, list[int]]:
    """The --ranges flag, parsed where the reader lives (imported only when the flag is given)."""
    from ctrnas.data.readers.libfm import ranges_arg

    return ranges_arg(text)


_R = "ctrnas.data.readers."
register_format(RawFormat(
    "criteo", "Criteo Kaggle train.txt / Terabyte day_N (label, I1-I13, C1-C26; tab-separated; .gz accepted)",
    _R + "criteo:CriteoReader", _R + "criteo:has_labels"))
register_format(RawFormat(
    "avazu", "Avazu Kaggle train CSV with header (id, click, hour, C1, ..., C21)",
    _R + "avazu:AvazuReader", _R + "avazu:has_labels", options=(
        Option(("--avazu-hour",), "avazu_hour",
               "raw: hour as one category (default); split: hour_of_day, weekday, is_weekend",
               {"choices": ["raw", "split"]}),
        Option(("--drop-id",), "avazu_drop_id", "drop the per-impression id column (BARS x4)",
               {"action": "store_const", "const": True}),
        Option(("--no-pseudo-dense",), "avazu_pseudo_dense", "omit NASRec's constant dense feature dense_0",
               {"action": "store_const", "const": False}))))
register_format(RawFormat(
    "kdd2012", "KDD Cup 2012 track 2 training.txt (12 tab-separated fields; label = Click > 0)",
    _R + "kdd2012:KddReader", None, options=(
        Option(("--profile",), "kdd_profile", "userid_profile.txt to join (adds sparse Gender, Age)",
               {"metavar": "FILE"}),
        Option(("--expand-impressions",), "kdd_expand_impressions",
               "one row per impression instead of label = Click > 0", {"action": "store_const", "const": True})),
    input_fields=("kdd_profile",)))
register_format(RawFormat(
    "table", "your own CSV (with header) or Parquet log; name the columns with --label/--dense/--sparse",
    _R + "table:TableReader", _R + "table:has_labels", options=(
        Option(("--label",), "table.label", "the label column (0/1)", {"metavar": "COLUMN"}),
        Option(("--dense",), "table.dense", "dense (numeric) columns", {"type": csv_list, "metavar": "A,B,.."}),
        Option(("--sparse",), "table.sparse", "categorical columns", {"type": csv_list, "metavar": "A,B,.."}),
        Option(("--delimiter",), "table.delimiter", "CSV delimiter (default ',')"))))
register_format(RawFormat(
    "libfm", "libfm / svmlight rows (label then index:value pairs, space-separated); name the fields by "
    "position (--fields) or by index range (--ranges)",
    _R + "libfm:LibfmReader", None, options=(
        Option(("--fields",), "libfm.fields", "one name per pair position (every row has one pair per field), "
               "or a count N: fields f1..fN", {"type": csv_list, "metavar": "A,B,..|N"}),
        Option(("--ranges",), "libfm.ranges", "fields by index range, inclusive (a field without a pair in a "
               "row is missing)", {"type": _ranges, "metavar": "A=LO-HI,.."}),
        Option(("--dense",), "libfm.dense", "fields read as numbers (their value); the others are categories "
               "keyed by their index (value 1)", {"type": csv_list, "metavar": "A,B,.."}))))
