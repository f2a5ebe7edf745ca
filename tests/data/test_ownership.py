"""A dataset writer touches only what it wrote: foreign files refuse the folder (and survive --overwrite),
re-preparing removes only listed files, a folder made from other inputs is refused as `ctrnas run` does."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctrnas.cli import main
from ctrnas.data.dataset import raw_source, read_meta
from ctrnas.data.ownership import MANIFEST, inventory
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.synthetic import generate
from ctrnas.errors import CtrnasError
from ctrnas.locks import LOCK_FILE

QUIET = dict(progress=False)


@pytest.fixture
def criteo(tmp_path, raw):
    rng = np.random.default_rng(3)
    return raw.write_text(tmp_path / "train.txt", [raw.criteo_line(rng) for _ in range(400)])


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_foreign_file_in_a_split_folder_refuses_and_survives_overwrite(tmp_path, criteo):
    out = tmp_path / "o"
    (out / "test").mkdir(parents=True)
    (out / "test" / "test_app.py").write_text("x\n")
    with pytest.raises(CtrnasError, match=r"did not write \(test/test_app.py\).*--overwrite"):
        prepare("criteo", [str(criteo)], out, PrepareConfig(**QUIET))
    assert (out / "test" / "test_app.py").read_text() == "x\n"
    assert not (out / "meta.json").exists()
    meta = prepare("criteo", [str(criteo)], out, PrepareConfig(**QUIET), overwrite=True)
    assert (out / "test" / "test_app.py").read_text() == "x\n"  # written beside it, never removed
    assert meta["rows"]["written"] == 400 and read_meta(out)["rows"]["written"] == 400
    # the manifest lists what ctrnas wrote, nothing of the user's
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert "test/test_app.py" not in listed
    assert sorted(listed + [MANIFEST, LOCK_FILE, "test/test_app.py"]) == files_under(out)
    # re-preparing the same inputs keeps refusing without --overwrite (the user's file is still there)
    with pytest.raises(CtrnasError, match="test/test_app.py"):
        prepare("criteo", [str(criteo)], out, PrepareConfig(**QUIET))


def test_subfolder_in_a_split_folder_is_foreign_not_a_traceback(tmp_path, criteo):
    out = tmp_path / "o"
    (out / "test" / "sub").mkdir(parents=True)
    (out / "test" / "sub" / "keep.txt").write_text("k")
    (out / "notes").mkdir()
    with pytest.raises(CtrnasError, match=r"\(notes/, test/sub/\)"):
        prepare("criteo", [str(criteo)], out, PrepareConfig(**QUIET))
    prepare("criteo", [str(criteo)], out, PrepareConfig(**QUIET), overwrite=True)
    assert (out / "test" / "sub" / "keep.txt").read_text() == "k" and (out / "notes").is_dir()


def test_reprepare_removes_only_its_own_files(tmp_path, criteo):
    out = tmp_path / "o"
    prepare("criteo", [str(criteo)], out, PrepareConfig(rows_per_shard=50, split="order", **QUIET))
    assert len(list((out / "train").iterdir())) == 7  # 320 rows / 50
    meta = prepare("criteo", [str(criteo)], out, PrepareConfig(rows_per_shard=1000, split="order", **QUIET))
    written = sorted(f for s in meta["splits"].values() for f in s["files"])
    assert written == ["test/part-00000.parquet", "train/part-00000.parquet", "val/part-00000.parquet"]
    assert files_under(out) == sorted(written + ["ctrnas-source.json", "meta.json", MANIFEST, LOCK_FILE,
                                                 "transform.json", "vocab.parquet"])
    ours, foreign = inventory(out)
    assert foreign == [] and len(ours) == len(files_under(out))


def test_folder_from_before_manifests_is_recognised_by_its_meta(tmp_path, criteo):
    out = tmp_path / "o"
    prepare("criteo", [str(criteo)], out, PrepareConfig(rows_per_shard=50, **QUIET))
    (out / MANIFEST).unlink()  # as an older ctrnas left it
    prepare("criteo", [str(criteo)], out, PrepareConfig(rows_per_shard=1000, **QUIET))
    assert len(list((out / "train").iterdir())) == 1


def test_other_inputs_or_settings_refused_with_the_message_run_gives(tmp_path, criteo, raw):
    from ctrnas.pipeline.data import _check_replaceable

    other = raw.write_text(tmp_path / "other.txt", [raw.criteo_line(np.random.default_rng(5)) for _ in range(300)])
    out = tmp_path / "o"
    prepare("criteo", [str(criteo)], out, PrepareConfig(**QUIET))
    with pytest.raises(CtrnasError) as by_prepare:
        prepare("criteo", [str(other)], out, PrepareConfig(**QUIET))
    source = raw_source("criteo", [str(other)], json.loads(json.dumps(vars(PrepareConfig(**QUIET)))))
    with pytest.raises(CtrnasError) as by_run:
        _check_replaceable(out, source, False, tmp_path / "runs")
    why = str(by_prepare.value).split(" already holds ")[1].split(". ")[0]
    assert why == str(by_run.value).split(" already holds ")[1].split(". ")[0]
    assert "made from another source: raw.inputs" in why and "other.txt" in why
    assert str(by_prepare.value).endswith("(--overwrite)")
    with pytest.raises(CtrnasError, match=r"prepare.seed: 2018 -> 7"):
        prepare("criteo", [str(criteo)], out, PrepareConfig(seed=7, **QUIET))
    assert read_meta(out)["settings"]["seed"] == 2018  # untouched
    prepare("criteo", [str(criteo)], out, PrepareConfig(block_size=1 << 16, **QUIET))  # how, not what: fine
    meta = prepare("criteo", [str(other)], out, PrepareConfig(**QUIET), overwrite=True)
    assert meta["rows"]["read"] == 300


def test_synthetic_generation_keeps_foreign_files_too(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    (out / "mine.csv").write_text("a")
    with pytest.raises(CtrnasError, match=r"\(mine.csv\)"):
        generate("criteo", 100, 0, out)
    generate("criteo", 100, 0, out, overwrite=True)
    assert (out / "mine.csv").read_text() == "a" and read_meta(out)["splits"]["train"]["rows"] > 0


def test_cli_refusal_is_one_line_and_deletes_nothing(tmp_path, criteo, capsys):
    out = tmp_path / "o"
    (out / "test" / "deep").mkdir(parents=True)
    (out / "test" / "test_app.py").write_text("x")
    rc = main(["prepare", "criteo", "-i", str(criteo), "-o", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("ctrnas prepare: error: ") and "test/deep/" in err and "test/test_app.py" in err
    assert (out / "test" / "test_app.py").exists() and (out / "test" / "deep").is_dir()
