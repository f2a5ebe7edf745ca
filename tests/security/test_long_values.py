"""A long field value costs time linear in its length: `prepare` on a row with a 10 MB value (the repro: 232 s)
finishes in seconds, and the hash of every ordinary value is still FNV-1a 64, checked against an independent
byte-at-a-time implementation."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from ctrnas.cli import main
from ctrnas.data.transforms import LONG_VALUE, fnv1a64
from tests.helpers.security import criteo_lines


def fnv1a64_reference(data: bytes) -> int:
    """FNV-1a 64 as its authors define it (offset basis 14695981039346656037, prime 1099511628211)."""
    h = 14695981039346656037
    for byte in data:
        h ^= byte
        h = (h * 1099511628211) % 2**64
    return h


def test_ordinary_values_hash_as_fnv1a64():
    rng = np.random.default_rng(7)
    values = ["", "a", "foobar", "é", "日本語", None]
    values += ["".join(chr(int(c)) for c in rng.integers(32, 0x3000, int(n)))
               for n in rng.integers(0, 60, 300)]
    values += ["x" * 1000, "ab" * (LONG_VALUE // 2), "z" * (LONG_VALUE - 1)]  # up to the limit: FNV-1a too
    got = fnv1a64(pa.array(values))
    want = [fnv1a64_reference((v or "").encode("utf-8")) for v in values]
    assert [int(g) for g in got] == want
    assert fnv1a64_reference(b"a") == 0xAF63DC4C8601EC8C  # the published test vector of "a"


def test_a_long_value_is_hashed_in_linear_time_and_by_its_bytes():
    long = "q" * 10_000_000
    t0 = time.perf_counter()
    h = fnv1a64(pa.array([long, "ab", long[:-1] + "r", None]))
    assert time.perf_counter() - t0 < 2.0
    assert h[0] != h[2] and h[0] == fnv1a64(pa.array([long]))[0]  # by its bytes, not by its neighbours
    assert int(h[1]) == fnv1a64_reference(b"ab")


def test_prepare_with_a_10_mb_value_takes_seconds(tmp_path, capsys):
    lines = criteo_lines(200, seed=3)
    fields = lines[5].split("\t")
    fields[20] = "g" * 10_000_000  # one categorical value of 10 MB (not hex: hashed)
    lines[5] = "\t".join(fields)
    raw = tmp_path / "crit.tsv"
    raw.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    rc = main(["prepare", "criteo", "--input", str(raw), "--out", str(tmp_path / "D"), "--no-progress"])
    took = time.perf_counter() - t0
    assert rc == 0, capsys.readouterr().err
    assert took < 5.0, f"{took:.1f} s"
