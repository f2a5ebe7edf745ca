"""A payload planted in every file ctrnas loads never runs: each refusal is one line (a CLI: non-zero exit,
one stderr line, no traceback). The payload is a pickle whose unpickling creates a marker file."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch

from ctrnas.cli import main
from ctrnas.errors import CtrnasError
from tests.helpers.security import as_ctrnas_wrote, one_line_error


def run(capsys, *argv) -> str:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return one_line_error(rc, capsys.readouterr().err)


@pytest.fixture
def model_copy(model_dir, tmp_path):
    return shutil.copytree(model_dir, tmp_path / "model")


@pytest.mark.parametrize("wrap", ["bare", "in_state_dict"])
def test_predict_never_unpickles_model_pt(model_copy, data_dir, plant, tmp_path, capsys, wrap):
    plant.torch_file(model_copy / "model.pt", (lambda p: p) if wrap == "bare" else (lambda p: {"net.x": p}))
    (model_copy / "model.pt2").unlink()  # predict reads model.pt where model.pt2 cannot serve
    line = run(capsys, "predict", "--model", model_copy, "--input", data_dir, "--out", tmp_path / "p.parquet",
               "--no-progress")
    assert not plant.ran() and "model.pt" in line and not (tmp_path / "p.parquet").exists()


def test_predict_repro_with_an_empty_model_card(plant, tmp_path, capsys, data_dir):
    folder = tmp_path / "m"
    plant.torch_file(folder / "model.pt")
    (folder / "model_card.json").write_text("{}")
    line = run(capsys, "predict", "--model", folder, "--input", data_dir, "--out", tmp_path / "p.parquet")
    assert not plant.ran() and "not a ctrnas-export/2 model folder" in line


def test_api_load_exported_and_predict_refuse_in_one_line(model_copy, data_dir, plant, tmp_path):
    from ctrnas import api
    from ctrnas.supernet import load_exported

    plant.raw_pickle(model_copy / "model.pt")
    (model_copy / "model.pt2").unlink()  # predict reads model.pt where model.pt2 cannot serve
    for call in (lambda: load_exported(model_copy), lambda: api.predict(model_copy, data_dir, tmp_path / "p.pq")):
        with pytest.raises(CtrnasError) as e:
            call()
        assert "\n" not in str(e.value) and not plant.ran()


def test_the_real_model_folder_still_loads_and_scores(model_dir, data_dir, tmp_path):
    from ctrnas import api

    summary = api.predict(model_dir, data_dir, tmp_path / "p.parquet", progress=False)
    assert summary["rows"]["written"] > 0


@pytest.mark.parametrize("how", ["torch", "pickle", "in_checkpoint_dict"])
def test_train_never_unpickles_its_resume_checkpoint(data_dir, plant, tmp_path, capsys, how):
    out = tmp_path / "O"
    if how == "torch":
        plant.torch_file(out / "checkpoint.pt")
    elif how == "pickle":
        plant.raw_pickle(out / "checkpoint.pt")
    else:
        plant.torch_file(out / "checkpoint.pt", lambda p: {"format": "ctrnas-checkpoint/1", "model": {}, "config": p})
    as_ctrnas_wrote(out, "checkpoint.pt")
    line = run(capsys, "train", "--data", data_dir, "--baseline", "lr", "--out", out, "--no-progress")
    assert not plant.ran() and "checkpoint.pt" in line and "weights_only" not in line and "did not write" not in line


def test_warmup_never_unpickles_its_trainer_checkpoint(data_dir, plant, tmp_path, capsys):
    out = tmp_path / "W"
    plant.torch_file(out / "trainer" / "checkpoint.pt")
    as_ctrnas_wrote(out, "trainer/checkpoint.pt")
    line = run(capsys, "warmup", "--data", data_dir, "--space", "nasrec-small", "--fraction", "0.1", "--out", out,
               "--no-progress")
    assert not plant.ran() and "trainer/checkpoint.pt" in line and "did not write" not in line


def test_warmup_never_unpickles_a_reused_supernet(data_dir, plant, tmp_path, capsys):
    out = tmp_path / "W"
    argv = ["warmup", "--data", data_dir, "--space", "nasrec-small", "--fraction", "0", "--out", out, "--no-progress"]
    assert main([str(a) for a in argv]) == 0  # a real warm-up folder: warmup.json says supernet.pt is reusable
    plant.torch_file(out / "supernet.pt")
    line = run(capsys, *argv)
    assert not plant.ran() and "supernet.pt" in line


def test_export_never_unpickles_a_supernet(plant, tmp_path, capsys):
    from ctrnas.space.baselines import baseline_arch

    (tmp_path / "arch.json").write_text(json.dumps(baseline_arch("dlrm-like").to_json()))
    plant.torch_file(tmp_path / "supernet.pt")
    line = run(capsys, "export", "--arch", tmp_path / "arch.json", "--supernet", tmp_path / "supernet.pt",
               "--out", tmp_path / "out", "--space", "ctrnas-small")
    assert not plant.ran() and "supernet.pt" in line


def test_final_stage_resume_checkpoints_are_never_unpickled(data_dir, plant, tmp_path):
    """RUN/final/train/<job>/checkpoint.pt: read for the resume message and by the trainer that resumes."""
    from ctrnas.data.dataset import load_schema
    from ctrnas.pipeline.final.resume import Job, say_resumed
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.config import TrainConfig
    from ctrnas.train.trainer import Trainer

    job = Job(tmp_path / "run", "baseline lr", ("baseline", "lr"), {"fp": 1})
    job.check()
    plant.torch_file(job.dir / "checkpoint.pt")
    assert job.checkpoint_step() is None
    say_resumed([job], 10, 1)
    trainer = Trainer(build_baseline("lr", load_schema(data_dir)), TrainConfig(progress=False), job.dir)
    with pytest.raises(CtrnasError) as e:
        trainer.try_resume()
    assert not plant.ran() and "\n" not in str(e.value)


@pytest.mark.parametrize("how", ["pickle", "torch"])
def test_search_state_is_never_unpickled(plant, tmp_path, how):
    from ctrnas.search.checkpoint import CheckpointError
    from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
    from tests.helpers.toy_search import IntVectorSpace, SeparableFitness

    ckpt = tmp_path / "search" / "search.ckpt"
    (plant.raw_pickle if how == "pickle" else plant.torch_file)(ckpt, lambda p: {"format_version": 1, "x": p})
    cfg = EvolutionConfig(population_size=4, generations=1, tournament_size=2, children_per_generation=2)
    with pytest.raises(CheckpointError) as e:
        RegularizedEvolution(IntVectorSpace(4, 3), cfg, seed=0).run(SeparableFitness((1, 2, 3, 0)),
                                                                     checkpoint_path=ckpt)
    assert not plant.ran() and "\n" not in str(e.value) and "never loaded" in str(e.value)


def test_search_state_fingerprint_is_checked_before_the_state_and_names_no_new_module(tmp_path):
    from ctrnas.search.checkpoint import FORMAT, CheckpointError, load_checkpoint

    ckpt = tmp_path / "s.ckpt"
    hostile = {"~dataclass": "antigravity:Thing", "fields": {}}
    ckpt.write_text(json.dumps({"format": FORMAT, "fingerprint": {"a": 2}, "state": hostile}))
    with pytest.raises(CheckpointError, match="different search setup"):
        load_checkpoint(ckpt, {"a": 1})
    for name in ("antigravity:Thing", "subprocess:Popen", "os:system", "ctrnas.search.evolution:__class__"):
        ckpt.write_text(json.dumps({"format": FORMAT, "fingerprint": {"a": 1},
                                    "state": {"x": {"~dataclass": name, "fields": {}}}}))
        with pytest.raises(CheckpointError, match="damaged search checkpoint"):
            load_checkpoint(ckpt, {"a": 1})
    assert "antigravity" not in sys.modules


@pytest.mark.parametrize("content", [b"", b"\x00garbage", "truncated", "foreign", "bad_config", "bad_model"])
def test_corrupt_or_foreign_checkpoints_are_one_line_errors(data_dir, tmp_path, capsys, content):
    out = tmp_path / "O"
    out.mkdir()
    path = out / "checkpoint.pt"
    if content == "truncated":
        torch.save({"format": "ctrnas-checkpoint/1", "model": {"w": torch.zeros(1000)}}, path)
        path.write_bytes(path.read_bytes()[:300])
    elif content == "foreign":  # a weights-only file of another program: no `config` (was KeyError: 'config')
        torch.save({"format": "ctrnas-checkpoint/1", "model": {}}, path)
    elif content in ("bad_config", "bad_model"):  # the right keys, wrong contents
        from ctrnas.config import to_dict
        from ctrnas.train.config import TrainConfig

        cfg = "x" if content == "bad_config" else to_dict(TrainConfig(progress=False))
        torch.save({"format": "ctrnas-checkpoint/1", "model": {"w": torch.zeros(2)}, "optimizers": [], "step": 0,
                    "config": cfg}, path)
    else:
        path.write_bytes(content)
    as_ctrnas_wrote(out, "checkpoint.pt")
    line = run(capsys, "train", "--data", data_dir, "--baseline", "lr", "--out", out, "--no-progress")
    assert "checkpoint.pt" in line and "weights_only" not in line and "did not write" not in line


def test_the_vision_harness_files_refuse_the_payload(plant, tmp_path):
    """The correlation harness's shard inputs and its kept warmed-up networks (`--state-dir`)."""
    from ctrnas.safeload import load_weights_file
    from ctrnas.vision.correlate import _warm
    from ctrnas.vision.network import build_network
    from ctrnas.vision.space import enumerate_cells
    from ctrnas.vision.warmup import WarmupConfig

    path = plant.torch_file(tmp_path / ".c.inputs.pt")
    with pytest.raises(CtrnasError, match="never unpickles"):
        load_weights_file(path, "correlation inputs")
    state = plant.torch_file(tmp_path / "state" / "cell.pt")
    with pytest.raises(CtrnasError, match="never unpickles"):
        _warm(build_network(next(iter(enumerate_cells()))), None, None, 0.5, 0, WarmupConfig(), state, "cpu")
    assert not plant.ran()


