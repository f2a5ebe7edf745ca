"""The serving artifact `model.pt2` loads in a fresh interpreter without ctrnas and gives the same probabilities."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from ctrnas.data.dataset import load_schema, split_files
from ctrnas.serving.predict import kjt_of
from ctrnas.supernet.serving import save_serving
from ctrnas.supernet.testing import make_schema
from ctrnas.train.baselines import build_baseline
from tests.helpers.samples import SOURCES
from tests.helpers.serve import training_path_probabilities

LOAD = """
import sys
sys.modules["ctrnas"] = None  # importing ctrnas fails here
import numpy as np, torch
for rows, model, out in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):  # (rows .npz, model.pt2, .npy)
    x = np.load(rows)
    program = torch.export.load(model).module()
    with torch.no_grad():
        p = program(torch.from_numpy(x["dense"]), torch.from_numpy(x["ids"]))
    np.save(out, p.numpy())
print(sorted(m for m in ("torchrec", "fbgemm_gpu", "ctrnas") if sys.modules.get(m) is not None))
"""


@pytest.fixture(scope="module")
def loaded_with_torch_alone(criteo_exported, tmp_path_factory):
    """For each of SOURCES: the train rows of its criteo model (row cap 40) in <source>.npz; then ONE fresh
    interpreter without ctrnas loads each model.pt2 and writes its probabilities to <source>.npy (one torch
    import for all). The load's CompletedProcess; the files under `.tmp`."""
    tmp = tmp_path_factory.mktemp("torch-alone")
    args = []
    for source in SOURCES:
        data, model = criteo_exported(source, row_cap=40)
        schema = load_schema(data)
        t = pq.read_table(split_files(data, "train")[0])
        np.savez(tmp / f"{source}.npz", dense=np.stack([t.column(c).to_numpy() for c in schema.dense], 1),
                 ids=np.stack([t.column(c).to_numpy() for c in schema.sparse_names], 1).astype(np.int64))
        args += [str(tmp / f"{source}.npz"), str(model / "model.pt2"), str(tmp / f"{source}.npy")]
    (tmp / "load.py").write_text(LOAD)
    done = subprocess.run([sys.executable, "-I", str(tmp / "load.py"), *args], capture_output=True, text=True,
                          timeout=300)
    done.tmp = tmp
    return done


@pytest.mark.parametrize("source", SOURCES)
def test_artifact_loads_with_torch_alone_and_matches_the_model(criteo_exported, loaded_with_torch_alone, source):
    data, model = criteo_exported(source, row_cap=40)
    done = loaded_with_torch_alone
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"  # neither torchrec, fbgemm nor ctrnas was imported
    np.testing.assert_allclose(np.load(done.tmp / f"{source}.npy"), training_path_probabilities(model, data),
                               rtol=1e-5, atol=1e-7)
    card = json.loads((model / "model_card.json").read_text())
    assert card["serving"]["file"] == "model.pt2" and "torch.export.load" in (model / "model_card.md").read_text()


@pytest.mark.parametrize("name", ["lr", "deepfm", "dcnv2"])
def test_baselines_export_to_the_same_probabilities_with_a_row_cap(tmp_path, name):
    """A run that falls back to a baseline exports it the same way (several capped stems in one model)."""
    schema = make_schema(n_dense=3, cards=(50, 7, 300))
    model = build_baseline(name, schema, dim=4, row_cap=40, seed=1).eval()
    program = torch.export.load(str(save_serving(model, schema, tmp_path))).module()
    rng = np.random.default_rng(0)
    dense = torch.from_numpy(rng.random((9, 3)).astype(np.float32))
    ids = torch.from_numpy(np.stack([rng.integers(0, c, 9) for c in (50, 7, 300)], 1))
    with torch.no_grad():
        want = torch.sigmoid(model(dense, kjt_of(ids.numpy(), schema.sparse_names)))
        np.testing.assert_allclose(program(dense, ids).numpy(), want.numpy(), rtol=1e-6)
    assert all(m.row_cap == 40 for m in model.modules() if hasattr(m, "row_cap"))  # the caps are back
