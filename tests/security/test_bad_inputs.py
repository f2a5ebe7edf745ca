"""The issue's silent successes and tracebacks: each is now a one-line error with a non-zero exit, or, where
the command does succeed, a warning line; a failed write leaves no temp file. And a recipe writes only
where the rules of ctrnas/recipe.py allow."""

from __future__ import annotations

import errno
import json

import pytest

from ctrnas.cli import main
from tests.helpers.security import criteo_lines, one_line_error


def run(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


@pytest.fixture(scope="module")
def criteo_model(tmp_path_factory):
    """(prepared Criteo folder, model folder with its transform.json) from generated Criteo lines."""
    from ctrnas import api
    from ctrnas.data.prepare import prepare
    from ctrnas.data.prepare_config import PrepareConfig
    from ctrnas.space.baselines import baseline_arch

    tmp = tmp_path_factory.mktemp("crit")
    (tmp / "crit.tsv").write_text("\n".join(criteo_lines(300, seed=1)) + "\n")
    prepare("criteo", [str(tmp / "crit.tsv")], tmp / "data", PrepareConfig(progress=False, pad_missing_trailing=True))
    (tmp / "arch.json").write_text(json.dumps(baseline_arch("dlrm-like").to_json()))
    api.export_arch(str(tmp / "arch.json"), tmp / "model", data_dir=tmp / "data", space="ctrnas-small", emb_dim=4,
                    init="fresh", seed=1)
    return tmp / "data", tmp / "model"


def test_predict_where_every_row_is_rejected_is_an_error(criteo_model, tmp_path, capsys):
    _, model = criteo_model
    avazu = tmp_path / "avazu.csv"
    avazu.write_text("id,click,hour,C1\n" + "".join(f"{i},0,14102100,1005\n" for i in range(20)))
    rc, err = run(capsys, "predict", "--model", model, "--input", avazu, "--out", tmp_path / "p.parquet",
                  "--no-progress")
    assert "no row accepted" in one_line_error(rc, err) and not (tmp_path / "p.parquet").exists()
    assert not list(tmp_path.glob(".p.parquet.tmp-*"))


def test_padding_fills_only_stripped_trailing_categories(criteo_model, tmp_path, capsys):
    """A bare `0` or a row short of a number is not a stripped row: a reject, in prepare and in predict."""
    _, model = criteo_model
    good = criteo_lines(3, seed=2)
    stripped = "\t".join(good[0].split("\t")[:30])  # the last 10 categories stripped: padded
    rows = [stripped, "0", "\t".join(good[1].split("\t")[:10])]  # a bare label; 9 of 13 numbers
    path = tmp_path / "x.tsv"
    path.write_text("\n".join(rows) + "\n")
    rc, err = run(capsys, "predict", "--model", model, "--input", path, "--out", tmp_path / "p.parquet",
                  "--summary", tmp_path / "s.json", "--no-progress")
    assert rc == 0 and "warning: filled the missing trailing fields of 1 rows" in err  # said, not silent
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["rows"]["accepted"] == 1 and s["rows"]["rejected"] == 2 and s["rows"]["padded"] == 1
    assert {r["line"] for r in s["first_rejects"]} == {2, 3}


def test_training_on_empty_val_and_test_splits_warns(tmp_path, capsys):
    crit = tmp_path / "crit.tsv"
    crit.write_text("\n".join(criteo_lines(80)) + "\n")
    rc, err = run(capsys, "prepare", "criteo", "--input", crit, "--out", tmp_path / "D", "--split", "order",
                  "--no-progress", "--config", _ratios(tmp_path))
    assert rc == 0 and "warning" in err and "val and test splits are empty" in err
    rc, err = run(capsys, "train", "--data", tmp_path / "D", "--baseline", "lr", "--out", tmp_path / "O",
                  "--no-progress")
    assert rc == 0 and "warning: " in err and "no val and no test rows" in err


def _ratios(tmp_path):
    p = tmp_path / "prep.yaml"
    p.write_text("split_ratios: [1.0, 0.0, 0.0]\n")
    return p


def test_a_full_disk_in_prepare_is_one_line_and_leaves_no_temp_file(tmp_path, capsys, monkeypatch):
    import pyarrow.parquet as pq

    crit = tmp_path / "crit.tsv"
    crit.write_text("\n".join(criteo_lines(80)) + "\n")
    real = pq.ParquetWriter.write_table

    def full(self, *a, **k):
        real(self, *a, **k)
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    rc, err = run(capsys, "prepare", "criteo", "--input", crit, "--out", tmp_path / "D", "--no-progress")
    assert "no space left" in one_line_error(rc, err)
    assert not [p for p in (tmp_path / "D").rglob("*") if ".tmp-" in p.name or ".staging-" in p.name]


def test_a_full_disk_in_train_is_one_line_and_leaves_no_temp_file(data_dir, tmp_path, capsys, monkeypatch):
    import torch

    real = torch.save

    def full(obj, f, *a, **k):  # what torch says when the disk fills up mid-file
        real(obj, f, *a, **k)
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 1052416 vs 1052304\n"
                           "PytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(torch, "save", full)
    rc, err = run(capsys, "train", "--data", data_dir, "--baseline", "lr", "--out", tmp_path / "O", "--no-progress")
    assert "no space left" in one_line_error(rc, err)
    assert not [p for p in (tmp_path / "O").rglob("*") if ".tmp-" in p.name]


@pytest.mark.parametrize("through_extends", [False, True])
def test_a_non_utf8_recipe_is_one_line(tmp_path, capsys, through_extends):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    recipe = bad
    if through_extends:
        recipe = tmp_path / "top.yaml"
        recipe.write_text("extends: bad.yaml\n")
    rc, err = run(capsys, "run", recipe)
    assert "not UTF-8" in one_line_error(rc, err) and "bad.yaml" in err


def test_predict_out_an_existing_folder_is_one_line(model_dir, data_dir, tmp_path, capsys):
    (tmp_path / "outdir").mkdir()
    rc, err = run(capsys, "predict", "--model", model_dir, "--input", data_dir, "--out", tmp_path / "outdir",
                  "--overwrite", "--no-progress")
    assert "is a folder" in one_line_error(rc, err) and (tmp_path / "outdir").is_dir()


@pytest.mark.parametrize("text, why", [
    ("name: ../../../x\n", "plain name"),
    ("name: a/b\n", "plain name"),
    ("name: ok\noutput: /tmp/elsewhere-{name}\n", "outside the working folder"),
    ("name: ok\noutput: ../../x\n", "outside the working folder"),
])
def test_a_recipe_writes_only_under_the_working_folder(tmp_path, capsys, monkeypatch, text, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(text + "data: {path: D}\n")
    rc, err = run(capsys, "run", "r.yaml")
    assert why in one_line_error(rc, err)


def test_output_elsewhere_comes_from_the_command_line_and_overwrite_never_from_extends(tmp_path, monkeypatch):
    from ctrnas.errors import RecipeError
    from ctrnas.recipe import check_output, load_recipe

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "base.yaml").write_text("name: b\ndata: {path: D}\noutput: /somewhere/else\n")
    (work / "top.yaml").write_text("extends: base.yaml\n")
    with pytest.raises(RecipeError, match="outside the working folder"):
        check_output(load_recipe("top.yaml"), "top.yaml")
    given = [f"output={tmp_path / 'out'}"]
    check_output(load_recipe("top.yaml", given), "top.yaml", given)  # from the command line: allowed
    assert str(load_recipe("top.yaml", given).output_dir) == str(tmp_path / "out")
    (work / "base.yaml").write_text("name: b\ndata: {path: D, overwrite: true}\noverwrite: true\n")
    with pytest.raises(RecipeError, match="cannot grant permission to overwrite"):
        load_recipe("top.yaml")
    (work / "top.yaml").write_text("name: t\ndata: {path: D}\noverwrite: true\n")  # the recipe you run: yes
    assert load_recipe("top.yaml").overwrite
    assert load_recipe("top.yaml", ["overwrite=false"]).overwrite is False
