"""The newcomer's path: prepare -> train (a baseline, an arch) -> predict, and train -> export -> model.pt2
loaded with torch alone, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctrnas.cli import main
from ctrnas.data.dataset import load_schema, split_files
from tests.helpers.samples import criteo_sample

# one epoch of NASRec's fixed protocol: these tests are about the model folder, not the training's length
FAST = ["--no-progress", "--batch-size", "32", "--seed", "1", "--protocol", "nasrec", "--epochs", "1"]
LOAD = """
import sys
sys.modules["ctrnas"] = None  # importing ctrnas fails here
import numpy as np, torch
x = np.load(sys.argv[1])
for model, out in zip(sys.argv[2::2], sys.argv[3::2]):  # each (model.pt2, probabilities .npy) pair
    with torch.no_grad():
        p = torch.export.load(model).module()(torch.from_numpy(x["dense"]), torch.from_numpy(x["ids"]))
    np.save(out, p.numpy())
"""
EXPORTED = [["--arch", "dlrm-like"], ["--baseline", "fm"]]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    data = tmp_path_factory.mktemp("prep") / "criteo"
    assert main(["prepare", "criteo", "--input", str(criteo_sample()), "--out", str(data), "--hash-buckets", "300",
                 "--no-progress"]) == 0
    return data


@pytest.fixture(scope="module")
def trained(prepared, tmp_path_factory):
    """`trained(what)`: the folder `ctrnas train --data <prepared> <what> --out T` wrote, trained once for the
    module's tests (they only read it)."""
    folders = {}

    def get(what: list[str]):
        if tuple(what) not in folders:
            out = tmp_path_factory.mktemp("trained") / "T"
            assert main(["train", "--data", str(prepared), *what, "--out", str(out), *FAST]) == 0
            folders[tuple(what)] = out
        return folders[tuple(what)]

    return get


def _predict(model, inputs, out, *more) -> dict:
    summary = out.with_suffix(".json")
    assert main(["predict", "--model", str(model), "--input", *map(str, inputs), "--out", str(out),
                 "--summary", str(summary), "--no-progress", *more]) == 0
    return json.loads(summary.read_text())


@pytest.mark.parametrize("what", [["--baseline", "lr"], ["--arch", "dcnv2-like"]])
def test_prepare_train_predict(tmp_path, prepared, trained, what, capsys):
    """`ctrnas train --out T` writes a model folder: `predict --model T` scores raw rows, and the prepared test
    split to the log loss `train` reported (the same weights)."""
    out = trained(what)  # dcnv2-like: no --space
    metrics = json.loads((out / "metrics.json").read_text())
    card = json.loads((out / "model_card.json").read_text())
    assert (out / "transform.json").is_file() and (out / "model.pt2").is_file()
    assert card["metrics"]["test_logloss"] == metrics["test"]["logloss"]
    assert card["params_dense"] + card["params_embedding"] == metrics["params"]["total"]
    if what[0] == "--arch":
        assert metrics["space"] == "ctrnas-small"  # the space the shipped arch was made for

    s = _predict(out, [criteo_sample()], tmp_path / "raw.parquet")
    assert s["rows"]["read"] == s["rows"]["written"] == 100 and s["rows"]["rejected"] == 0
    p = pq.read_table(tmp_path / "raw.parquet").column("probability").to_numpy()
    assert p.shape == (100,) and ((p >= 0) & (p <= 1)).all()

    s = _predict(out, [prepared], tmp_path / "test.parquet", "--split", "test")
    assert s["metrics"]["logloss"] == pytest.approx(metrics["test"]["logloss"], rel=1e-5)
    assert "predicted" in capsys.readouterr().out


