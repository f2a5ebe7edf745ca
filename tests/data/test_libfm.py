"""`prepare libfm`: libfm / svmlight rows (label, then index:value pairs) into a dataset folder, fields by
position or by index range, on files written here in the formats the public copies use: Frappe as the
NFM/AFN repositories ship it (label -1/1, ten one-hot pairs, each field in its own index range) and an
svmlight file with Criteo-like counts as index:value at indices 1-3, categories one-hot in per-field ranges
above, missing features left out, `+1` labels and a `# comment`."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctrnas.cli import main

BUCKETS = 1000
# Frappe's ten fields and where their one-hot indices start (user, item, cnt, daytime, weekday, isweekend,
# homework, cost, weather, country; the last ends at 5381)
FRAPPE = {"user": 0, "item": 957, "cnt": 5039, "daytime": 5046, "weekday": 5053, "isweekend": 5060,
          "homework": 5062, "cost": 5065, "weather": 5067, "country": 5077}
FRAPPE_END = 5381
IN_ORDER = ["--split", "order", "--split-ratios", "1,0,0", "--hash-table-size", "buckets", "--hash-buckets",
            str(BUCKETS), "--no-progress"]


def _frappe(path, rows=200, seed=0):
    """Frappe rows: `label idx:1 ... idx:1` (label -1 or 1), one pair per field in field order; returns
    (labels 0/1, [rows, 10] indices) as written."""
    rng = np.random.default_rng(seed)
    starts = list(FRAPPE.values()) + [FRAPPE_END]
    idx = np.stack([rng.integers(starts[k], starts[k + 1], rows) for k in range(10)], axis=1)
    labels = (rng.random(rows) < 0.33).astype(int)
    path.write_text("".join(f"{'1' if y else '-1'} " + " ".join(f"{i}:1" for i in r) + "\n"
                            for y, r in zip(labels, idx)))
    return labels, idx


def _ids(idx):
    return 1 + idx % (BUCKETS - 1)  # the modulo hashing of a category keyed by its index


def _train(folder):
    return pq.read_table(folder / "train").to_pandas()


def _ranges():
    starts = list(FRAPPE.values()) + [FRAPPE_END]
    return ",".join(f"{name}={starts[k]}-{starts[k + 1] - 1}" for k, name in enumerate(FRAPPE))


def test_frappe_by_position_and_by_index_range_give_the_rows_as_written(tmp_path):
    labels, idx = _frappe(tmp_path / "frappe.libfm")
    assert main(["prepare", "libfm", "-i", str(tmp_path / "frappe.libfm"), "-o", str(tmp_path / "pos"),
                 "--fields", ",".join(FRAPPE), *IN_ORDER]) == 0
    assert main(["prepare", "libfm", "-i", str(tmp_path / "frappe.libfm"), "-o", str(tmp_path / "rng"),
                 "--ranges", _ranges(), *IN_ORDER]) == 0
    meta = json.loads((tmp_path / "pos/meta.json").read_text())
    assert [f["name"] for f in meta["schema"]["sparse"]] == list(FRAPPE) and meta["schema"]["dense"] == []
    assert meta["rows"]["accepted"] == meta["splits"]["train"]["rows"] == 200
    for folder in ("pos", "rng"):
        df = _train(tmp_path / folder)
        assert df["label"].tolist() == labels.tolist()  # -1 -> 0, 1 -> 1
        for k, name in enumerate(FRAPPE):
            assert df[name].tolist() == _ids(idx[:, k]).tolist(), (folder, name)
    # a count names the fields f1..fN
    assert main(["prepare", "libfm", "-i", str(tmp_path / "frappe.libfm"), "-o", str(tmp_path / "n"),
                 "--fields", "10", *IN_ORDER]) == 0
    assert _train(tmp_path / "n")["f3"].tolist() == _ids(idx[:, 2]).tolist()


def test_the_dataset_loader_reads_a_libfm_folder(tmp_path):
    from ctrnas.data.loader import CtrBatchLoader

    labels, idx = _frappe(tmp_path / "frappe.libfm", rows=100)
    assert main(["prepare", "libfm", "-i", str(tmp_path / "frappe.libfm"), "-o", str(tmp_path / "d"),
                 "--fields", "10", *IN_ORDER]) == 0
    batches = list(CtrBatchLoader(tmp_path / "d", "train", batch_size=100))
    got = batches[0].sparse_features.to_dict()
    assert sorted(got) == sorted(f"f{k}" for k in range(1, 11))
    for k in range(10):
        assert got[f"f{k + 1}"].values().tolist() == _ids(idx[:, k]).tolist()
    assert batches[0].labels.tolist() == labels.tolist()


def test_svmlight_counts_are_read_as_values_and_left_out_features_as_missing(tmp_path):
    lines = ["1 1:3 2:-1 3:0.5 14:1 20:1 # first row: the comment is ignored",
             "+1 2:7 15:1",  # I1, I3 and the second category left out: missing
             "0 1:12 3:2 14:1 21:1",
             "-1 3:1e3 16:1 22:1"]
    (tmp_path / "c.svm").write_text("\n".join(lines) + "\n")
    assert main(["prepare", "libfm", "-i", str(tmp_path / "c.svm"), "-o", str(tmp_path / "d"),
                 "--ranges", "I1=1,I2=2,I3=3,C1=4-19,C2=20-29", "--dense", "I1,I2,I3", "--dense-transform",
                 "none", *IN_ORDER]) == 0
    meta = json.loads((tmp_path / "d/meta.json").read_text())
    assert meta["schema"]["dense"] == ["I1", "I2", "I3"]
    df = _train(tmp_path / "d")
    assert df["label"].tolist() == [1, 1, 0, 0]
    assert df["I1"].tolist() == [3, 0, 12, 0] and df["I2"].tolist() == [-1, 7, 0, 0]  # missing: 0
    assert df["I3"].tolist() == [0.5, 0, 2, 1000]
    assert df["C1"].tolist() == _ids(np.array([14, 15, 14, 16])).tolist()
    assert df["C2"].tolist() == [_ids(20), 0, _ids(21), _ids(22)]  # 0: the missing id


def test_rows_that_do_not_fit_are_rejects_naming_line_and_pair(tmp_path, capsys):
    lines = ["1 0:1 10:1",       # fine
             "1 0:1 10:0.5",     # a category's value must be 1
             "0 0:1 10",         # not index:value
             "0 0:1 99:1",       # index in no range
             "1 1:1 2:1 10:1",   # field a twice
             "2 0:1 10:1",       # bad label
             "",                 # blank
             "0 3:1 11:1"]       # fine
    (tmp_path / "bad.libfm").write_text("\n".join(lines) + "\n")
    args = ["prepare", "libfm", "-i", str(tmp_path / "bad.libfm"), "--ranges", "a=0-9,b=10-19", *IN_ORDER]
    assert main([*args, "-o", str(tmp_path / "d"), "--on-error", "skip"]) == 0
    meta = json.loads((tmp_path / "d/meta.json").read_text())
    assert meta["rows"]["rejected_by_reason"] == {"bad_label": 1, "bad_pair": 1, "repeated_field": 1,
                                                  "sparse_value": 1, "unknown_index": 1}
    assert (meta["rows"]["accepted"], meta["rows"]["blank_lines"]) == (2, 1)
    rejects = (tmp_path / "d/rejects.tsv").read_text().splitlines()[1:]
    assert [int(r.split("\t")[1]) for r in rejects] == [2, 3, 4, 5, 6]
    assert "pair 2 '99:1'" in rejects[2] and "a second pair of field a" in rejects[3]
    assert _train(tmp_path / "d")["b"].tolist() == _ids(np.array([10, 11])).tolist()
    capsys.readouterr()
    assert main([*args, "-o", str(tmp_path / "e")]) == 1
    assert "bad.libfm, line 2: pair 2 '10:0.5': a category's value must be 1" in capsys.readouterr().err


@pytest.mark.parametrize("flags, says", [
    ([], "--fields A,B,.. or --fields N"),
    (["--fields", "a", "--ranges", "b=1-2"], "one of the two"),
    (["--ranges", "a=0-9,b=5-19"], "a [0, 9] and b [5, 19] overlap"),
    (["--ranges", "a=0-9", "--dense", "a"], "a dense field has one index"),
    (["--fields", "a,b", "--dense", "c"], "'c' is not a field"),
])
def test_field_settings_that_cannot_work_are_one_line_errors(tmp_path, capsys, flags, says):
    (tmp_path / "x.libfm").write_text("1 0:1\n")
    assert main(["prepare", "libfm", "-i", str(tmp_path / "x.libfm"), "-o", str(tmp_path / "d"), *flags,
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
