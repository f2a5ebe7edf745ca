"""Readers and transforms against independent truth: Python's int/float/math on the raw text, sklearn, datetime."""

from __future__ import annotations

import collections
import datetime
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig, TableColumns
from ctrnas.data.readers import make_reader
from ctrnas.data.readers.base import CsvStream
from ctrnas.data.transforms import dec_keys, dense_transform, fnv1a64, hash_ids, hex_keys
from ctrnas.data.vocab import KeyCounter, Vocabulary
from ctrnas.errors import DataFormatError, RecipeError
from tests.helpers.samples import SOURCES

ALL_TRAIN = dict(split="order", split_ratios=(1.0, 0.0, 0.0), progress=False,
                 hash_table_size="buckets")  # ids as hashed, to check them by hand


def fnv_reference(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) % 2**64
    return h


def read_split(out, split="train"):
    return pq.read_table(out / split).to_pydict()


# ---- transforms ----------------------------------------------------------------------------------------

def test_hex_keys_equal_python_int_base16_and_hash_the_rest():
    vals = ["05db9164", None, "ffffffff", "abc", "0123456789abcdef", "zz", "0123456789abcdef0", "DEADbeef"]
    keys = hex_keys(pa.array(vals))
    expect = [int(v, 16) if v is not None and len(v) <= 16 and all(c in "0123456789abcdefABCDEF" for c in v)
              else (0 if v is None else fnv_reference(v)) for v in vals]
    assert keys.tolist() == expect


def test_dec_keys_are_twos_complement_values_and_hash_non_numbers():
    vals = ["1", "-1", None, "10000169349117863715", "0x10", "abc", "99999999999999999999999", "007"]
    keys = dec_keys(pa.array(vals)).tolist()
    expect = [1, 2**64 - 1, 0, 10000169349117863715, fnv_reference("0x10"), fnv_reference("abc"),
              fnv_reference("99999999999999999999999"), 7]
    assert keys == expect
    # a value's key does not depend on whether its batch has odd neighbours
    assert dec_keys(pa.array(["-1", "7"])).tolist() == [2**64 - 1, 7]


def test_hash_ids_follow_nasrec_fmod_rule():
    keys = np.array([0, 5, 98275684, 2**64 - 1], dtype=np.uint64)
    missing = np.array([True, False, False, False])
    ids = hash_ids(keys, missing, 1000)
    assert ids.tolist() == [0, 1 + 5 % 999, 1 + 98275684 % 999, 1 + (2**64 - 1) % 999]


def test_dense_transforms_match_formulas():
    x = np.array([np.nan, -3.0, 0.0, 1.0, 2.0, 3.0, 13275.0])
    assert dense_transform(x, "log1p").tolist() == pytest.approx(
        [0.0, 0.0, 0.0, math.log(2), math.log(3), math.log(4), math.log(13276)], rel=1e-6)
    assert dense_transform(x, "log_square").tolist() == [0.0, -3.0, 0.0, 1.0, 2.0,
                                                          math.floor(math.log(3) ** 2), math.floor(math.log(13275) ** 2)]
    assert dense_transform(x, "none").tolist() == [0.0, -3.0, 0.0, 1.0, 2.0, 3.0, 13275.0]


def test_fnv_matches_reference_on_unicode():
    vals = ["", "a", "foobar", "ünï", "x" * 40]
    assert fnv1a64(pa.array(vals)).tolist() == [fnv_reference(v) for v in vals]


def test_vocabulary_counts_across_chunks_and_orders_by_frequency():
    rng = np.random.default_rng(0)
    keys = rng.zipf(1.5, 5000).astype(np.uint64)
    counter = KeyCounter()
    for chunk in np.array_split(keys, 7):
        counter.add(chunk)
    vocab = Vocabulary.from_counter(counter, min_count=3)
    counts = collections.Counter(keys.tolist())
    frequent = sorted((k for k, c in counts.items() if c >= 3), key=lambda k: (-counts[k], k))
    probe = np.array(frequent + [10**12], dtype=np.uint64)
    ids = vocab.lookup(probe, np.zeros(len(probe), bool))
    assert ids.tolist() == list(range(2, len(frequent) + 2)) + [1]
    assert vocab.cardinality == len(frequent) + 2
    assert vocab.lookup(probe[:1], np.array([True])).tolist() == [0]


# ---- line numbers --------------------------------------------------------------------------------------

