"""Property tests: malformed input is always reported with its line, and every row read is accounted for."""

from __future__ import annotations

import gzip
import re
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.transforms import dec_keys, hex_keys
from ctrnas.errors import DataFormatError

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CFG = dict(split="order", progress=False, block_size=1024)


def fnv_reference(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) % 2**64
    return h


def good_line(seed: int) -> str:
    rng = np.random.default_rng(seed)
    dense = ["" if rng.random() < 0.3 else str(int(rng.integers(-2, 100))) for _ in range(13)]
    sparse = ["" if rng.random() < 0.2 else f"{int(rng.integers(0, 2**32)):08x}" for _ in range(26)]
    return "\t".join([str(int(rng.integers(0, 2)))] + dense + sparse)


def with_field(line: str, index: int, value: str) -> str:
    f = line.split("\t")
    f[index] = value
    return "\t".join(f)


letters = st.text(alphabet="abcxyz_?", min_size=1, max_size=5)
# (kind, line): kinds whose verdict we know in advance
known_line = st.one_of(
    st.builds(lambda s: ("good", good_line(s)), st.integers(0, 10**6)),
    st.sampled_from([("blank", ""), ("blank", "  "), ("blank", "\t" * 39), ("blank", "\t\t")]),
    st.builds(lambda s, k: ("bad", "\t".join(good_line(s).split("\t")[:k])), st.integers(0, 10**6),
              st.integers(2, 39)),
    st.builds(lambda s, k: ("bad", good_line(s) + "\tx" * k), st.integers(0, 10**6), st.integers(1, 3)),
    st.builds(lambda s, j, v: ("bad", with_field(good_line(s), j, v)), st.integers(0, 10**6),
              st.integers(1, 13), letters),
    st.builds(lambda s, v: ("bad", with_field(good_line(s), 0, v)), st.integers(0, 10**6),
              st.sampled_from(["2", "-1", "x", "0.5", " 1"])),
)


def write(path: Path, lines: list[str], crlf: bool, gz: bool) -> None:
    data = ("\r\n" if crlf else "\n").join(lines).encode() + b"\n"
    path.write_bytes(gzip.compress(data) if gz else data)


@SETTINGS
@given(st.lists(known_line, min_size=1, max_size=12), st.booleans(), st.booleans())
def test_known_malformed_rows_are_named_and_counted(rows, crlf, gz):
    lines = [l for _, l in rows]
    bad = [i + 1 for i, (k, _) in enumerate(rows) if k == "bad"]
    good = sum(k == "good" for k, _ in rows)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "train.txt"
        write(path, lines, crlf, gz)
        try:
            meta = prepare("criteo", [str(path)], Path(d) / "o", PrepareConfig(**CFG))
            assert not bad and meta["rows"]["written"] == good > 0
        except DataFormatError as e:
            if bad:
                assert (e.file, e.line) == ("train.txt", bad[0])
            else:  # only blank lines: an error naming the file, not an empty dataset
                assert good == 0 and e.line is None and e.file == str(path) and "no data rows" in str(e)
        if good == 0:  # nothing accepted: an error even when skipping bad rows
            with pytest.raises(DataFormatError, match="no data rows" if not bad else "all .* rows read were rejected"):
                prepare("criteo", [str(path)], Path(d) / "s", PrepareConfig(on_error="skip", **CFG))
            return
        meta = prepare("criteo", [str(path)], Path(d) / "s", PrepareConfig(on_error="skip", **CFG))
        rows_ = meta["rows"]
        assert rows_["read"] == good + len(bad) == rows_["written"] + rows_["rejected"]
        assert rows_["rejected"] == len(bad)
        if bad:
            tsv = (Path(d) / "s" / "rejects.tsv").read_text().splitlines()[1:]
            assert [int(l.split("\t")[1]) for l in tsv] == bad


junk = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=60)
junk_or_good = st.one_of(junk, st.builds(good_line, st.integers(0, 10**6)),
                         st.builds(lambda s, t: s + t, st.builds(good_line, st.integers(0, 10**6)), junk))


