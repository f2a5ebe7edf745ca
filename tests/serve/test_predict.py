"""`ctrnas predict`: raw rows -> the probabilities the model gives the prepared rows; row accounting."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import log_loss, roc_auc_score

from ctrnas import api
from ctrnas.cli import main
from ctrnas.data.dataset import read_meta
from ctrnas.errors import PathError
from tests.helpers.samples import SOURCES, sample
from tests.helpers.serve import prepared_and_exported, training_path_probabilities


@pytest.fixture
def criteo_with_bad_rows(tmp_path, criteo_sample):
    lines = criteo_sample.read_text().splitlines()
    lines[3] = "x" + lines[3][1:]  # bad label
    lines[10] = "\t".join(lines[10].split("\t")[:20])  # too few fields
    f = lines[20].split("\t")
    f[2] = "abc"  # non-numeric I2
    lines[20] = "\t".join(f)
    lines.insert(30, "")  # a blank line: not a row
    path = tmp_path / "day.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_predict_raw_rows_equals_model_on_prepared_rows_and_counts_every_row(tmp_path, criteo_with_bad_rows):
    data, model = prepared_and_exported(tmp_path, "criteo", [str(criteo_with_bad_rows)], hash_buckets=500)
    out = tmp_path / "preds.parquet"
    s = api.predict(model, [str(criteo_with_bad_rows)], out, progress=False, summary=tmp_path / "s.json")
    prepared = read_meta(data)["rows"]
    assert s["rows"]["read"] == s["rows"]["written"] + s["rows"]["rejected"] == prepared["read"] == 100
    assert s["rows"]["rejected_by_reason"] == prepared["rejected_by_reason"] == \
        {"bad_label": 1, "field_count": 1, "non_numeric_dense": 1}
    assert [(r["line"], r["reason"]) for r in s["first_rejects"]] == \
        [(4, "bad_label"), (11, "field_count"), (21, "non_numeric_dense")]
    t = pq.read_table(out)
    want = training_path_probabilities(model, data)
    np.testing.assert_allclose(t.column("probability").to_numpy(), want, rtol=1e-5, atol=1e-7)
    good = [i for i in range(1, 102) if i not in (4, 11, 21, 31)]  # physical lines of the accepted rows
    assert t.column("line").to_pylist() == good
    y, p = t.column("label").to_numpy(), t.column("probability").to_numpy().astype(np.float64)
    assert s["metrics"]["logloss"] == pytest.approx(log_loss(y, p), rel=1e-5)
    assert s["metrics"]["auc"] == pytest.approx(roc_auc_score(y, p), rel=1e-9)
    assert json.loads((tmp_path / "s.json").read_text())["rows"] == s["rows"]

    # the same rows without their labels (as tomorrow's impressions come): same probabilities, no label
    unlabelled = tmp_path / "test.tsv"
    unlabelled.write_text("\n".join(line.split("\t", 1)[1] if line else line
                                    for line in criteo_with_bad_rows.read_text().splitlines()) + "\n")
    s2 = api.predict(model, [str(unlabelled)], tmp_path / "p2.parquet", progress=False)
    t2 = pq.read_table(tmp_path / "p2.parquet")
    assert "label" not in t2.column_names and s2["metrics"] is None
    assert s2["rows"]["rejected_by_reason"] == {"field_count": 1, "non_numeric_dense": 1}
    rows = [good.index(x) for x in t2.column("line").to_pylist() if x in good]
    assert t2.num_rows == 98  # line 4's bad label went with the labels
    in_good = [x in good for x in t2.column("line").to_pylist()]
    np.testing.assert_allclose(t2.column("probability").to_numpy()[in_good], t.column("probability").to_numpy()[rows],
                               rtol=1e-6)  # other batch boundaries: float32 rounding

    # a prepared folder as input: the model's probabilities on its rows
    s3 = api.predict(model, str(data), tmp_path / "p3.parquet", split="train", progress=False)
    assert s3["rows"]["written"] == 97
    np.testing.assert_allclose(pq.read_table(tmp_path / "p3.parquet").column("probability").to_numpy(), want,
                               rtol=1e-5, atol=1e-7)
    with pytest.raises(PathError, match="exists"):
        api.predict(model, [str(criteo_with_bad_rows)], out, progress=False)


def test_dataframe_call_is_aligned_with_its_rows_and_agrees_with_the_file(tmp_path, avazu_sample):
    data, model = prepared_and_exported(tmp_path, "avazu", [str(avazu_sample)], sparse_encoding="vocab",
                                        min_count=2, avazu_hour="split")
    api.predict(model, [str(avazu_sample)], tmp_path / "p.parquet", progress=False)
    want = pq.read_table(tmp_path / "p.parquet").column("probability").to_numpy()
    df = pd.read_csv(avazu_sample, dtype={"id": str})  # `id` exceeds int64
    df.loc[5, "click"] = 7  # a bad label: this row gets no probability, and says why
    got = api.predict(model, df)
    assert isinstance(got, pd.DataFrame) and len(got) == 100
    assert got["reject"].notna().sum() == 1 and got["reject"][5] == "bad_label"
    ok = np.arange(100) != 5
    np.testing.assert_allclose(got["probability"].to_numpy()[ok], want[ok], rtol=1e-6)
    assert np.isnan(got["probability"][5])


@pytest.mark.parametrize("source", SOURCES)
def test_cli_predict_prints_counts_and_metrics(tmp_path, criteo_exported, source, capsys):
    criteo_sample = sample("criteo", source)
    _, model = criteo_exported(source)
    assert main(["predict", "--model", str(model), "--input", str(criteo_sample), "--out",
                 str(tmp_path / "p.parquet"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "predicted 100 rows" in out and "read 100, rejected 0" in out and "AUC" in out
    assert main(["predict", "--model", str(model), "--input", str(criteo_sample), "--out",
                 str(tmp_path / "p.parquet"), "--kind", "avazu", "--overwrite"]) == 1
    assert "trained on criteo data" in capsys.readouterr().err
    # a failed run leaves the earlier output as it was, and no temp file
    assert pq.read_table(tmp_path / "p.parquet").num_rows == 100
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