def test_csv_stream_reports_physical_lines_across_blocks(tmp_path, raw):
    rng = np.random.default_rng(3)
    lines, bad = [], []
    for i in range(3000):
        r = rng.random()
        if r < 0.02:
            lines.append("")
        elif r < 0.04:
            lines.append("1\t2")
            bad.append(len(lines))
        else:
            lines.append(f"{i}\ta\tb")
    path = raw.write_text(tmp_path / "m.tsv", lines, newline="\r\n")
    got_rows, got_bad = [], []
    for lb in CsvStream(str(path), ["x", "y", "z"], "\t", block_size=2048):
        xs = lb.table.column("x").to_pylist()
        got_rows += [(int(line), x) for line, x in zip(lb.lines.tolist(), xs) if x is not None]
        got_bad += [r.line for r in lb.bad]
    expect_rows = [(i + 1, l.split("\t")[0]) for i, l in enumerate(lines) if l and i + 1 not in bad]
    assert got_rows == expect_rows
    assert got_bad == bad


# ---- Criteo --------------------------------------------------------------------------------------------

def _criteo_expected(line: str, buckets: int, transform):
    f = line.rstrip("\r\n").split("\t")
    dense = [transform(float(v)) if v != "" else 0.0 for v in f[1:14]]
    sparse = [0 if v == "" else 1 + int(v, 16) % (buckets - 1) for v in f[14:]]
    return float(f[0]), dense, sparse


@pytest.mark.parametrize("source", SOURCES)
def test_criteo_sample_rows_equal_python_recomputation(tmp_path, raw, source):
    path = raw.sample("criteo", source)
    out = tmp_path / "c"
    prepare("criteo", [str(path)], out, PrepareConfig(hash_buckets=1000, **ALL_TRAIN))
    got = read_split(out)
    lines = path.read_text().splitlines()
    assert len(got["label"]) == len(lines) == 100
    for r, line in enumerate(lines):
        label, dense, sparse = _criteo_expected(line, 1000, lambda x: math.log1p(max(x, 0.0)))
        assert got["label"][r] == label
        assert [got[f"I{i}"][r] for i in range(1, 14)] == pytest.approx(dense, rel=1e-6)
        assert [got[f"C{i}"][r] for i in range(1, 27)] == sparse
    # by hand, line 1: I1 empty, I5 = 13275, C1 = 05db9164
    assert got["I1"][0] == 0.0
    assert got["I5"][0] == pytest.approx(9.49371, abs=1e-4)  # ln(13276)
    assert got["C1"][0] == 1 + 0x05DB9164 % 999 == 1 + 98275684 % 999


def test_criteo_log_square_and_vocab_on_sample(tmp_path, raw):
    path = raw.need(raw.criteo_sample)
    out = tmp_path / "c"
    meta = prepare("criteo", [str(path)], out, PrepareConfig(dense_transform="log_square", sparse_encoding="vocab",
                                                              min_count=2, **ALL_TRAIN))
    got = read_split(out)
    rows = [l.split("\t") for l in path.read_text().splitlines()]
    c1 = collections.Counter(r[14] for r in rows if r[14])
    frequent = sorted((v for v, c in c1.items() if c >= 2), key=lambda v: (-c1[v], int(v, 16)))
    for r, row in enumerate(rows):
        v = row[14]
        expect = 0 if v == "" else (frequent.index(v) + 2 if v in frequent else 1)
        assert got["C1"][r] == expect
        i5 = float(row[5]) if row[5] else 0.0
        assert got["I5"][r] == (math.floor(math.log(i5) ** 2) if i5 > 2 else i5)
    assert meta["schema"]["sparse"][0] == {"name": "C1", "cardinality": len(frequent) + 2}


def test_criteo_gzip_crlf_blank_lines_and_no_final_newline_read_like_plain(tmp_path, raw):
    rng = np.random.default_rng(1)
    lines = [raw.criteo_line(rng) for _ in range(50)]
    plain = raw.write_text(tmp_path / "plain.txt", lines)
    messy_lines = lines[:10] + ["", "   "] + lines[10:30] + [""] + lines[30:]
    messy = raw.write_text(tmp_path / "train.txt.gz", messy_lines, newline="\r\n", gz=True, final_newline=False)
    a = prepare("criteo", [str(plain)], tmp_path / "a", PrepareConfig(**ALL_TRAIN))
    b = prepare("criteo", [str(messy)], tmp_path / "b", PrepareConfig(**ALL_TRAIN))
    assert read_split(tmp_path / "a") == read_split(tmp_path / "b")
    assert b["rows"]["read"] == 50 and b["rows"]["blank_lines"] == 3 and b["rows"]["rejected"] == 0
    assert a["rows"]["read"] == 50