@pytest.fixture(scope="module")
def loaded_with_torch_alone(prepared, tmp_path_factory):
    """For each of EXPORTED: train into T<i>, `export --trained` into M<i>; then ONE fresh interpreter without
    ctrnas loads every M<i>/model.pt2 and writes its probabilities on the test split to p<i>.npy (one torch
    import for all). The load's CompletedProcess; the folders under `.tmp`."""
    tmp = tmp_path_factory.mktemp("torch-alone")
    for i, what in enumerate(EXPORTED):
        assert main(["train", "--data", str(prepared), *what, "--out", str(tmp / f"T{i}"), *FAST]) == 0
        assert main(["export", "--trained", str(tmp / f"T{i}"), "--out", str(tmp / f"M{i}")]) == 0
    schema = load_schema(prepared)
    t = pq.read_table(split_files(prepared, "test")[0])
    np.savez(tmp / "rows.npz", dense=np.stack([t.column(c).to_numpy() for c in schema.dense], 1),
             ids=np.stack([t.column(c).to_numpy() for c in schema.sparse_names], 1).astype(np.int64))
    (tmp / "load.py").write_text(LOAD)
    pairs = [str(p) for i in range(len(EXPORTED)) for p in (tmp / f"M{i}" / "model.pt2", tmp / f"p{i}.npy")]
    done = subprocess.run([sys.executable, "-I", str(tmp / "load.py"), str(tmp / "rows.npz"), *pairs],
                          capture_output=True, text=True, timeout=300)
    done.tmp = tmp
    return done


@pytest.mark.parametrize("what", EXPORTED)
def test_train_export_loads_with_torch_alone(loaded_with_torch_alone, tmp_path, prepared, what):
    """prepare -> train -> `export --trained` -> model.pt2 in a fresh interpreter without ctrnas gives the
    probabilities `predict` gives."""
    i, tmp = EXPORTED.index(what), loaded_with_torch_alone.tmp
    out, model = tmp / f"T{i}", tmp / f"M{i}"
    card = json.loads((model / "model_card.json").read_text())
    assert (card.get("init") == "fresh+trained") if what[0] == "--arch" else (card["baseline"] == "fm")
    assert (model / "transform.json").is_file()

    done = loaded_with_torch_alone
    assert done.returncode == 0, done.stderr[-2000:]
    _predict(out, [prepared], tmp_path / "test.parquet", "--split", "test")
    want = pq.read_table(tmp_path / "test.parquet").column("probability").to_numpy()
    np.testing.assert_allclose(np.load(tmp / f"p{i}.npy"), want, rtol=1e-5, atol=1e-7)


def test_export_of_a_folder_that_is_no_trained_model_is_one_short_line(tmp_path, capsys):
    (tmp_path / "T").mkdir()
    (tmp_path / "T" / "metrics.json").write_text("{}")
    assert main(["export", "--trained", str(tmp_path / "T"), "--out", str(tmp_path / "M")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and len(err) < 300 and "run the same `ctrnas train` command again" in err
    (tmp_path / "T" / "model").mkdir()  # a run's folder: its model/ is the model folder
    (tmp_path / "T" / "model" / "model_card.json").write_text("{}")
    assert main(["export", "--trained", str(tmp_path / "T"), "--out", str(tmp_path / "M")]) == 1
    assert "a run's folder; its model is" in capsys.readouterr().err
    assert main(["export", "--trained", str(tmp_path / "nope"), "--out", str(tmp_path / "M")]) == 1
    assert "no such file or folder" in capsys.readouterr().err  # checked before torch is imported


def test_export_of_a_trained_file_as_a_supernet_points_to_trained(tmp_path, trained, capsys):
    out = trained(["--baseline", "lr"])
    capsys.readouterr()
    assert main(["export", "--arch", "dlrm-like", "--supernet", str(out / "model.pt"), "--out",
                 str(tmp_path / "M")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err) < 300 and f"ctrnas export --trained {out}" in err


@pytest.mark.parametrize("kind", ["avazu", "kdd2012"])
def test_prepare_train_predict_other_formats(tmp_path, kind):
    """The same path for Avazu's CSV and KDD 2012's training.txt with its user profile side file."""
    from tests.helpers.samples import avazu_sample, kdd_sample

    if kind == "avazu":
        raw, more = avazu_sample(), []
    else:
        raw, profile = kdd_sample()
        more = ["--profile", str(profile)]
    data, out = tmp_path / "data", tmp_path / "T"
    assert main(["prepare", kind, "--input", str(raw), "--out", str(data), "--hash-buckets", "300", "--no-progress",
                 *more]) == 0
    assert main(["train", "--data", str(data), "--baseline", "lr", "--out", str(out), *FAST]) == 0
    s = _predict(out, [raw], tmp_path / "raw.parquet")
    assert s["rows"]["read"] == s["rows"]["written"] == 100 and s["rows"]["rejected"] == 0
    assert s["metrics"] is not None  # both formats carry their labels
