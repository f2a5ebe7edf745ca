"""User errors at the edges of `prepare`: empty inputs, unusable paths, huge bad values; each one line, no traceback."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ctrnas.cli import main
from ctrnas.data.loader import CtrBatchLoader
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig, TableColumns
from ctrnas.errors import CtrnasError, DataFormatError, PathError

QUIET = dict(progress=False)


def cli_error(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("kind, text, cfg", [
    ("criteo", "", {}),
    ("criteo", "\n\n  \n", {}),
    ("avazu", None, {}),  # the real header, no rows
    ("table", "click,a,b\n", {"table": TableColumns("click", ("a",), ("b",))}),
])
def test_empty_or_header_only_input_is_an_error_naming_the_file(tmp_path, raw, kind, text, cfg):
    if text is None:
        text = raw.need(raw.avazu_sample).read_text().splitlines()[0] + "\n"
    path = tmp_path / "in.txt"
    path.write_text(text)
    with pytest.raises(DataFormatError, match="no data rows") as e:
        prepare(kind, [str(path)], tmp_path / "o", PrepareConfig(**cfg, **QUIET))
    assert e.value.file == str(path)
    assert not (tmp_path / "o" / "meta.json").exists()  # no 0-row dataset to train on


def test_one_empty_file_among_several_is_named(tmp_path, raw):
    rng = np.random.default_rng(0)
    good = raw.write_text(tmp_path / "day_0", [raw.criteo_line(rng) for _ in range(50)])
    empty = tmp_path / "day_1"
    empty.write_bytes(b"")
    with pytest.raises(DataFormatError, match="day_1: no data rows"):
        prepare("criteo", [str(good), str(empty)], tmp_path / "o", PrepareConfig(**QUIET))


def test_every_row_rejected_is_an_error_that_points_at_the_rejects(tmp_path, raw, capsys):
    path = raw.write_text(tmp_path / "t.txt", ["2\t1", "x" * 10, "1\t\t"])
    with pytest.raises(DataFormatError, match=r"all 3 rows read were rejected \(field_count 3\).*rejects.tsv"):
        prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(on_error="skip", **QUIET))
    assert len((tmp_path / "o" / "rejects.tsv").read_text().splitlines()) == 4  # header + 3
    err = cli_error(capsys, ["prepare", "criteo", "-i", str(path), "-o", str(tmp_path / "c"), "--on-error", "skip",
                             "--no-progress"])
    assert str(path) in err


def test_a_split_with_no_rows_fails_before_training(tmp_path, raw):
    rng = np.random.default_rng(1)
    path = raw.write_text(tmp_path / "t.txt", [raw.criteo_line(rng) for _ in range(30)])
    prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(split="order", split_ratios=(1.0, 0.0, 0.0), **QUIET))
    assert CtrBatchLoader(tmp_path / "o", "train", 8).rows == 30
    with pytest.raises(CtrnasError, match=r"split 'val' has 0 rows \(of 30 in the folder\)"):
        CtrBatchLoader(tmp_path / "o", "val", 8)


def test_output_and_input_path_errors_are_one_line(tmp_path, raw, capsys):
    rng = np.random.default_rng(2)
    good = raw.write_text(tmp_path / "t.txt", [raw.criteo_line(rng) for _ in range(20)])
    a_file = tmp_path / "taken"
    a_file.write_text("mine")
    err = cli_error(capsys, ["prepare", "criteo", "-i", str(good), "-o", str(a_file), "--no-progress"])
    assert "exists and is not a folder" in err and a_file.read_text() == "mine"
    with pytest.raises(PathError, match="a part of this path is a file"):
        prepare("criteo", [str(good)], a_file / "sub", PrepareConfig(**QUIET))
    err = cli_error(capsys, ["prepare", "criteo", "-i", str(tmp_path), "-o", str(tmp_path / "o"), "--no-progress"])
    assert f"{tmp_path}: is a folder" in err
    err = cli_error(capsys, ["prepare", "criteo", "-i", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "o")])
    assert "nope.txt: no such file" in err


def test_unwritable_output_folder_is_one_line(tmp_path, raw, capsys):
    rng = np.random.default_rng(2)
    good = raw.write_text(tmp_path / "t.txt", [raw.criteo_line(rng) for _ in range(20)])
    if os.geteuid() == 0:  # root writes anywhere but in a read-only file system
        target = Path("/sys/ctrnas-test-out")
        if not Path("/sys/kernel").is_dir():
            pytest.skip("running as root without /sys: no unwritable folder to try")
    else:
        locked = tmp_path / "ro"
        locked.mkdir(mode=0o500)
        target = locked / "o"
    err = cli_error(capsys, ["prepare", "criteo", "-i", str(good), "-o", str(target), "--no-progress"])
    assert str(target) in err and ("permission denied" in err or "cannot" in err)


def test_huge_bad_value_is_cut_in_the_error_and_in_rejects(tmp_path, raw):
    rng = np.random.default_rng(3)
    fields = raw.criteo_line(rng).split("\t")
    fields[3] = "9" * 500_000 + "x" * 500_000  # a 1 MB dense value that is no number
    path = raw.write_text(tmp_path / "t.txt", [raw.criteo_line(rng) for _ in range(20)] + ["\t".join(fields)])
    with pytest.raises(DataFormatError) as e:
        prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(**QUIET))
    assert e.value.line == 21 and e.value.field == "I3"
    assert len(str(e.value)) < 300 and "[1,000,000 chars]" in str(e.value)
    prepare("criteo", [str(path)], tmp_path / "s", PrepareConfig(on_error="skip", **QUIET))
    rejects = (tmp_path / "s" / "rejects.tsv").read_text().splitlines()
    assert len(rejects) == 2 and len(rejects[1]) < 800 and "[1,000,000 chars]" in rejects[1]
    too_long = raw.write_text(tmp_path / "u.txt", ["1\t" + "y" * 1_000_000])  # a field-count reject
    prepare("criteo", [str(too_long), str(path)], tmp_path / "u", PrepareConfig(on_error="skip", **QUIET))
    assert max(len(line) for line in (tmp_path / "u" / "rejects.tsv").read_text().splitlines()) < 800


def test_unclosed_quote_rejects_its_line_only_and_keeps_line_numbers(tmp_path):
    # found by tests/fuzz: pyarrow read the lines after an unclosed quote into one value
    path = tmp_path / "t.csv"
    path.write_bytes(b'click,a,b\n1,"x,1\n0,2,y\n1,"z"",3\n0,4,w\n1,"q""",8\n1,5,6,7\n')
    cfg = PrepareConfig(table=TableColumns("click", ("a",), ("b",)), on_error="skip", split="order", **QUIET)
    meta = prepare("table", [str(path)], tmp_path / "o", cfg)
    assert meta["rows"]["accepted"] == 2 and meta["rows"]["rejected_by_reason"] == {
        "field_count": 1, "non_numeric_dense": 1, "unbalanced_quote": 2}
    rejects = [r.split("\t") for r in (tmp_path / "o" / "rejects.tsv").read_text().splitlines()[1:]]
    assert [(r[1], r[3]) for r in rejects] == [("2", "unbalanced_quote"), ("4", "unbalanced_quote"),
                                               ("6", "non_numeric_dense"), ("7", "field_count")]
    assert rejects[0][5] == '1,"x,1'  # the line as written, not the marker


def test_missing_kdd_profile_is_named_before_reading(tmp_path, raw):
    rng = np.random.default_rng(4)
    path = raw.write_text(tmp_path / "training.txt", [raw.kdd_line(rng) for _ in range(20)])
    with pytest.raises(PathError, match="userid_profile.txt: no such file"):
        prepare("kdd2012", [str(path)], tmp_path / "o",
                PrepareConfig(kdd_profile=str(tmp_path / "userid_profile.txt"), **QUIET))
    assert not (tmp_path / "o").exists()