@pytest.mark.parametrize("bad_line, field, reason", [
    ("1\t2\t3", None, "expected 40 fields, found 3"),
    ("0\t1\tabc" + "\t" * 37, "I2", "not a number: 'abc'"),
    ("2" + "\t" * 39, "label", "label must be 0 or 1, got '2'"),
    ("\t5" + "\t" * 38, "label", "missing label"),
    ("0\tinf" + "\t" * 38, "I1", "not a finite number: 'inf'"),
])
def test_criteo_first_malformed_row_names_file_line_field(tmp_path, raw, bad_line, field, reason):
    rng = np.random.default_rng(2)
    lines = [raw.criteo_line(rng) for _ in range(20)]
    lines.insert(6, "")  # a blank line before the bad one still counts as a physical line
    lines.insert(12, bad_line)
    path = raw.write_text(tmp_path / "day_0", lines)
    with pytest.raises(DataFormatError) as e:
        prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(**ALL_TRAIN))
    assert (e.value.file, e.value.line, e.value.field) == ("day_0", 13, field)
    assert reason in e.value.reason


# ---- Avazu ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES)
def test_avazu_sample_hand_checked_row(tmp_path, raw, source):
    path = raw.sample("avazu", source)
    out = tmp_path / "a"
    prepare("avazu", [str(path)], out, PrepareConfig(hash_buckets=5000, avazu_hour="split", **ALL_TRAIN))
    got = read_split(out)
    lines = path.read_text().splitlines()
    header, first = lines[0].split(","), lines[1].split(",")
    row = dict(zip(header, first))
    assert row["id"] == "1000009418151094273" and row["hour"] == "14102100"
    assert got["label"][0] == float(row["click"])
    assert got["id"][0] == 1 + int(row["id"]) % 4999
    assert got["site_id"][0] == 1 + int(row["site_id"], 16) % 4999
    assert got["C20"][0] == 1 + (int(row["C20"]) % 2**64) % 4999  # -1 as two's complement
    day = datetime.date(2014, 10, 21)  # hour 14102100: 21 Oct 2014, 00h, a Tuesday
    assert got["hour_of_day"][0] == 1 + 0
    assert got["weekday"][0] == 1 + day.weekday() == 2
    assert got["is_weekend"][0] == 1 + 0
    assert got["dense_0"] == [0.0] * 100
    # every row: the id column exceeds int64 somewhere, and is still keyed by its exact value
    ids = [int(l.split(",")[0]) for l in lines[1:]]
    assert max(ids) > 2**63
    assert got["id"] == [1 + v % 4999 for v in ids]


def test_avazu_bad_header_and_bad_hour(tmp_path, raw):
    path = raw.need(raw.avazu_sample)
    lines = path.read_text().splitlines()
    bad = raw.write_text(tmp_path / "h.csv", ["id,click,hour"] + lines[1:5])
    with pytest.raises(DataFormatError) as e:
        prepare("avazu", [str(bad)], tmp_path / "o", PrepareConfig(**ALL_TRAIN))
    assert e.value.line == 1
    f = lines[3].split(",")
    f[2] = "14133100"  # month 33
    hour = raw.write_text(tmp_path / "t.csv", lines[:3] + [",".join(f)] + lines[4:10])
    with pytest.raises(DataFormatError) as e:
        prepare("avazu", [str(hour)], tmp_path / "o", PrepareConfig(avazu_hour="split", **ALL_TRAIN))
    assert (e.value.line, e.value.field) == (4, "hour")


# ---- KDD Cup 2012 ----------------------------------------------------------------------------------------

def test_kdd_label_expansion_and_profile_join(tmp_path, raw):
    lines = ["2\t3\t18446744073709551615\t7\t8\t1\t2\t10\t11\t12\t13\t100",
             "0\t2\t5\t7\t8\t2\t1\t10\t11\t12\t13\t101",
             "1\t1\t5\t9\t8\t3\t3\t10\t11\t12\t13\t999"]
    path = raw.write_text(tmp_path / "training.txt", lines)
    prof = raw.write_text(tmp_path / "userid_profile.txt", ["100\t1\t3", "101\t2\t5"])
    cfg = PrepareConfig(hash_buckets=1000, kdd_profile=str(prof), **ALL_TRAIN)
    meta = prepare("kdd2012", [str(path)], tmp_path / "k", cfg)
    got = read_split(tmp_path / "k")
    assert got["label"] == [1.0, 0.0, 1.0]
    assert got["DisplayURL"] == [1 + (2**64 - 1) % 999, 6, 6]
    assert got["Impression"] == pytest.approx([math.log(4), math.log(3), math.log(2)])
    assert got["Gender"] == [2, 3, 0] and got["Age"] == [4, 6, 0]  # user 999 has no profile -> missing
    assert [s["name"] for s in meta["schema"]["sparse"]][-2:] == ["Gender", "Age"]

    cfg = PrepareConfig(hash_buckets=1000, kdd_expand_impressions=True, **ALL_TRAIN)
    meta = prepare("kdd2012", [str(path)], tmp_path / "e", cfg)
    got = read_split(tmp_path / "e")
    assert got["label"] == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert got["AdID"] == [8, 8, 8, 8, 8, 10]
    assert meta["rows"]["read"] == 3 and meta["rows"]["written"] == 6


