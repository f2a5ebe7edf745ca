"""Exported models on disk: fresh-process loading, TorchScript dense part, fresh init, `ctrnas export`."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from ctrnas.data.dataset import DatasetWriter
from ctrnas.errors import CtrnasError
from ctrnas.space import get_space
from ctrnas.supernet import Supernet, count_flops, count_params, export
from ctrnas.cli.export import register
from ctrnas.supernet.io import load_exported, load_supernet, save_exported, save_supernet
from ctrnas.supernet.testing import make_batch

ROOT = Path(__file__).resolve().parents[2]
SPACE = {"base": "nasrec-full", "num_blocks": 4, "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3, 5],
         "merge_tokens": 2, "attention_heads": 2}

FRESH_PROCESS = r"""
import sys, torch
folder = sys.argv[1]
inputs = torch.load(folder + "/inputs.pt")
# 1) the TorchScript dense part needs torch only
dense_part = torch.jit.load(folder + "/dense_part.pt")
y_ts = dense_part(inputs["dense"], inputs["tokens"])
y_pt2 = torch.export.load(folder + "/dense_part.pt2").module()(inputs["dense"], inputs["tokens"])
assert not any(m.startswith("ctrnas") for m in sys.modules), "loading the dense part imported ctrnas"
# 2) the whole model (embedding stem included) loads from arch.json, the card and a weights-only model.pt
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
from ctrnas.supernet.io import load_exported
weights = torch.load(folder + "/model.pt", weights_only=True)
assert all(isinstance(v, torch.Tensor) for v in weights.values()), "model.pt is not a plain state_dict"
model = load_exported(folder)
kjt = KeyedJaggedTensor.from_lengths_sync(keys=inputs["keys"], values=inputs["values"], lengths=inputs["lengths"])
with torch.no_grad():
    y = model(inputs["dense"], kjt)
torch.save({"ts": y_ts.detach(), "pt2": y_pt2.detach(), "full": y}, folder + "/outputs.pt")
"""


def test_saved_model_predicts_in_a_fresh_process(schema, tmp_path):
    torch.manual_seed(0)
    space = get_space(SPACE)
    net = Supernet(schema, space)
    arch = space.sample(np.random.default_rng(2))
    model = export(net, arch)
    card = save_exported(model, tmp_path, metrics={"val_logloss": 0.45}, torch_export=True)
    dense, kjt, _ = make_batch(schema, batch=16, seed=5)
    with torch.no_grad():
        expected = net(dense, kjt, arch)
        tokens = model.stem(kjt)
    torch.save({"dense": dense, "tokens": tokens, "keys": kjt.keys(), "values": kjt.values(),
                "lengths": kjt.lengths()}, tmp_path / "inputs.pt")
    subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(tmp_path)], check=True, cwd=ROOT, timeout=120)
    out = torch.load(tmp_path / "outputs.pt")
    torch.testing.assert_close(out["full"], expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(out["ts"], expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(out["pt2"], expected, atol=1e-6, rtol=0)
    # the card states what an independent count of the files says
    assert card["params_dense"] == sum(p.numel() for p in model.net.parameters()) == card["params_analytic"]
    assert card["flops_per_example"] == count_flops(schema, space, arch)
    assert card["metrics"] == {"val_logloss": 0.45}
    assert json.loads((tmp_path / "arch.json").read_text())["blocks"] == arch.to_json()["blocks"]
    assert json.loads((tmp_path / "model_card.json").read_text())["arch_key"] == arch.key()


def test_fresh_init_is_seeded_and_differs_from_inherited(schema):
    torch.manual_seed(0)
    space = get_space(SPACE)
    net = Supernet(schema, space)
    arch = space.sample(np.random.default_rng(3))
    a, b = export(net, arch, init="fresh", seed=1), export(net, arch, init="fresh", seed=1)
    c, inherited = export(net, arch, init="fresh", seed=2), export(net, arch)
    sd = {k: v for k, v in a.state_dict().items()}
    assert all(torch.equal(sd[k], v) for k, v in b.state_dict().items())
    assert any(not torch.equal(sd[k], v) for k, v in c.state_dict().items())
    assert any(not torch.equal(sd[k], v) for k, v in inherited.state_dict().items())
    shared = export(net, arch, init="fresh", seed=1, copy_stem=False)
    assert shared.stem is net.stem and all(torch.equal(sd[k], v) for k, v in shared.state_dict().items())
    for name, p in a.named_parameters():
        if p.dim() == 1 and name.endswith("ln.weight"):
            assert torch.equal(p, torch.ones_like(p))
        if p.dim() == 1 and name.endswith("bias"):
            assert torch.equal(p, torch.zeros_like(p))


def run_cli(*argv):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["export", *argv])
    return args.func(args)


def test_export_command_from_a_supernet_checkpoint(schema, tmp_path):
    torch.manual_seed(0)
    space = get_space(SPACE)
    net = Supernet(schema, space, row_cap=25)
    save_supernet(net, tmp_path / "supernet.pt", extra={"step": 3})
    again, extra = load_supernet(tmp_path / "supernet.pt")
    assert extra == {"step": 3} and again.row_cap == 25
    arch = space.sample(np.random.default_rng(4))
    (tmp_path / "arch.json").write_text(json.dumps(arch.to_json()))
    (tmp_path / "metrics.json").write_text(json.dumps({"auc": 0.8}))
    assert run_cli("--arch", str(tmp_path / "arch.json"), "--supernet", str(tmp_path / "supernet.pt"),
                   "--out", str(tmp_path / "out"), "--metrics", str(tmp_path / "metrics.json")) == 0
    card = json.loads((tmp_path / "out" / "model_card.json").read_text())
    assert card["init"] == "inherit" and card["metrics"] == {"auc": 0.8} and card["row_cap"] == 25
    dense, kjt, _ = make_batch(schema, batch=6, seed=1)
    loaded = load_exported(tmp_path / "out")
    torch.testing.assert_close(loaded(dense, kjt), net(dense, kjt, arch), atol=1e-6, rtol=0)


def write_dataset_folder(schema, out):
    """An empty prepared dataset folder: only meta.json's schema matters to export."""
    fields = [pa.field(schema.label, pa.float32())] + [pa.field(n, pa.float32()) for n in schema.dense] + [
        pa.field(n, pa.int64()) for n in schema.sparse_names]
    DatasetWriter(out, pa.schema(fields)).finish({"schema": schema.to_json()})
    return out


