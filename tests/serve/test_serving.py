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
x = np.load(sys.argv[1])
program = torch.export.load(sys.argv[2]).module()
with torch.no_grad():
    p = program(torch.from_numpy(x["dense"]), torch.from_numpy(x["ids"]))
np.save(sys.argv[3], p.numpy())
print(sorted(m for m in ("torchrec", "fbgemm_gpu", "ctrnas") if sys.modules.get(m) is not None))
"""


@pytest.mark.parametrize("source", SOURCES)
def test_artifact_loads_with_torch_alone_and_matches_the_model(tmp_path, criteo_exported, source):
    data, model = criteo_exported(source, row_cap=40)
    schema = load_schema(data)
    t = pq.read_table(split_files(data, "train")[0])
    np.savez(tmp_path / "rows.npz", dense=np.stack([t.column(c).to_numpy() for c in schema.dense], 1),
             ids=np.stack([t.column(c).to_numpy() for c in schema.sparse_names], 1).astype(np.int64))
    script = tmp_path / "load.py"
    script.write_text(LOAD)
    done = subprocess.run([sys.executable, "-I", str(script), str(tmp_path / "rows.npz"), str(model / "model.pt2"),
                           str(tmp_path / "p.npy")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"  # neither torchrec, fbgemm nor ctrnas was imported
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), training_path_probabilities(model, data),
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