def test_kdd_counts_are_validated(tmp_path, raw):
    path = raw.write_text(tmp_path / "training.txt", ["0\t1" + "\t5" * 10, "3\t2" + "\t5" * 10, "x\t2" + "\t5" * 10])
    meta = prepare("kdd2012", [str(path)], tmp_path / "k", PrepareConfig(on_error="skip", **ALL_TRAIN))
    assert meta["rows"]["rejected_by_reason"] == {"bad_click": 1, "clicks_exceed_impressions": 1}
    assert (tmp_path / "k" / "rejects.tsv").read_text().splitlines()[1].split("\t")[:4] == [
        "training.txt", "2", "Click", "clicks_exceed_impressions"]


# ---- table ---------------------------------------------------------------------------------------------

def test_table_csv_and_parquet_read_the_same(tmp_path):
    rows = {"clicked": [1, 0, 1, 0], "price": [1.5, None, 3.0, 0.0], "shop": ["a", "b", None, "a"],
            "item": [10, 20, 30, 10], "unused": ["x", "y", "z", "w"]}
    t = pa.table(rows)
    pq.write_table(t, tmp_path / "log.parquet")
    csv = ["clicked,price,shop,item,unused"] + [
        ",".join("" if v is None else str(v) for v in r) for r in zip(*rows.values())]
    (tmp_path / "log.csv").write_text("\n".join(csv) + "\n")
    cols = TableColumns(label="clicked", dense=("price",), sparse=("shop", "item"))
    cfg = PrepareConfig(table=cols, dense_transform="none", hash_buckets=100, **ALL_TRAIN)
    prepare("table", [str(tmp_path / "log.parquet")], tmp_path / "p", cfg)
    prepare("table", [str(tmp_path / "log.csv")], tmp_path / "c", cfg)
    p, c = read_split(tmp_path / "p"), read_split(tmp_path / "c")
    assert p == c
    assert p["price"] == [1.5, 0.0, 3.0, 0.0]
    assert p["item"] == [1 + 10 % 99, 1 + 20 % 99, 1 + 30 % 99, 1 + 10 % 99]
    assert p["shop"] == [1 + fnv_reference("a") % 99, 1 + fnv_reference("b") % 99, 0, 1 + fnv_reference("a") % 99]


def test_table_needs_declared_columns(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(RecipeError):
        make_reader("table", [str(tmp_path / "x.csv")], PrepareConfig())
    cfg = PrepareConfig(table=TableColumns(label="a", sparse=("zz",)), **ALL_TRAIN)
    with pytest.raises(DataFormatError) as e:
        prepare("table", [str(tmp_path / "x.csv")], tmp_path / "o", cfg)
    assert (e.value.line, e.value.field) == (1, "zz")


def test_messy_avazu_and_kdd_files_skip_and_name_bad_rows(tmp_path, raw):
    path = raw.need(raw.avazu_sample)
    lines = path.read_text().splitlines()
    short = ",".join(lines[5].split(",")[:10])
    messy = [lines[0]] + lines[1:4] + ["", short] + lines[4:8] + [lines[8].replace(",0,", ",x,", 1)]
    gz = raw.write_text(tmp_path / "train.gz", messy, newline="\r\n", gz=True)
    meta = prepare("avazu", [str(gz)], tmp_path / "a", PrepareConfig(on_error="skip", **ALL_TRAIN))
    assert meta["rows"]["read"] == 9 and meta["rows"]["blank_lines"] == 1
    assert meta["rows"]["rejected_by_reason"] == {"bad_label": 1, "field_count": 1}
    tsv = [l.split("\t") for l in (tmp_path / "a" / "rejects.tsv").read_text().splitlines()[1:]]
    assert [(r[1], r[3]) for r in tsv] == [("6", "field_count"), ("11", "bad_label")]

    kdd = ["1\t2\t3\t4\t5\t1\t1\t6\t7\t8\t9\t10", "", "0\t1\t3\t4\t5\tdeep\t1\t6\t7\t8\t9\t10",
           "0\t1\t3\t4", "0\t1\t3\t4\t5\t2\t1\t6\t7\t8\t9\t10"]
    path = raw.write_text(tmp_path / "training.txt", kdd, newline="\r\n")
    with pytest.raises(DataFormatError) as e:
        prepare("kdd2012", [str(path)], tmp_path / "k", PrepareConfig(**ALL_TRAIN))
    assert (e.value.line, e.value.field) == (3, "Depth")
    meta = prepare("kdd2012", [str(path)], tmp_path / "k", PrepareConfig(on_error="skip", **ALL_TRAIN))
    assert meta["rows"]["written"] == 2 and meta["rows"]["rejected"] == 2
    assert meta["rows"]["rejected_by_reason"] == {"field_count": 1, "non_numeric_dense": 1}
