"""libfm / svmlight rows: `label index:value index:value ...`, space-separated, no header (Frappe and
MovieLens as the NFM/AFM papers ship them).

label: 1 or +1 is a click, 0 or -1 is not (also written 1.0, -1.0). Which pair is which field comes from the
settings' `libfm:` section (`LibfmFields`): by position (`fields`: the k-th pair of every row is field k,
so every row has one pair per field) or by index range (`ranges`: a pair whose index lies in a field's
range belongs to it; a field without a pair in a row is missing). A category field is keyed by its index
(its value must be 1, one-hot); a `dense` field is read as its value. A trailing `# comment` is ignored.

Each line is read whole by the CSV core (one column, so line numbers, gzip, blank lines and `limit` work as
for the other formats) and split into label and field columns here; a row whose pairs do not fit the
settings is a reject naming its line and the pair.
"""

from __future__ import annotations

import re
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ctrnas.data.readers.base import CsvStream, LinedBatch, Reject, cut
from ctrnas.data.readers.rows import DelimitedReader, Problems
from ctrnas.data.readers.values import parse_numbers, show
from ctrnas.errors import RecipeError

LINE = "line"
UNUSED = "\x1f"  # the CSV core's delimiter: a character no libfm line holds, so a line is one field
PAIR = r"^(?P<index>[0-9]{1,19}):(?P<value>[^:]+)$"


def field_names(settings) -> tuple[tuple[str, ...], dict[str, tuple[int, int]]]:
    """(field names in output order, their index ranges; empty when fields are by position) of `settings`
    (a LibfmFields), checked: one of fields / ranges, ranges as [lo, hi] that do not overlap, dense names
    among the fields, a dense range of one index (a value cannot say which index it came from)."""
    where = "prepare settings"
    if settings is None or bool(settings.fields) == bool(settings.ranges):
        raise RecipeError(where, "libfm", "`prepare libfm` needs the fields: by position (--fields A,B,.. or "
                          "--fields N) or by index range (--ranges A=LO-HI,..), one of the two")
    ranges: dict[str, tuple[int, int]] = {}
    if settings.fields:
        names = tuple(settings.fields)
        if len(names) == 1 and names[0].isdigit():
            names = tuple(f"f{k}" for k in range(1, int(names[0]) + 1))
    else:
        for name, r in settings.ranges.items():
            if len(r) != 2 or r[0] < 0 or r[0] > r[1]:
                raise RecipeError(where, f"libfm.ranges.{name}", f"expected [lo, hi] with 0 <= lo <= hi, got {list(r)}")
            ranges[name] = (int(r[0]), int(r[1]))
        names = tuple(sorted(ranges, key=lambda n: ranges[n]))
        for a, b in zip(names, names[1:]):
            if ranges[b][0] <= ranges[a][1]:
                raise RecipeError(where, "libfm.ranges", f"{a} {list(ranges[a])} and {b} {list(ranges[b])} overlap")
    dup = sorted({n for n in names if names.count(n) > 1} | ({"label"} & set(names)))
    if dup or not names:
        raise RecipeError(where, "libfm.fields", f"field name(s) {dup} used twice (or as 'label')" if dup
                          else "no field given")
    for name in settings.dense:
        if name not in names:
            raise RecipeError(where, "libfm.dense", f"{name!r} is not a field (fields: {', '.join(names)})")
        if ranges and ranges[name][0] != ranges[name][1]:
            raise RecipeError(where, f"libfm.ranges.{name}", f"a dense field has one index, got {list(ranges[name])}")
    return names, ranges


