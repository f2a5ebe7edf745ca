"""The speed paths of `prepare` give exactly what the plain paths give.

  hex keys      byte-arithmetic decoding of 8-digit columns (`_hex8`, `_hex_keys_packed`) vs int(s, 16)
  log1p         fmax-based missing handling vs the masked formula
  typed dense   numeric columns parsed as float64 by the CSV reader vs text + cast (with a fallback to text
                for chunks with spaces or any reject)
  staging       stratified/order/vocab runs through the Arrow IPC staging file vs one pass per chunk
  chunking      zero-copy chunks with a seek back vs copied chunks (gzip input)
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.readers.base import CsvStream
from ctrnas.data.transforms import dense_transform, hex_keys
from ctrnas.errors import DataFormatError

QUIET = dict(progress=False)


def _fnv(b: bytes) -> int:
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) % 2**64
    return h


def _hex_ref(s: str | None) -> int:
    if s is None or s == "":
        return 0
    try:
        if len(s) <= 16 and all(c in "0123456789abcdefABCDEF" for c in s):
            return int(s, 16)
    except ValueError:
        pass
    return _fnv(s.encode())


def test_hex_keys_match_int_parsing_on_random_strings():
    rng = np.random.default_rng(0)
    digits = list("0123456789abcdefABCDEF")
    junk = digits + list("gxz -/:@`G\u00e9")
    for trial in range(400):
        n = int(rng.integers(1, 300))
        vals = []
        for _ in range(n):
            r = rng.random()
            if r < 0.1:
                vals.append(None)
            elif r < 0.85 or trial % 3 == 0:  # every third column is pure Criteo: 8 digits or null
                vals.append("".join(rng.choice(digits, 8)))
            else:
                vals.append("".join(rng.choice(junk, int(rng.integers(0, 20)))))
        arr = pa.array(vals, pa.string())
        for a in (arr, arr.slice(int(rng.integers(0, n)))):
            assert hex_keys(a).tolist() == [_hex_ref(v) for v in a.to_pylist()]
    # every byte value in every digit position of an 8-digit string
    for pos in range(8):
        vals = ["0" * pos + chr(b) + "0" * (7 - pos) for b in range(1, 128)]
        assert hex_keys(pa.array(vals)).tolist() == [_hex_ref(v) for v in vals]


def test_log1p_matches_masked_formula():
    x = np.array([np.nan, -np.inf, -5.0, -0.0, 0.0, 0.5, 1.0, 3.0, 1e6, 1e300, np.inf])
    x = np.concatenate([x, np.random.default_rng(1).normal(0, 100, 1000)])
    ref = np.log1p(np.maximum(x, 0.0))
    ref[np.isnan(x)] = 0.0
    got = dense_transform(x, "log1p")
    assert got.dtype == np.float32
    assert np.array_equal(got, ref.astype(np.float32))


def _tree(out) -> dict:
    meta = json.loads((out / "meta.json").read_text())
    for k in ("seconds", "versions"):
        meta.pop(k)
    tables = {s: [pq.read_table(out / f).to_pydict() for f in meta["splits"][s]["files"]] for s in ("train", "val", "test")}
    rejects = (out / "rejects.tsv").read_text() if (out / "rejects.tsv").exists() else None
    return {"meta": meta, "tables": tables, "rejects": rejects}


def _messy_lines(raw, rng, n=4000):
    lines = [raw.criteo_line(rng) for _ in range(n)]
    f = lines[100].split("\t")
    f[3] = "inf"
    lines[100] = "\t".join(f)  # non-finite dense: a typed chunk must fall back to text for the message
    f = lines[1700].split("\t")
    f[5] = "nan"
    lines[1700] = "\t".join(f)
    f = lines[2500].split("\t")
    f[2] = "12zz"
    lines[2500] = "\t".join(f)  # not a number: the typed parse fails, the chunk is parsed as text
    f = lines[3100].split("\t")
    f[4] = " 7"
    lines[3100] = "\t".join(f)  # a space: the CSV reader would trim it, a cast does not (rejected)
    lines[3300] = "2" + lines[3300][1:]  # bad label
    lines[3500] = "0\t1"  # field count
    lines.insert(3600, "")
    return lines


@pytest.mark.parametrize("settings", [dict(split="stratified"), dict(split="order", sparse_encoding="vocab", min_count=2),
                                      dict(split="random", dense_transform="log_square"),
                                      dict(split="random", sparse_encoding="vocab", min_count=1)])
def test_typed_dense_parse_and_staging_change_nothing(tmp_path, raw, monkeypatch, settings):
    lines = _messy_lines(raw, np.random.default_rng(5))
    path = raw.write_text(tmp_path / "t.txt", lines, newline="\r\n")
    cfg = PrepareConfig(on_error="skip", block_size=1 << 14, rows_per_shard=1500, **settings, **QUIET)
    fast = _tree(tmp_path / "fast") if prepare("criteo", [str(path)], tmp_path / "fast", cfg) else None
    assert not list((tmp_path / "fast").glob(".staging-*"))  # the staging file is removed
    monkeypatch.setattr(CsvStream, "_typed", lambda self, raw, size: False)  # text only, as before
    prepare("criteo", [str(path)], tmp_path / "text", cfg)
    assert fast == _tree(tmp_path / "text")
    assert fast["meta"]["rows"]["rejected_by_reason"] == {"bad_label": 1, "field_count": 1, "non_finite_dense": 2,
                                                         "non_numeric_dense": 2}


def test_failed_staged_run_removes_its_staging_file_and_names_the_line(tmp_path, raw):
    rng = np.random.default_rng(6)
    lines = [raw.criteo_line(rng) for _ in range(3000)]
    lines[2000] = "0\t1"
    path = raw.write_text(tmp_path / "t.txt", lines)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / ".staging-1.arrows").write_bytes(b"stale")
    with pytest.raises(DataFormatError) as e:
        prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(block_size=8192, **QUIET))
    assert e.value.line == 2001
    assert not list((tmp_path / "o").glob(".staging-*"))
    assert not list((tmp_path / "o" / "train").iterdir())  # raise mode: no shard before the whole input is read


@pytest.mark.parametrize("block", [200, 1000, 1 << 14])
def test_seek_back_chunks_equal_gzip_chunks(tmp_path, raw, block):
    rng = np.random.default_rng(7)
    lines = [raw.criteo_line(rng) for _ in range(300)] + ["0\t1", "", "1" + "\t" * 39] + \
            [raw.criteo_line(rng) for _ in range(50)]
    plain = raw.write_text(tmp_path / "p.txt", lines, final_newline=False)
    gz = tmp_path / "g.txt"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    names = ["label"] + [f"I{i}" for i in range(1, 14)] + [f"C{i}" for i in range(1, 27)]

    def read(p):
        out = []
        for lb in CsvStream(str(p), names, "\t", block_size=block, numeric=tuple(names[1:14])):
            out.append((lb.table.to_pydict(), lb.lines.tolist(), [(r.line, r.reason) for r in lb.bad]))
        return out

    a, b = read(plain), read(gz)
    assert a == b
    assert sum(len(x[1]) for x in a) + sum(len(x[2]) for x in a) == len(lines)


def test_text_starting_with_gzip_magic_names_a_line(tmp_path):
    path = tmp_path / "b.txt"
    path.write_bytes(b"\x1f\x8b\n")
    with pytest.raises(DataFormatError) as e:
        prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(**QUIET))
    assert e.value.line == 1
