"""`pad_missing_trailing` on a Criteo-format sample whose trailing empty fields were stripped (37/38 fields)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from tests.helpers.samples import SOURCES

SPLITS = ("train", "val", "test")


def tables(out):
    return {s: pq.read_table(out / s) for s in SPLITS}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("block_size", [16 << 20, 3000])  # one chunk; many (short rows at chunk edges)
def test_stripped_rows_read_as_the_full_file_with_the_option(tmp_path, raw, block_size, source):
    lines = raw.sample("criteo", source).read_text().splitlines()
    stripped = [line.rstrip("\t") for line in lines]
    short = sum(s.count("\t") < 39 for s in stripped)
    assert short == 53  # the sample's rows ending in 2 or 3 empty fields
    full = raw.write_text(tmp_path / "full.txt", lines)
    cut = raw.write_text(tmp_path / "cut.txt", stripped)
    settings = dict(split="order", dense_transform="none", block_size=block_size, progress=False)
    want = prepare("criteo", [str(full)], tmp_path / "a", PrepareConfig(**settings))
    assert "padded" not in want["rows"]  # meta.json unchanged without the option

    off = prepare("criteo", [str(cut)], tmp_path / "b", PrepareConfig(on_error="skip", **settings))
    assert off["rows"]["rejected_by_reason"] == {"field_count": short}

    on = prepare("criteo", [str(cut)], tmp_path / "c", PrepareConfig(pad_missing_trailing=True, **settings))
    assert on["rows"]["padded"] == short and on["rows"]["accepted"] == 100 and on["rows"]["rejected"] == 0
    got, expected = tables(tmp_path / "c"), tables(tmp_path / "a")
    for s in SPLITS:  # the same rows in the same order, missing values where the fields were stripped
        assert got[s].equals(expected[s])


def test_padding_never_accepts_too_many_fields_or_bad_values(tmp_path, raw):
    lines = raw.need(raw.criteo_sample).read_text().splitlines()[:30]
    lines[4] = lines[4] + "\textra"  # 41 fields
    lines[7] = "x\t" + lines[7].split("\t", 1)[1].rstrip("\t")  # short and a bad label
    lines[9] = "1"  # the label alone: not a stripped row (its numbers are missing), a reject
    lines[11] = "\t".join(lines[11].split("\t")[:14])  # label and numbers only: all 26 categories "stripped"
    lines[12] = "\t".join(lines[12].split("\t")[:13])  # one number short as well: a reject
    path = raw.write_text(tmp_path / "t.txt", lines)
    meta = prepare("criteo", [str(path)], tmp_path / "o",
                   PrepareConfig(pad_missing_trailing=True, on_error="skip", split="order", progress=False))
    assert meta["rows"]["rejected_by_reason"] == {"bad_label": 1, "field_count": 3}
    assert meta["rows"]["accepted"] == 26 and meta["rows"]["padded"] == 1
    rejects = [r.split("\t") for r in (tmp_path / "o" / "rejects.tsv").read_text().splitlines()[1:]]
    assert [(r[1], r[3]) for r in rejects] == [("5", "field_count"), ("8", "bad_label"), ("10", "field_count"),
                                               ("13", "field_count")]


def test_summary_reports_padded_rows(tmp_path, raw):
    from ctrnas.data.prepare import summary

    lines = [line.rstrip("\t") for line in raw.need(raw.criteo_sample).read_text().splitlines()]
    path = raw.write_text(tmp_path / "cut.txt", lines)
    meta = prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(pad_missing_trailing=True, progress=False))
    assert "filled the missing trailing fields of 53 rows" in summary(meta, tmp_path / "o")