class LibfmReader(DelimitedReader):
    format = "libfm"

    def __init__(self, paths: list[str], cfg):
        names, self.ranges = field_names(cfg.libfm)
        dense = [n for n in names if n in cfg.libfm.dense]
        super().__init__(paths, cfg, [LINE], dense, [(n, "dec") for n in names if n not in dense], delimiter=" ")
        self.fields = names

    def parse_label(self, table: pa.RecordBatch, problems: Problems) -> np.ndarray:
        col = table.column("label")
        vals, bad, nonfinite = parse_numbers(col)
        problems.add(bad | nonfinite | ~np.isin(np.nan_to_num(vals, nan=1.0), (-1.0, 0.0, 1.0)), "label",
                     "bad_label", lambda i: f"label must be 1 or +1 (click), 0 or -1 (no click), got {show(col, i)!r}")
        return (vals == 1).astype(np.float32)

    def lined_batches(self, path: str) -> Iterator[tuple[LinedBatch, str, bool]]:
        stream = CsvStream(path, [LINE], UNUSED, block_size=self.cfg.block_size)
        for lb in stream:
            yield self._split(lb, stream.file), stream.file, True

    def _split(self, lb: LinedBatch, file: str) -> LinedBatch:
        """The batch's lines as label and field columns (text); rows that do not fit are rejects."""
        text = lb.table.column(0)
        n = len(text)
        line = pc.ascii_trim_whitespace(pc.replace_substring_regex(text, r"#.*$", ""))
        words = pc.ascii_split_whitespace(pc.if_else(pc.equal(line, ""), pa.scalar(None, pa.string()), line))
        counts = np.asarray(pc.list_value_length(words).fill_null(0))  # a blank line: none (null, zero span)
        flat = words.flatten()
        row = np.repeat(np.arange(n), counts)
        position = np.arange(len(flat)) - np.repeat(np.asarray(words.offsets)[:-1] - words.offsets[0].as_py(), counts)
        label_at = np.full(n, -1)
        label_at[row[position == 0]] = np.flatnonzero(position == 0)
        pairs_of = position > 0
        pairs, prow, pnum = flat.filter(pa.array(pairs_of)), row[pairs_of], position[pairs_of]
        parsed = pc.extract_regex(pairs, PAIR)
        well_formed = ~np.asarray(parsed.is_null())
        index = np.zeros(len(pairs), dtype=np.uint64)
        index[well_formed] = np.asarray(pc.cast(parsed.field("index").filter(pa.array(well_formed)), pa.uint64()))
        problems = Problems(n)

        def first(bad: np.ndarray) -> np.ndarray:  # per row: its first pair in `bad`, else -1
            at = np.full(n, len(pairs))
            np.minimum.at(at, prow[bad], np.flatnonzero(bad))
            return np.where(at < len(pairs), at, -1)

        def pair(k) -> str:
            return f"pair {pnum[k]} {cut(str(pairs[k]), 60)!r}"

        bad = first(~well_formed)
        problems.add(bad >= 0, None, "bad_pair", lambda i: f"{pair(bad[i])}: expected index:value")
        if self.ranges:
            los = np.array([self.ranges[f][0] for f in self.fields], dtype=np.uint64)
            his = np.array([self.ranges[f][1] for f in self.fields], dtype=np.uint64)
            field = np.searchsorted(los, index, side="right") - 1
            known = well_formed & (field >= 0) & (index <= his[np.maximum(field, 0)])
            outside = first(well_formed & ~known)
            problems.add(outside >= 0, None, "unknown_index",
                         lambda i: f"{pair(outside[i])}: index in no field's range (--ranges)")
            slot = np.where(known, prow * len(self.fields) + field, -1)
            order = np.argsort(slot, kind="stable")
            again = np.zeros(len(pairs), dtype=bool)
            again[order[1:]] = (slot[order[1:]] == slot[order[:-1]]) & (slot[order[1:]] >= 0)
            twice = first(again)
            problems.add(twice >= 0, None, "repeated_field",
                         lambda i: f"{pair(twice[i])}: a second pair of field {self.fields[field[twice[i]]]}")
        else:
            want = len(self.fields)
            short = (counts > 0) & (counts - 1 != want)
            problems.add(short, None, "field_count",
                         lambda i: f"expected {want} index:value pairs (--fields), found {counts[i] - 1}")
            field = pnum - 1
            known = well_formed & (field < want) & ~short[prow]
        values = parsed.field("value")
        number, _, _ = parse_numbers(pc.if_else(pa.array(known), values, pa.scalar(None, pa.string())))
        is_dense = np.isin(field, [self.fields.index(d) for d in self.dense_columns])
        not_one = first(known & ~is_dense & (number != 1))
        problems.add(not_one >= 0, None, "sparse_value",
                     lambda i: f"{pair(not_one[i])}: a category's value must be 1 (one-hot); name the field "
                               "in --dense to read its value")
        columns = [flat.take(pa.array(label_at, mask=label_at < 0))]
        index_text = pc.cast(parsed.field("index"), pa.string())
        for j, name in enumerate(self.fields):
            at = np.full(n, -1)
            mine = np.flatnonzero(known & (field == j))
            at[prow[mine]] = mine
            source = values if name in self.dense_columns else index_text
            columns.append(source.take(pa.array(at, mask=at < 0)))
        keep = ~problems.bad
        rejects = [Reject(file, int(lb.lines[i]), f, reason, detail, cut(str(show(text, i)), 500))
                   for i, (f, reason, detail) in problems.items.items()]
        table = pa.RecordBatch.from_arrays(columns, names=["label", *self.fields]).filter(pa.array(keep))
        return LinedBatch(table, lb.lines[keep], sorted(lb.bad + rejects, key=lambda r: r.line))

    def describe(self) -> dict:
        how = {"ranges": {f: list(self.ranges[f]) for f in self.fields}} if self.ranges else \
            {"fields": list(self.fields)}
        return {"format": "libfm", **how, "dense": list(self.dense_columns)}


def ranges_arg(text: str) -> dict[str, list[int]]:
    """`A=1-13,B=14-99` -> {"A": [1, 13], "B": [14, 99]} (the --ranges flag; `A=7` is one index)."""
    out: dict[str, list[int]] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"([^=\s]+)=(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"expected NAME=LO-HI, got {part!r}")
        out[m.group(1)] = [int(m.group(2)), int(m.group(3) or m.group(2))]
    return out