def test_a_baseline_fallback_folder_is_rebuilt_not_unpickled(data_dir, plant, tmp_path):
    """A run whose candidates all failed exports its best baseline: `predict` rebuilds it from the card (the
    probabilities equal the model's own), and a payload in its model.pt never runs."""
    from types import SimpleNamespace

    import pyarrow.parquet as pq

    from ctrnas import api
    from ctrnas.data.dataset import load_schema
    from ctrnas.serving.predict import kjt_of
    from ctrnas.pipeline.final.selection import export_baseline
    from ctrnas.train.baselines import build_baseline

    schema = load_schema(data_dir)
    model = build_baseline("dlrm", schema, dim=4, row_cap=50, seed=3).eval()
    m = SimpleNamespace(label="dlrm", val={}, test={})
    export_baseline(model, tmp_path / "model", m, "every candidate diverged", schema, {"dim": 4, "row_cap": 50})
    api.predict(tmp_path / "model", data_dir, tmp_path / "p.parquet", split="test", progress=False)
    got = pq.read_table(tmp_path / "p.parquet").column("probability").to_numpy()
    table = pq.read_table(sorted((data_dir / "test").glob("*.parquet"))[0])
    import numpy as np

    dense = torch.from_numpy(np.stack([table.column(c).to_numpy() for c in schema.dense], 1)).float()
    ids = np.stack([table.column(c).to_numpy() for c in schema.sparse_names], 1).astype(np.int64)
    with torch.no_grad():
        want = torch.sigmoid(model(dense, kjt_of(ids, schema.sparse_names))).numpy()
    assert got[:len(want)] == pytest.approx(want, abs=1e-6)
    plant.torch_file(tmp_path / "model" / "model.pt")
    (tmp_path / "model" / "model.pt2").unlink()  # predict reads model.pt where model.pt2 cannot serve
    with pytest.raises(CtrnasError, match="never unpickles"):
        api.predict(tmp_path / "model", data_dir, tmp_path / "q.parquet", split="test", progress=False)
    assert not plant.ran()


def test_the_real_command_line_prints_one_line(data_dir, plant, tmp_path):
    """As a user runs it (a new process, Python's own warning output): one stderr line, no traceback."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    plant.raw_pickle(tmp_path / "O" / "checkpoint.pt")  # a plain pickle: torch warns about its protocol first
    as_ctrnas_wrote(tmp_path / "O", "checkpoint.pt")
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "ctrnas", "train", "--data", str(data_dir), "--baseline", "lr",
                        "--out", str(tmp_path / "O"), "--no-progress"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert "never unpickles" in one_line_error(p.returncode, p.stderr) and not plant.ran()
