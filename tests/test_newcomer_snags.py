"""The snags a newcomer met on a fresh clone, each pinned: the demo's folder is the one the next command
reads, `train --arch` draws its weights as the final stage does, and errors name the flag that fixes them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctrnas import api
from ctrnas.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_the_demo_writes_where_make_demo_and_the_readme_read(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(api, "run", lambda recipe, progress=True: seen.append(recipe))
    assert main(["demo", "--no-progress"]) == 0
    assert main(["demo", "--no-progress", "--out", str(tmp_path / "x")]) == 0
    assert [Path(r.output) for r in seen] == [Path("runs/demo"), tmp_path / "x"]
    make_demo = re.search(r"ctrnas demo --out (\S+)", (ROOT / "Makefile").read_text()).group(1)
    assert make_demo == "runs/demo"


def _help(command: str, flag: str) -> str:
    from ctrnas.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    return " ".join(next(a for a in sub._actions if flag in a.option_strings).help.split())


def test_train_arch_draws_its_weights_as_the_final_stage_by_default():
    from ctrnas.pipeline.tasks.train import final_recipe
    from ctrnas.recipe import FinalConfig
    from ctrnas.train.config import TrainConfig

    final = final_recipe("data", TrainConfig()).final  # `ctrnas train --arch` without --recipe
    assert (final.dense_init, final.embedding_init) == (FinalConfig().dense_init, FinalConfig().embedding_init)
    assert FinalConfig().dense_init == "torchrec"
    assert _help("train", "--dense-init").endswith("else torchrec, as the final stage)")
    assert "else torchrec)" in _help("train", "--embedding-init")


def test_prepare_table_without_label_names_the_flag(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("y,a,b\n1,2,x\n0,3,y\n")
    argv = ["prepare", "table", "-i", str(tmp_path / "t.csv"), "--dense", "a", "--sparse", "b", "--no-progress"]
    assert main([*argv, "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "--label COLUMN" in err and "missing required key" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    assert main([*argv, "-o", str(tmp_path / "o"), "--label", "y"]) == 0  # the flag it named is the fix


def test_a_stripped_criteo_copy_names_pad_missing_trailing_in_prepare_and_predict(tmp_path, criteo_exported, capsys):
    import pyarrow.parquet as pq

    from tests.helpers.samples import CRITEO_SHORT, criteo_lines

    full, stripped = tmp_path / "full.txt", tmp_path / "stripped.txt"
    full.write_text("\n".join(criteo_lines()) + "\n")
    stripped.write_text("\n".join(line.rstrip("\t") for line in criteo_lines()) + "\n")
    first_short = next(i for i, line in enumerate(criteo_lines(), 1) if line.endswith("\t"))
    assert main(["prepare", "criteo", "-i", str(stripped), "-o", str(tmp_path / "d"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"line {first_short}: expected 40 fields, found " in err and "--pad-missing-trailing" in err

    _, model = criteo_exported()  # prepared from the generated sample: these very lines (criteo_lines())
    predict = ["predict", "--model", str(model), "--no-progress", "--input"]
    assert main([*predict, str(full), "--out", str(tmp_path / "full.parquet")]) == 0
    assert main([*predict, str(stripped), "--out", str(tmp_path / "dropped.parquet")]) == 0
    out, err = capsys.readouterr()
    assert f"rejected {CRITEO_SHORT}: field_count {CRITEO_SHORT}" in out
    assert f"line {first_short}); --pad-missing-trailing reads them as empty" in err
    assert main([*predict, str(stripped), "--out", str(tmp_path / "padded.parquet"), "--pad-missing-trailing"]) == 0
    padded, want = pq.read_table(tmp_path / "padded.parquet"), pq.read_table(tmp_path / "full.parquet")
    assert padded.column("line").to_pylist() == want.column("line").to_pylist() == list(range(1, 101))
    # the same rows (float sums may differ in the last bit between batchings)
    assert padded.column("probability").to_pylist() == pytest.approx(want.column("probability").to_pylist(), abs=1e-6)


def test_no_dense_columns_train_without_torchs_zero_element_warning(tmp_path):
    import warnings

    import numpy as np
    import torch
    from torch import nn

    from ctrnas.supernet.elastic import ElasticLinear, copied_linear

    # an input-less layer draws from the seed's stream exactly as nn.Linear does, so results do not move
    states = []
    for cls in (nn.Linear, ElasticLinear):
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls(0, 5)
        states.append(torch.get_rng_state())
    assert torch.equal(*states)
    lin = copied_linear(torch.empty(5, 0), torch.arange(5.0))
    assert (lin.in_features, lin.weight.shape, lin.bias.tolist()) == (0, (5, 0), [0.0, 1.0, 2.0, 3.0, 4.0])
    assert lin(torch.empty(2, 0)).tolist() == [[0.0, 1.0, 2.0, 3.0, 4.0]] * 2

    rng = np.random.default_rng(0)
    rows = [f"{rng.integers(0, 2)},{rng.integers(0, 20)},{rng.integers(0, 5)},x{rng.integers(0, 9)}"
            for _ in range(600)]
    (tmp_path / "s.csv").write_text("y,a,b,c\n" + "\n".join(rows) + "\n")
    assert main(["prepare", "table", "-i", str(tmp_path / "s.csv"), "-o", str(tmp_path / "d"), "--label", "y",
                 "--sparse", "a,b,c", "--no-progress"]) == 0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["train", "--data", str(tmp_path / "d"), "--arch", "dlrm-like", "--out", str(tmp_path / "t"),
                     "--no-progress", "--batch-size", "64", "--protocol", "nasrec", "--epochs", "1"]) == 0
    assert [str(w.message) for w in seen if "zero-element" in str(w.message)] == []


def test_train_says_it_writes_model_pt2_before_the_export(tmp_path, capsys, monkeypatch):
    import ctrnas.supernet.serving as serving
    from tests.helpers.samples import criteo_sample

    assert main(["prepare", "criteo", "--input", str(criteo_sample()), "--out", str(tmp_path / "d"),
                 "--hash-buckets", "100", "--no-progress"]) == 0
    capsys.readouterr()
    said = []
    real = serving.save_serving

    def save_serving(*args, **kwargs):  # what the user has seen when the export starts
        said.append(capsys.readouterr().err)
        return real(*args, **kwargs)

    monkeypatch.setattr(serving, "save_serving", save_serving)
    out = tmp_path / "lr"  # an arch goes through the same lines (save_trained), with a slower export
    assert main(["train", "--data", str(tmp_path / "d"), "--baseline", "lr", "--out", str(out), "--no-progress",
                 "--batch-size", "32"]) == 0
    assert said == [f"writing {out / 'model.pt2'} (torch.export) ...\n"]
    assert (out / "model.pt2").is_file()


def test_model_cards_show_5_significant_digits_and_the_json_keeps_all(tmp_path):
    import json
    import math

    from torch import nn

    from ctrnas.supernet.io import metrics_markdown
    from ctrnas.train.baselines.folder import save_baseline

    metrics = {"val_logloss": 0.6929679298142245, "test_auc": 0.4733036707452726, "test_logloss": 1234.56789,
               "val_auc": None, "steps": 12}
    save_baseline(nn.Linear(2, 1), tmp_path, "lr", metrics, None)
    text = (tmp_path / "model_card.md").read_text()
    for key, v in metrics.items():
        if isinstance(v, float):  # 5 significant digits: the value rounded at 10^(floor(log10 v) - 4)
            shown = next(line for line in text.splitlines() if line.startswith(f"| {key} |")).split("|")[2].strip()
            assert float(shown) == round(v, 4 - math.floor(math.log10(abs(v))))
            assert len(re.sub(r"\D", "", shown).lstrip("0")) <= 5
    assert "| val_auc | - |" in text and "| steps | 12 |" in text
    assert json.loads((tmp_path / "model_card.json").read_text())["metrics"] == metrics
    assert metrics_markdown({"test_logloss": 0.42812345}) == ["| metric | value |", "|---|---|",
                                                             "| test_logloss | 0.42812 |"]


def test_a_kdd_file_without_clicks_warns_at_prepare_and_training_notes_it_in_one_line(tmp_path, capsys):
    import numpy as np

    from ctrnas.train.metrics import StreamingMetrics
    from tests.helpers.samples import kdd_lines

    rows, _ = kdd_lines()
    (tmp_path / "clicks.txt").write_text("\n".join(rows) + "\n")
    (tmp_path / "none.txt").write_text("\n".join("0" + r[r.index("\t"):] for r in rows) + "\n")
    assert main(["prepare", "kdd2012", "-i", str(tmp_path / "clicks.txt"), "-o", str(tmp_path / "a"),
                 "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["prepare", "kdd2012", "-i", str(tmp_path / "none.txt"), "-o", str(tmp_path / "b"),
                 "--no-progress"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"ctrnas: warning: {tmp_path / 'b'}: the train, val and test splits have no click (every label 0): AUC is "
        "undefined there"]

    m = StreamingMetrics()
    m.update(np.array([0.3, -1.0, 2.0], np.float32), np.zeros(3, np.float32))
    result = m.result()
    assert np.isnan(result.auc) and result.reason == "AUC undefined: all 3 labels are 0 (a single-class split)"
    assert capsys.readouterr().err == f"ctrnas: warning: {result.reason}\n"


def test_every_test_that_uses_torchscript_filters_its_deprecation_warning_alone():
    """`make test` stays free of torch's TorchScript deprecation noise: the tests that check the shipped
    TorchScript dense part ignore exactly that warning (ctrnas's own export silences it where it scripts)."""
    import ast

    unmarked = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test_"):
                continue
            used = {node.func.attr for node in ast.walk(fn) if isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) == "torch.jit"}
            marks = " ".join(ast.unparse(d) for d in fn.decorator_list)
            unmarked += [f"{path.name}::{fn.name} ({u})" for u in sorted(used)
                         if f"`torch.jit.{u}` is deprecated" not in marks]
    assert unmarked == []
