"""A damaged or hostile folder gets a one-line refusal, exit 1, before any large allocation, and nothing hangs:
model cards asking for huge tables, files that are FIFOs or devices, files that are not what their name says
(non-UTF-8 JSON, non-Parquet Parquet, nesting deep enough to overflow a recursive decoder)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctrnas.cli import main
from tests.helpers.security import criteo_lines, one_line_error

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


@pytest.fixture(autouse=True)
def no_hang():
    """A test that would block (a FIFO opened for reading, /dev/zero read to the end) fails instead."""
    def stop(*_):
        raise TimeoutError("blocked")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(240)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(raw Criteo file, prepared folder with transform.json + vocab.parquet, exported model, lr baseline)."""
    from ctrnas import api
    from ctrnas.space.baselines import baseline_arch

    tmp = tmp_path_factory.mktemp("hostile")
    raw = tmp / "crit.tsv"
    raw.write_text("\n".join(criteo_lines(300, seed=1)) + "\n")
    assert main(["prepare", "criteo", "--input", str(raw), "--out", str(tmp / "data"), "--no-progress"]) == 0
    assert (tmp / "data" / "vocab.parquet").is_file()
    (tmp / "arch.json").write_text(json.dumps(baseline_arch("dlrm-like").to_json()))
    api.export_arch(str(tmp / "arch.json"), tmp / "model", data_dir=tmp / "data", space="ctrnas-small", emb_dim=4,
                    init="fresh", seed=1)
    assert main(["train", "--data", str(tmp / "data"), "--baseline", "lr", "--out", str(tmp / "lr"),
                 "--no-progress"]) == 0
    return raw, tmp / "data", tmp / "model", tmp / "lr"


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def _edit_card(folder: Path, change) -> None:
    card = json.loads((folder / "model_card.json").read_text())
    change(card)
    (folder / "model_card.json").write_text(json.dumps(card))


CARDS = {  # (which folder, change, words of the refusal)
    "table_1e11": ("model", lambda c: c["schema"]["sparse"][0].update(cardinality=10**11), "cardinality"),
    "table_1e11_float": ("model", lambda c: c["schema"]["sparse"][0].update(cardinality=1e11), "cardinality"),
    "table_one_row_more": ("model", lambda c: c["schema"]["sparse"][0].update(
        cardinality=c["schema"]["sparse"][0]["cardinality"] + 1), "the weights' table"),
    "table_5e10_under_the_limit": ("model", lambda c: c["schema"]["sparse"][0].update(cardinality=5 * 10**10),
                                   "the weights' table"),
    "emb_dim_1e6": ("model", lambda c: c.update(emb_dim=1_000_000), "emb_dim"),
    "baseline_dim_1e6": ("lr", lambda c: c["build"].update(dim=1_000_000), "build.dim"),
    "baseline_table_one_row_more": ("lr", lambda c: c["schema"]["sparse"][3].update(
        cardinality=c["schema"]["sparse"][3]["cardinality"] + 1), "the weights' table"),
}


@pytest.mark.parametrize("case", list(CARDS))
def test_a_card_asking_for_other_sizes_than_its_weights_is_refused(case, folders, tmp_path, capsys):
    raw, _, model, lr = folders
    which, change, words = CARDS[case]
    folder = _copy(model if which == "model" else lr, tmp_path)
    _edit_card(folder, change)
    rc, err = run(capsys, "predict", "--model", folder, "--input", raw, "--out", tmp_path / "p.parquet",
                  "--no-progress")
    line = one_line_error(rc, err)
    assert words in line and "model_card.json" in line and not (tmp_path / "p.parquet").exists()


