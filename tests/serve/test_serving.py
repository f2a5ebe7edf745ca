"""The serving artifact `model.pt2` loads in a fresh interpreter without ctrnas and gives the same probabilities."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq

from ctrnas.data.dataset import load_schema, split_files
from tests.helpers.serve import prepared_and_exported, training_path_probabilities

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


def test_artifact_loads_with_torch_alone_and_matches_the_model(tmp_path, criteo_sample):
    data, model = prepared_and_exported(tmp_path, "criteo", [str(criteo_sample)], hash_buckets=500, row_cap=40)
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