def is_blank(line: str) -> bool:
    f = line.split("\t")
    return all(x == "" for x in f) if len(f) == 40 else line.strip() == ""


@SETTINGS
@given(st.lists(junk_or_good, min_size=1, max_size=10))
def test_arbitrary_text_never_crashes_without_a_line_and_every_row_is_counted(lines):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "junk.txt"
        path.write_bytes(("\n".join(lines) + "\n").encode())
        try:
            prepare("criteo", [str(path)], Path(d) / "o", PrepareConfig(**CFG))
        except DataFormatError as e:
            if e.line is None:  # no row was accepted (the skip run below says the same)
                assert "no data rows" in str(e) or "were rejected" in str(e)
            else:
                assert isinstance(e.line, int) and 1 <= e.line <= len(lines)
                assert not is_blank(lines[e.line - 1])
        try:
            meta = prepare("criteo", [str(path)], Path(d) / "s", PrepareConfig(on_error="skip", **CFG))
        except DataFormatError as e:
            assert e.line is None and ("no data rows" in str(e) or "were rejected" in str(e))
            return
        rows = meta["rows"]
        assert rows["read"] == rows["written"] + rows["rejected"]
        assert rows["read"] == sum(not is_blank(l) for l in lines)
        assert rows["blank_lines"] == sum(is_blank(l) for l in lines)


def dec_reference(s: str) -> int:
    if re.fullmatch(r"-?[0-9]{1,20}", s) and -(2**63) <= int(s) < 2**64:
        return int(s) % 2**64
    return fnv_reference(s)


def hex_reference(s: str) -> int:
    return int(s, 16) if re.fullmatch(r"[0-9a-fA-F]{1,16}", s) else fnv_reference(s)


numberish = st.one_of(st.integers(-(2**64), 2**65).map(str), st.text(alphabet="0123456789-x", min_size=1, max_size=25),
                      st.text(min_size=1, max_size=8))
hexish = st.one_of(st.integers(0, 2**70).map(lambda v: f"{v:x}"), st.integers(0, 2**32 - 1).map(lambda v: f"{v:08x}"),
                   st.text(alphabet="0123456789abcdefABCDEFg", min_size=1, max_size=18))


@SETTINGS
@given(st.lists(numberish, min_size=1, max_size=20))
def test_dec_keys_equal_python_reference_whatever_the_neighbours(values):
    assert dec_keys(pa.array(values)).tolist() == [dec_reference(v) for v in values]
    assert [int(dec_keys(pa.array([v]))[0]) for v in values] == [dec_reference(v) for v in values]


@SETTINGS
@given(st.lists(hexish, min_size=1, max_size=20))
def test_hex_keys_equal_python_reference(values):
    assert hex_keys(pa.array(values)).tolist() == [hex_reference(v) for v in values]


junk_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ").replace(b"\r", b" "))
bytes_or_good = st.one_of(junk_bytes, st.builds(lambda s: good_line(s).encode(), st.integers(0, 10**6)),
                          st.builds(lambda s, b: good_line(s).encode() + b, st.integers(0, 10**6), junk_bytes))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # pyarrow's own decode failure
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bytes_or_good, min_size=1, max_size=8), st.sampled_from(["raise", "skip"]))
def test_arbitrary_bytes_fail_only_with_a_named_line(lines, on_error):
    # pyarrow cannot hand a non-UTF-8 malformed row to the invalid-row handler; such a row stops even
    # a skipping run, but the error must still name its line
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "b.txt"
        path.write_bytes(b"\n".join(lines) + b"\n")
        try:
            meta = prepare("criteo", [str(path)], Path(d) / "o", PrepareConfig(on_error=on_error, **CFG))
        except DataFormatError as e:
            if e.line is None:  # nothing accepted: the error names the file instead
                assert e.file == str(path) and ("no data rows" in str(e) or "were rejected" in str(e))
            else:
                assert isinstance(e.line, int) and 1 <= e.line <= len(lines)
        else:
            rows = meta["rows"]
            assert rows["read"] == rows["written"] + rows["rejected"]
