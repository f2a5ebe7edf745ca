"""`predict` scores with the folder's model.pt2 and torch alone (no TorchRec) where it can: the same numbers as
the model rebuilt from model.pt, and where model.pt2 cannot serve, the rebuilt model with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctrnas.serving.predict import predict_file
from tests.helpers.samples import sample

ROOT = Path(__file__).resolve().parents[2]


def _both_paths(model: Path, inputs, tmp: Path, **kw) -> tuple[dict, dict, pq.ParquetFile, pq.ParquetFile]:
    a = predict_file(model, inputs, tmp / "program.parquet", progress=False, **kw)
    b = predict_file(model, inputs, tmp / "rebuilt.parquet", progress=False, program=False, **kw)
    return a, b, pq.read_table(tmp / "program.parquet"), pq.read_table(tmp / "rebuilt.parquet")


@pytest.mark.parametrize("arch,row_cap", [("dlrm-like", None), ("dcnv2-like", 40)])
def test_predict_through_model_pt2_equals_the_rebuilt_model(tmp_path, criteo_exported, arch, row_cap):
    raw = sample("criteo")
    data, model = criteo_exported(arch=arch, row_cap=row_cap)
    a, b, ta, tb = _both_paths(model, [str(raw)], tmp_path)
    assert a["scored_with"] == "model.pt2 (torch alone)"
    assert b["scored_with"].startswith("model.pt rebuilt with TorchRec")
    assert ta.num_rows == tb.num_rows == 100 and ta.column_names == tb.column_names
    assert ta.drop(["probability"]).equals(tb.drop(["probability"]))  # file, line, label
    np.testing.assert_allclose(ta.column("probability").to_numpy(), tb.column("probability").to_numpy(),
                               rtol=1e-5, atol=1e-7)
    assert a["metrics"]["logloss"] == pytest.approx(b["metrics"]["logloss"], rel=1e-6)
    assert a["metrics"]["auc"] == pytest.approx(b["metrics"]["auc"], rel=1e-9)
    assert a["rows"] == b["rows"]


def test_a_capped_baseline_folder_scores_the_same_through_model_pt2(tmp_path, criteo_exported):
    """Several stems folded by one row cap (the LR term and the embeddings), on a prepared folder's rows."""
    from ctrnas.data.dataset import load_schema
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.baselines.folder import save_baseline

    data, _ = criteo_exported()
    schema = load_schema(data)
    model = build_baseline("deepfm", schema, dim=4, row_cap=40, seed=2).eval()
    save_baseline(model, tmp_path / "deepfm", "deepfm", {}, schema, build={"dim": 4, "row_cap": 40})
    a, b, ta, tb = _both_paths(tmp_path / "deepfm", str(data), tmp_path, split="train")
    assert a["scored_with"].startswith("model.pt2") and b["scored_with"].startswith("model.pt rebuilt")
    assert ta.num_rows == 100
    np.testing.assert_allclose(ta.column("probability").to_numpy(), tb.column("probability").to_numpy(),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("what", ["baseline:xdeepfm", "baseline:autoint+", "arch:deepfm-terms-like",
                                  "arch:xdeepfm-like", "tables:per-table widths"])
def test_the_program_gives_the_models_own_logits(tmp_path, what):
    """Models of other operators than the predict tests': CIN, attention, FM terms, per-table widths with a
    dropped field, each with a row cap. Bit for bit: the same ATen kernels on tensors like the model's own."""
    import torch

    from ctrnas.serving.predict import kjt_of
    from ctrnas.serving.program import load_program
    from ctrnas.supernet.io import save_exported
    from ctrnas.supernet.testing import make_schema
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.baselines.folder import save_baseline

    cards = (50, 7, 300, 20)
    schema = make_schema(n_dense=3, cards=cards)
    kind, name = what.split(":")
    if kind == "baseline":
        model = build_baseline(name, schema, dim=4, row_cap=40, seed=1).eval()
        save_baseline(model, tmp_path, name, {}, schema, build={"dim": 4, "row_cap": 40})
    elif kind == "tables":
        import dataclasses

        from ctrnas.supernet import Supernet, export

        torch.manual_seed(0)
        space = {"base": "ctrnas-small", "num_blocks": 3, "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3],
                 "merge_tokens": 2, "table_dims": [0, 2, 4, 8]}
        supernet = Supernet(schema, space, emb_dim=8, row_cap=40)
        arch = dataclasses.replace(supernet.space.sample(np.random.default_rng(1)),
                                   table_dims=(("C0", 2), ("C1", 0), ("C3", 4)))
        model = export(supernet, arch, init="inherit").eval()
        save_exported(model, tmp_path)
    else:
        from ctrnas.space.baselines import baseline_arch, home_space
        from ctrnas.supernet.export import export
        from ctrnas.supernet.fresh import build_supernet

        supernet = build_supernet(schema, home_space(name), seed=0, emb_dim=8, row_cap=40)
        model = export(supernet, baseline_arch(name), init="fresh", seed=1).eval()
        save_exported(model, tmp_path)
    program, why = load_program(tmp_path)
    assert program is not None, why
    rng = np.random.default_rng(0)
    dense = torch.from_numpy(rng.random((33, 3)).astype(np.float32))
    ids = np.stack([rng.integers(0, c, 33) for c in cards], 1)
    with torch.no_grad():
        want = model(dense, kjt_of(ids, schema.sparse_names))
        got = program.logits(dense, torch.from_numpy(ids))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# runs `ctrnas predict` as the command line does, then names the heavy modules it loaded
PROBE = ("import sys\nfrom ctrnas.cli import main\ncode = main(sys.argv[1:])\n"
         "print(code, sorted(m for m in ('torchrec', 'fbgemm_gpu', 'torch._dynamo', 'sklearn') if m in sys.modules),"
         " file=sys.stderr)")


def _predict_in_a_child(model: Path, raw: Path, out: Path) -> tuple[str, str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE, "predict", "--model", str(model), "--input", str(raw),
                           "--out", str(out), "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    status, loaded = done.stderr.strip().splitlines()[-1].split(" ", 1)
    assert status == "0", done.stderr[-2000:]
    return done.stdout, done.stderr, loaded


def test_predict_of_a_folder_with_model_pt2_imports_no_torchrec(tmp_path, criteo_exported):
    raw = sample("criteo")
    model = tmp_path / "criteo-model"
    shutil.copytree(criteo_exported()[1], model)  # a copy: model.pt2 is removed below
    out, err, loaded = _predict_in_a_child(model, raw, tmp_path / "p.parquet")
    assert loaded == "[]", err  # neither TorchRec, FBGEMM, TorchDynamo nor scikit-learn
    assert out.startswith("predicted 100 rows into") and "scored with" not in err
    # the same folder without model.pt2: the rebuilt model (TorchRec), and a line saying why
    (model / "model.pt2").unlink()
    out2, err2, loaded2 = _predict_in_a_child(model, raw, tmp_path / "q.parquet")
    assert "torchrec" in loaded2 and out2.split(" (")[0] == out.split(" (")[0].replace("p.parquet", "q.parquet")
    assert f"scored with model.pt rebuilt with TorchRec: no model.pt2 in {model}" in err2
    np.testing.assert_allclose(pq.read_table(tmp_path / "p.parquet").column("probability").to_numpy(),
                               pq.read_table(tmp_path / "q.parquet").column("probability").to_numpy(),
                               rtol=1e-5, atol=1e-7)
