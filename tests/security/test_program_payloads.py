"""A hostile model.pt2 runs nothing: `predict` reads its graph and raw weights without evaluating or unpickling
anything from it (torch.export.load would: sample inputs retried without weights_only, shape expressions
sympified), and a program calling anything but ATen operators, or holding a pickled payload, is not run: the
rebuilt model scores instead, and says why."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctrnas import api
from ctrnas.serving.program import load_program


def _rewrite(folder: Path, change) -> None:
    """model.pt2 with each member's bytes passed through change(name below the top folder, bytes)."""
    path = folder / "model.pt2"
    src = path.with_name("original.pt2")
    path.rename(src)
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(path, "w") as out:
        for info in z.infolist():
            out.writestr(info, change(info.filename.split("/", 1)[1], z.read(info)))
    src.unlink()


def _edit_program(edit):
    def change(name: str, data: bytes) -> bytes:
        if name != "models/model.json":
            return data
        program = json.loads(data)
        edit(program)
        return json.dumps(program).encode()
    return change


@pytest.fixture
def model_copy(model_dir, tmp_path):
    return shutil.copytree(model_dir, tmp_path / "model")


def _probabilities(model, data_dir, out) -> tuple[dict, np.ndarray]:
    s = api.predict(model, data_dir, out, progress=False)
    return s, pq.read_table(out).column("probability").to_numpy()


def test_payloads_in_what_torch_export_load_would_run_never_run(model_dir, model_copy, data_dir, plant, tmp_path):
    marker = plant.marker
    sympy_payload = f"open({str(marker)!r}, 'w')"  # sympify evaluates its text

    def change(name: str, data: bytes) -> bytes:
        if name == "data/sample_inputs/model.pt":  # torch.export.load retries these without weights_only
            return plant.torch_file(tmp_path / "inputs.pt").read_bytes()
        if name == "models/model.json":
            program = json.loads(data)
            _set_all(program, "expr_str", f"{sympy_payload} and 0")  # the shapes' symbolic expressions
            program["guards_code"] = [f"__import__('builtins').{sympy_payload}"]
            return json.dumps(program).encode()
        return data

    _rewrite(model_copy, change)
    s, got = _probabilities(model_copy, data_dir, tmp_path / "p.parquet")
    assert s["scored_with"] == "model.pt2 (torch alone)" and not plant.ran()
    _, want = _probabilities(model_dir, data_dir, tmp_path / "q.parquet")
    np.testing.assert_array_equal(got, want)


def _set_all(obj, key: str, value) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                obj[k] = value
            else:
                _set_all(v, key, value)
    elif isinstance(obj, list):
        for v in obj:
            _set_all(v, key, value)


def _call_torch_load(program):
    node = program["graph_module"]["graph"]["nodes"][-1]
    node["target"] = "torch.load"


def _use_an_undefined_value(program):
    node = program["graph_module"]["graph"]["nodes"][-1]
    node["inputs"][0]["arg"] = {"as_tensor": {"name": "nowhere"}}


def _pickled_weight(name: str, data: bytes) -> bytes:
    if name == "data/weights/model_weights_config.json":
        config = json.loads(data)
        next(iter(config["config"].values()))["use_pickle"] = True
        return json.dumps(config).encode()
    return data


@pytest.mark.parametrize("case,why", [("torch_load", "calls 'torch.load', not an ATen operator"),
                                      ("pickled_weight", "holds a pickled payload"),
                                      ("other_schema", "written in torch.export schema 99"),
                                      ("undefined_input", "uses 'nowhere' before any node makes it")])
def test_a_program_it_does_not_run_falls_back_with_the_reason(model_copy, data_dir, tmp_path, case, why):
    change = {"torch_load": _edit_program(_call_torch_load), "pickled_weight": _pickled_weight,
              "other_schema": _edit_program(lambda p: p["schema_version"].update(major=99)),
              "undefined_input": _edit_program(_use_an_undefined_value)}[case]
    _rewrite(model_copy, change)
    program, reason = load_program(model_copy)
    assert program is None and why in reason and str(model_copy / "model.pt2") in reason
    s, _ = _probabilities(model_copy, data_dir, tmp_path / "p.parquet")
    assert s["scored_with"].startswith("model.pt rebuilt with TorchRec: ") and why in s["scored_with"]