def test_predict_refuses_a_1e11_row_card_in_under_500_mb(folders, tmp_path):
    """The repro allocated 5.6 GB before failing. Peak resident memory of the whole `ctrnas predict` process
    (imports included), for a card over the limit and for one under it that disagrees with its weights."""
    raw, _, model, _ = folders
    paths = []
    for n in (10**11, 5 * 10**10):
        folder = tmp_path / f"m{n}"
        shutil.copytree(model, folder)
        _edit_card(folder, lambda c: c["schema"]["sparse"][0].update(cardinality=n))
        paths.append(str(folder))
    code = f"""
        import resource, subprocess, sys
        errs = []
        for m in {paths!r}:
            p = subprocess.run([sys.executable, "-m", "ctrnas", "predict", "--model", m, "--input", {str(raw)!r},
                                "--out", {str(tmp_path / "p.parquet")!r}, "--no-progress"], capture_output=True,
                               text=True)
            errs.append((p.returncode, p.stderr.strip()))
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, errs)
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                         timeout=200).stdout
    kb, errs = out.split(" ", 1)
    assert all(rc == 1 and "model_card.json" in e and "\n" not in e for rc, e in eval(errs)), errs
    assert int(kb) < 500 * 1024, f"peak {int(kb) / 1024:.0f} MB"


@pytest.mark.parametrize("what", ["devzero_symlink", "fifo", "folder"])
def test_a_model_card_that_is_not_a_regular_file_is_refused_at_once(what, folders, tmp_path, capsys):
    raw, _, model, _ = folders
    folder = _copy(model, tmp_path)
    card = folder / "model_card.json"
    card.unlink()
    if what == "devzero_symlink":
        card.symlink_to("/dev/zero")
    elif what == "fifo":
        os.mkfifo(card)
    else:
        card.mkdir()
    rc, err = run(capsys, "predict", "--model", folder, "--input", raw, "--out", tmp_path / "p.parquet",
                  "--no-progress")
    line = one_line_error(rc, err)
    words = {"devzero_symlink": "character device", "fifo": "FIFO", "folder": "a folder"}[what]
    assert words in line and "not a regular file" in line


@pytest.mark.parametrize("verb", ["predict", "prepare"])
@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_a_device_or_fifo_as_input_is_named_as_such(verb, source, folders, tmp_path, capsys):
    """The repro: `predict --input /dev/zero` ran without output; `prepare` said "no such file"."""
    _, _, model, _ = folders
    if source == "fifo":
        source = tmp_path / "in.tsv"
        os.mkfifo(source)
    if verb == "predict":
        rc, err = run(capsys, "predict", "--model", model, "--input", source, "--out", tmp_path / "p.parquet",
                      "--no-progress")
    else:
        rc, err = run(capsys, "prepare", "criteo", "--input", source, "--out", tmp_path / "D", "--no-progress")
    line = one_line_error(rc, err)
    assert "not a regular file" in line and "no such file" not in line
    assert ("character device" if str(source) == "/dev/zero" else "FIFO") in line


NOT_UTF8 = b'{"format": "\xff\xfe"}'


@pytest.mark.parametrize("damage", ["meta_not_utf8", "meta_nested", "shard_not_parquet", "shard_truncated"])
def test_a_damaged_dataset_folder_is_one_line(damage, folders, tmp_path, capsys):
    _, data, _, _ = folders
    folder = _copy(data, tmp_path)
    shard = folder / "train" / "part-00000.parquet"
    if damage == "meta_not_utf8":
        (folder / "meta.json").write_bytes(NOT_UTF8)
    elif damage == "meta_nested":
        (folder / "meta.json").write_text("[" * 200_000 + "]" * 200_000)
    elif damage == "shard_not_parquet":
        shard.write_bytes(b"not parquet at all\n" * 100)
    else:
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    rc, err = run(capsys, "train", "--data", folder, "--baseline", "lr", "--out", tmp_path / "O", "--no-progress")
    line = one_line_error(rc, err)
    assert line.split("error: ", 1)[1].startswith("damaged ")
    assert ("meta.json" if damage.startswith("meta") else "part-00000.parquet") in line


@pytest.mark.parametrize("damage", ["vocab_not_parquet", "vocab_wrong_columns", "transform_not_utf8",
                                    "arch_not_utf8"])
def test_a_damaged_model_folder_is_one_line(damage, folders, tmp_path, capsys):
    raw, _, model, _ = folders
    folder = _copy(model, tmp_path)
    if damage == "vocab_not_parquet":
        (folder / "vocab.parquet").write_bytes(b"PAR1 but no more")
    elif damage == "vocab_wrong_columns":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"x": [1, 2]}), folder / "vocab.parquet")
    elif damage == "transform_not_utf8":
        (folder / "transform.json").write_bytes(NOT_UTF8)
    else:
        (folder / "arch.json").write_bytes(NOT_UTF8)
        (folder / "model.pt2").unlink()  # predict reads arch.json where model.pt2 cannot serve
    rc, err = run(capsys, "predict", "--model", folder, "--input", raw, "--out", tmp_path / "p.parquet",
                  "--no-progress")
    line = one_line_error(rc, err)
    name = {"vocab": "vocab.parquet", "transform": "transform.json", "arch": "arch.json"}[damage.split("_")[0]]
    assert f"damaged {folder / name}" in line


@pytest.mark.parametrize("damage", ["not_utf8", "nested", "nested_fingerprint", "nested_state"])
def test_a_damaged_search_checkpoint_is_one_error(damage, tmp_path):
    from ctrnas.errors import CtrnasError
    from ctrnas.search.checkpoint import FORMAT, load_checkpoint

    path = tmp_path / "search.ckpt"
    deep = "[" * 200_000 + "]" * 200_000
    text = {"not_utf8": None, "nested": deep,
            "nested_fingerprint": '{"format": "%s", "fingerprint": %s, "state": {}}' % (FORMAT, deep),
            "nested_state": '{"format": "%s", "fingerprint": {"a": 1}, "state": {"x": %s}}' % (FORMAT, "[" * 5000 +
                                                                                             "]" * 5000)}[damage]
    if text is None:
        path.write_bytes(NOT_UTF8)
    else:
        path.write_text(text)
    with pytest.raises(CtrnasError) as e:
        load_checkpoint(path, {"a": 1})
    assert str(path) in str(e.value) and len(str(e.value)) < 1000 and "\n" not in str(e.value)


def test_a_damaged_fitness_record_is_refused_and_kept(tmp_path):
    """search/fitness.json not UTF-8: was a traceback from the search stage."""
    from ctrnas.errors import DamagedFile
    from ctrnas.pipeline.stages import _read_marker

    (tmp_path / "fitness.json").write_bytes(NOT_UTF8)
    with pytest.raises(DamagedFile, match="not UTF-8.*delete it to start the search again"):
        _read_marker(tmp_path / "fitness.json")
    assert (tmp_path / "fitness.json").read_bytes() == NOT_UTF8


def test_a_supernet_checkpoint_asking_for_a_huge_table_is_refused_before_it_is_built(folders, tmp_path):
    """`ctrnas export --supernet` and a reused warm-up read the sizes a supernet file states: checked too."""
    import torch

    from ctrnas.data.dataset import load_schema
    from ctrnas.errors import CtrnasError
    from ctrnas.supernet.fresh import build_supernet
    from ctrnas.supernet.io import load_supernet, save_supernet

    _, data, _, _ = folders
    path = tmp_path / "supernet.pt"
    save_supernet(build_supernet(load_schema(data), "ctrnas-small", seed=0, emb_dim=4), path)
    assert load_supernet(path)[0].emb_dim == 4  # the real file loads
    ck = torch.load(path, weights_only=True)
    ck["schema"]["sparse"][0]["cardinality"] = 5 * 10**10
    torch.save(ck, path)
    with pytest.raises(CtrnasError, match="the weights' table"):
        load_supernet(path)