def test_export_command_fresh_from_a_dataset_folder(schema, tmp_path):
    write_dataset_folder(schema, tmp_path / "data")
    space_yaml = tmp_path / "space.yaml"
    space_yaml.write_text("base: nasrec-small\nnum_blocks: 3\ndense_dims: [4, 8]\nsparse_tokens: [2, 3]\n")
    space = get_space({"base": "nasrec-small", "num_blocks": 3, "dense_dims": [4, 8], "sparse_tokens": [2, 3]})
    arch = space.sample(np.random.default_rng(0))
    (tmp_path / "arch.json").write_text(json.dumps(arch.to_json()))
    run_cli("--arch", str(tmp_path / "arch.json"), "--data", str(tmp_path / "data"), "--space", str(space_yaml),
            "--out", str(tmp_path / "out"), "--seed", "3")
    card = json.loads((tmp_path / "out" / "model_card.json").read_text())
    assert card["init"] == "fresh" and card["params_dense"] == count_params(schema, space, arch)


def test_export_command_reads_a_bare_state_dict(schema, tmp_path):
    torch.manual_seed(0)
    data = write_dataset_folder(schema, tmp_path / "data")
    space = get_space("nasrec-small")
    net = Supernet(schema, space, row_cap=20)
    torch.save(net.state_dict(), tmp_path / "supernet.pt")  # as `ctrnas warmup` wrote before sharing the run's warm-up
    arch = space.sample(np.random.default_rng(1))
    (tmp_path / "arch.json").write_text(json.dumps(arch.to_json()))
    common = ["--arch", str(tmp_path / "arch.json"), "--supernet", str(tmp_path / "supernet.pt"),
              "--out", str(tmp_path / "out"), "--space", "nasrec-small"]
    with pytest.raises(CtrnasError, match="bare state_dict"):
        run_cli(*common)
    with pytest.raises(CtrnasError, match="do not fit"):
        run_cli(*common, "--data", str(data))  # row cap missing: table shapes differ
    run_cli(*common, "--data", str(data), "--row-cap", "20")
    dense, kjt, _ = make_batch(schema, batch=6, seed=2)
    loaded = load_exported(tmp_path / "out")
    torch.testing.assert_close(loaded(dense, kjt), net(dense, kjt, arch), atol=1e-6, rtol=0)


def test_export_command_reports_the_bad_block(schema, tmp_path):
    torch.manual_seed(0)
    space = get_space(SPACE)
    save_supernet(Supernet(schema, space), tmp_path / "supernet.pt")
    d = space.sample(np.random.default_rng(0)).to_json()
    d["blocks"][2]["dense_dim"] = 1000
    (tmp_path / "arch.json").write_text(json.dumps(d))
    with pytest.raises(CtrnasError, match=r"arch.json: block 3, field 'dense_dim'"):
        run_cli("--arch", str(tmp_path / "arch.json"), "--supernet", str(tmp_path / "supernet.pt"),
                "--out", str(tmp_path / "out"))
    with pytest.raises(CtrnasError, match="not a ctrnas-supernet/1"):
        torch.save({"x": 1}, tmp_path / "bad.pt")
        run_cli("--arch", str(tmp_path / "arch.json"), "--supernet", str(tmp_path / "bad.pt"),
                "--out", str(tmp_path / "out"))
