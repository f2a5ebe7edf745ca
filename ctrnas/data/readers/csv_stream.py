"""The streaming CSV core of the text readers: it knows each row's physical line number.

We cut the raw (possibly gzip) stream into `block_size` chunks at line ends and parse each with
`pyarrow.csv.read_csv`. pyarrow reports malformed rows (wrong field count) through `invalid_row_handler`
with their 1-based line number in the chunk, but only when it parses on one thread (`use_threads=False`;
with threads `number` is None) and only when empty lines are *not* dropped (`ignore_empty_lines=False`;
else it counts non-empty lines). Empty lines then arrive as all-null rows, which we drop as blank; every
other line is either a row or a handler call, so a row's line number is its position among the lines the
handler did not claim (`CsvStream._lines`), plus the lines of earlier chunks. Line ends are LF or CRLF
(a file with bare-CR line ends is still read, but its line numbers would count LFs only).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ctrnas.data.readers import padding, quotes
from ctrnas.data.readers.records import LinedBatch, Reject, open_input
from ctrnas.data.readers.values import cut
from ctrnas.errors import DataFormatError


def _quiet_undecodable(hook):
    """sys.unraisablehook without the UnicodeDecodeError pyarrow prints (with a traceback) when it cannot
    decode a malformed row for our handler: `CsvStream._locate` then names that line in one message."""
    def quiet(args):
        if issubclass(args.exc_type, UnicodeDecodeError) and isinstance(getattr(args.object, "__self__", None),
                                                                         CsvStream):
            return
        hook(args)

    quiet.ctrnas = True
    return quiet


class CsvStream:
    """Streams one delimited text file as string columns, tracking physical line numbers."""

    def __init__(self, path: str, names: list[str], delimiter: str, skip_rows: int = 0,
                 block_size: int = 16 << 20, quoting: bool = False, numeric: tuple[str, ...] = (),
                 pad: int = 0, paddable: int = 0):
        """`numeric`: columns to parse straight to float64 where that gives what a text parse followed by
        `parse_numbers` would (see `_typed`); saves a string column and a cast per numeric column.
        `pad`: a row missing at most this many trailing fields is read as if they were empty (padding.py);
        `paddable`: how many it could be with padding on (a short row within it names the option)."""
        self.path, self.names, self.skip_rows, self.pad = str(path), names, skip_rows, pad
        self.paddable = max(pad, paddable)
        if not getattr(sys.unraisablehook, "ctrnas", False):
            sys.unraisablehook = _quiet_undecodable(sys.unraisablehook)
        self.file = Path(path).name
        self._bad: list[Reject] = []
        self.block_size = block_size
        self._offset = 0  # physical lines before the chunk being parsed
        self.quoting = quoting
        self._unbalanced: dict[int, str] = {}  # physical line -> text of a line masked by quotes.py
        self._parse = pacsv.ParseOptions(delimiter=delimiter, quote_char='"' if quoting else False,
                                         ignore_empty_lines=False, invalid_row_handler=self._on_invalid)
        self._convert = pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                             strings_can_be_null=True, null_values=[""],
                                             quoted_strings_can_be_null=True,
                                             # invalid UTF-8 must not end the stream without a line number:
                                             # categories are hashed as bytes, numbers fail per value
                                             check_utf8=False)
        self.numeric = tuple(n for n in numeric if n in names)
        if self.numeric:
            self._typed_convert = pacsv.ConvertOptions(
                column_types={n: pa.float64() if n in self.numeric else pa.string() for n in names},
                strings_can_be_null=True, null_values=[""], quoted_strings_can_be_null=True, check_utf8=False)
            # the CSV reader trims spaces and tabs around numbers, a cast of the text does not
            self._trimmed = [b" "] + ([b"\t"] if delimiter != "\t" else [])
        self._quiet = pacsv.ParseOptions(delimiter=delimiter, quote_char='"' if quoting else False,
                                         ignore_empty_lines=False, invalid_row_handler=lambda row: "skip")

    def _on_invalid(self, row) -> str:
        text = row.text.rstrip("\r")
        line = self._offset + row.number
        if line in self._unbalanced:
            self._bad.append(Reject(self.file, line, None, "unbalanced_quote", quotes.DETAIL,
                                    cut(self._unbalanced[line], 500)))
        elif text.strip() == "":
            # a whitespace-only line: blank, not malformed
            self._bad.append(Reject(self.file, self._offset + row.number, None, "blank", "blank line", ""))
        elif row.actual_columns < row.expected_columns <= row.actual_columns + self.pad:
            self._bad.append(padding.short_row(self.file, self._offset + row.number, text,
                                               row.expected_columns - row.actual_columns))
        else:
            detail = f"expected {row.expected_columns} fields, found {row.actual_columns}"
            if row.actual_columns < row.expected_columns <= row.actual_columns + self.paddable:
                detail += " (trailing empty fields stripped? --pad-missing-trailing reads them as empty)"
            self._bad.append(Reject(self.file, self._offset + row.number, None, "field_count", detail,
                                    cut(text, 500)))
        return "skip"

    def _chunks(self) -> Iterator[tuple[pa.Buffer, bytes, int, int]]:
        """(chunk, the bytes it is a prefix of, its length, physical lines before it): chunks of about
        `block_size` bytes ending at a line end.

        We cut the file ourselves instead of using pyarrow's streaming reader: that reader reads ahead
        without bound while the consumer is slower than the disk (measured: a 484 MB file was held
        whole), which would make memory grow with the file. A chunk is a zero-copy view of what was read;
        in a plain file the partial line after it is read again with the next block (a seek back) instead
        of being copied in front of it, which gives the same chunks."""
        lines_before = 0
        rest = b""
        again = 0  # bytes of a partial line to read again (after a seek back)
        with open_input(self.path) as stream:
            seekable = stream.seekable()
            while True:
                try:
                    data = stream.read(self.block_size + again)
                except OSError as e:  # e.g. a truncated or corrupt gzip file (or a text file starting 1f 8b)
                    raise DataFormatError(self.file, lines_before + 1, None,
                                          f"cannot read the file from this line on: {e}") from None
                again = 0
                buf = rest + data if rest else data
                if not buf:
                    return
                cut = buf.rfind(b"\n") + 1 if data else len(buf)
                if cut == 0:  # a line longer than the block: read on
                    rest = buf
                    continue
                if seekable and data and cut < len(buf):  # the bytes after the cut all come from `data`
                    again = len(buf) - cut
                    stream.seek(stream.tell() - again)
                    rest = b""
                else:
                    rest = buf[cut:]
                yield pa.py_buffer(buf).slice(0, cut), buf, cut, lines_before
                lines_before += buf.count(b"\n", 0, cut) + (0 if buf[cut - 1] == 10 else 1)

    def __iter__(self) -> Iterator[LinedBatch]:
        next_line = self.skip_rows + 1
        for k, (chunk, raw, size, before) in enumerate(self._chunks()):
            skip = self.skip_rows if k == 0 else 0
            self._offset = before
            odd = quotes.odd_lines(raw, size) if self.quoting else ()
            self._unbalanced = {}
            if len(odd):
                masked, self._unbalanced = quotes.mask(raw, size, odd, before + 1)
                chunk = pa.py_buffer(masked)
            read = pacsv.ReadOptions(column_names=self.names, skip_rows=skip, block_size=len(chunk) + 1,
                                     use_threads=False)
            # rows to pad are read as text (a chunk with some is parsed again as text)
            typed = self._typed(raw, size) and not padding.pending(self._bad)
            n_bad = len(self._bad)
            try:
                table = None
                if typed:
                    try:
                        table = pacsv.read_csv(chunk, read_options=read, parse_options=self._parse,
                                               convert_options=self._typed_convert)
                    except pa.ArrowInvalid as e:
                        if "conversion error" not in str(e):
                            raise
                        # a value that is no number: parse this chunk as text, which names the row
                    if table is None or padding.pending(self._bad[n_bad:]):
                        del self._bad[n_bad:]
                        typed, table = False, None
                if table is None:
                    table = pacsv.read_csv(chunk, read_options=read, parse_options=self._parse,
                                           convert_options=self._convert)
            except pa.ArrowInvalid as e:
                if "Empty CSV file" in str(e):  # nothing but the header
                    continue
                raise self._locate(next_line, e) from None
            batch = _one_batch(table)
            lines = self._lines(next_line, batch.num_rows)
            if batch.num_rows:
                next_line = int(lines[-1]) + 1
            bad = [r for r in self._bad if r.line < next_line]
            self._bad = [r for r in self._bad if r.line >= next_line]
            if padding.pending(bad):
                yield padding.merge(batch, lines, bad, self._pad_parse, self._parse.delimiter)
                continue
            as_text = None
            if typed:
                def as_text(chunk=chunk, read=read):
                    return _one_batch(pacsv.read_csv(chunk, read_options=read,
                                                     parse_options=self._quiet, convert_options=self._convert))
            yield LinedBatch(batch, lines, sorted(bad, key=lambda r: r.line), as_text)
        if self._bad:
            empty = pa.RecordBatch.from_pylist([], schema=pa.schema([(n, pa.string()) for n in self.names]))
            yield padding.merge(empty, np.zeros(0, np.int64), self._bad, self._pad_parse, self._parse.delimiter)
            self._bad = []

    def _pad_parse(self, text: bytes) -> pa.RecordBatch:
        """Rows of padded text, parsed as the rows of the file are (as text; lines that still do not fit
        are dropped: the caller compares counts)."""
        read = pacsv.ReadOptions(column_names=self.names, use_threads=False, block_size=len(text) + 1)
        return _one_batch(pacsv.read_csv(pa.py_buffer(text), read_options=read, parse_options=self._quiet,
                                         convert_options=self._convert))

    def _typed(self, raw: bytes, size: int) -> bool:
        """Whether to parse the numeric columns of a chunk (`raw[:size]`) as float64 in the CSV reader. Both
        that and the cast in `parse_numbers` use Arrow's StringToFloat, but the reader first trims spaces
        and tabs, so a chunk holding either (other than as the delimiter) is parsed as text."""
        return bool(self.numeric) and not any(raw.find(c, 0, size) >= 0 for c in self._trimmed)

    def _locate(self, first: int, err: Exception) -> DataFormatError:
        """The error of a row pyarrow could not hand to `invalid_row_handler` (its text is not UTF-8, which
        pyarrow's handler wrapper cannot decode): rescan the raw lines from `first` to name it."""
        import gzip

        with open(self.path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        delim = self._parse.delimiter.encode()
        with (gzip.open(self.path, "rb") if gz else open(self.path, "rb")) as f:
            for number, raw in enumerate(f, start=1):
                line = raw.rstrip(b"\r\n")
                if number < first or not line.strip():
                    continue
                fields = line.count(delim) + 1
                if fields != len(self.names):
                    return DataFormatError(self.file, number, None,
                                           f"expected {len(self.names)} fields, found {fields} (the line is not "
                                           "valid UTF-8, so it cannot be skipped; fix or remove it)")
        return DataFormatError(self.file, None, None, f"cannot parse: {cut(str(err), 300)}")

    def _lines(self, first: int, n: int) -> np.ndarray:
        """Physical line of each of `n` rows starting at line `first`, skipping lines the handler claimed."""
        claimed = np.array(sorted(r.line for r in self._bad if r.line >= first), dtype=np.int64)
        t = np.arange(n, dtype=np.int64)
        if len(claimed) == 0:
            return first + t
        # valid lines before claimed[i]: claimed[i] - first - i; row t sits after every claimed line
        # that has at most t valid lines before it
        before = claimed - first - np.arange(len(claimed))
        return first + t + np.searchsorted(before, t, side="right")


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    batch = table.combine_chunks().to_batches()
    return batch[0] if batch else pa.RecordBatch.from_pylist([], schema=table.schema)


def blank_rows(table: pa.RecordBatch) -> np.ndarray:
    """Rows whose every field is empty: blank lines (or lines of only separators)."""
    mask = np.ones(table.num_rows, dtype=bool)
    for col in table.columns:
        if col.null_count == 0:
            return np.zeros(table.num_rows, dtype=bool)
        mask &= np.asarray(col.is_null())
    return mask
