"""Fuzzing the raw readers: random byte mutations of real-format Criteo and Avazu lines (tests.helpers.samples) never
end in a traceback, only in our own errors or rejects, and every physical line is accounted for:
accepted + rejected + blank = lines read (the line count computed here from the bytes, as pyarrow splits
lines: LF, CRLF or a bare CR)."""

from __future__ import annotations

import gzip
import re
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig, TableColumns
from ctrnas.data.readers import make_reader
from ctrnas.errors import CtrnasError
from tests.helpers.samples import avazu_sample, criteo_sample

pytestmark = [# pyarrow's own print of an undecodable row would reach the user as a traceback
              pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")]

FUZZ = settings(max_examples=60, deadline=timedelta(seconds=10), derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TABLE = TableColumns("click", ("banner_pos", "C15"), ("site_id", "device_model", "hour"))
# bytes that mean something to a CSV parser, a number parser, UTF-8 or gzip
SPECIAL = [b"\t", b",", b"\n", b"\r", b"\r\n", b"\x00", b"\xff", b"\xc3", b'"', b"-", b".", b"e", b"9", b" ",
           b"\x1f\x8b", b"nan", b"inf", b"1e999", b"\t\t\t"]


def _lines(kind: str) -> tuple[bytes, list[bytes]]:
    """(header line or b"", data lines) of the sample for a format."""
    data = (criteo_sample() if kind == "criteo" else avazu_sample()).read_bytes().splitlines()
    return (b"", data) if kind == "criteo" else (data[0], data[1:])


def physical_lines(data: bytes) -> int:
    if not data:
        return 0
    return len(re.split(rb"\r\n|\n|\r", data)) - (1 if data.endswith((b"\n", b"\r")) else 0)


mutation = st.tuples(st.floats(0, 1), st.sampled_from(["replace", "insert", "delete"]),
                     st.one_of(st.sampled_from(SPECIAL), st.binary(min_size=1, max_size=3)))


@st.composite
def mutated_file(draw):
    kind = draw(st.sampled_from(["criteo", "avazu", "table"]))
    header, lines = _lines("avazu" if kind == "table" else kind)
    picked = draw(st.lists(st.integers(0, len(lines) - 1), min_size=0, max_size=6))
    body = bytearray(b"\n".join(lines[i] for i in picked) + (b"\n" if picked and draw(st.booleans()) else b""))
    for where, op, piece in draw(st.lists(mutation, max_size=6)):
        at = int(where * len(body))
        if op == "insert" or not body:
            body[at:at] = piece
        elif op == "replace":
            body[at:at + len(piece)] = piece
        else:
            del body[at:at + len(piece)]
    data = (header + b"\n" if header else b"") + bytes(body)
    return kind, data, draw(st.booleans()), draw(st.booleans())


def config(kind: str, pad: bool, **kw) -> PrepareConfig:
    return PrepareConfig(on_error="skip", progress=False, block_size=512, pad_missing_trailing=pad,
                         table=TABLE if kind == "table" else None, **kw)


def write(d: str, data: bytes, gz: bool) -> Path:
    path = Path(d) / "in.txt"
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


@FUZZ
@given(mutated_file())
def test_mutated_lines_are_rows_rejects_or_our_errors_and_all_are_counted(case):
    kind, data, gz, pad = case
    with tempfile.TemporaryDirectory() as d:
        reader = make_reader(kind, [str(write(d, data, gz))], config(kind, pad))
        accepted = rejected = blank = 0
        try:
            for raw in reader.batches():
                accepted, rejected, blank = accepted + raw.accepted, rejected + len(raw.rejects), blank + raw.blank
                assert len(raw.labels) == raw.accepted and set(raw.labels.tolist()) <= {0.0, 1.0}
                assert all(r.line >= 1 and len(r.text) <= 600 and len(r.detail) <= 600 for r in raw.rejects)
        except CtrnasError:
            return  # a named error (bad header, undecodable malformed line, empty file, broken gzip)
        header = 1 if kind != "criteo" else 0
        assert accepted + rejected + blank == physical_lines(data) - header


@settings(FUZZ, max_examples=20)
@given(mutated_file())
def test_prepare_on_mutated_lines_writes_what_it_accepted(case):
    kind, data, gz, pad = case
    with tempfile.TemporaryDirectory() as d:
        try:
            meta = prepare(kind, [str(write(d, data, gz))], Path(d) / "o", config(kind, pad, split="order"))
        except CtrnasError:
            return
        rows = meta["rows"]
        assert rows["read"] == rows["accepted"] + rows["rejected"] and rows["accepted"] == rows["written"] > 0
        assert rows["read"] + rows["blank_lines"] == physical_lines(data) - (1 if kind != "criteo" else 0)
        assert sum(meta["splits"][s]["rows"] for s in ("train", "val", "test")) == rows["written"]
