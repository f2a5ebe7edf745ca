"""The saved preprocessing re-encodes raw rows exactly as `prepare` wrote them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctrnas.data.dataset import split_files
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig, TableColumns
from ctrnas.data.preprocess import TRANSFORM_FILE, VOCAB_FILE, Preprocess, copy_preprocess

IN_ORDER = dict(split="order", split_ratios=(1.0, 0.0, 0.0), progress=False)  # train = the file, in order


def prepared_rows(out, schema):
    t = pq.read_table(split_files(out, "train")[0]) if len(split_files(out, "train")) == 1 else None
    assert t is not None
    return (t.column("label").to_numpy(), np.stack([t.column(n).to_numpy() for n in schema.dense], 1)
            if schema.dense else np.zeros((t.num_rows, 0), np.float32),
            np.stack([t.column(n).to_numpy() for n in schema.sparse_names], 1))


def reencoded(folder, inputs, kind=None):
    pre = Preprocess.load(folder)
    parts = [pre.encode(raw) for raw in pre.reader(inputs, kind, on_error="skip", progress=False).batches()]
    return [np.concatenate([p[k] for p in parts]) for k in range(3)], pre


def check_same(tmp_path, kind, inputs, cfg):
    out = tmp_path / "ds"
    prepare(kind, inputs, out, cfg)
    (labels, dense, ids), pre = reencoded(out, inputs)
    want = prepared_rows(out, pre.schema)
    assert len(labels) == len(want[0]) > 0
    np.testing.assert_array_equal(labels, want[0])
    np.testing.assert_array_equal(dense, want[1])  # bit-equal float32
    np.testing.assert_array_equal(ids, want[2])
    return pre, ids


@pytest.mark.parametrize("encoding", ["hash", "hash+rows", "vocab"])
def test_criteo_sample_reencodes_to_the_prepared_rows(tmp_path, criteo_sample, encoding):
    cfg = PrepareConfig(sparse_encoding=encoding.split("+")[0], hash_buckets=1000, min_count=2,
                        dense_transform="log_square", hash_table_size="data" if "+" in encoding else "buckets",
                        **IN_ORDER)
    pre, ids = check_same(tmp_path, "criteo", [str(criteo_sample)], cfg)
    c1 = [line.split("\t")[14] for line in criteo_sample.read_text().splitlines()]
    if encoding == "hash":  # hand check of C1: 1 + int(hex, 16) mod (buckets - 1)
        assert ids[:, 0].tolist() == [1 + int(c, 16) % 999 if c else 0 for c in c1]
    elif encoding == "hash+rows":  # C1's distinct hash ids, in order, are rows 2..
        seen = sorted({1 + int(c, 16) % 999 for c in c1 if c})
        assert ids[:, 0].tolist() == [2 + seen.index(1 + int(c, 16) % 999) if c else 0 for c in c1]
        assert pre.schema.sparse[0].cardinality == len(seen) + 2 < 1000
    else:
        assert len(pre.vocabs) == 26 and all(int(ids[:, j].max()) < pre.schema.sparse[j].cardinality
                                             for j in range(26))


@pytest.mark.parametrize("encoding", ["hash", "vocab"])  # hash: tables sized by the data (the default)
def test_avazu_sample_reencodes_to_the_prepared_rows(tmp_path, avazu_sample, encoding):
    cfg = PrepareConfig(sparse_encoding=encoding, hash_buckets=5000, min_count=3, avazu_hour="split", **IN_ORDER)
    check_same(tmp_path, "avazu", [str(avazu_sample)], cfg)


def test_generated_table_with_bad_rows_reencodes_and_survives_export_copy(tmp_path):
    rng = np.random.default_rng(0)
    lines = ["y,price,city,user"]
    for i in range(300):
        price = "" if i % 7 == 0 else f"{rng.random() * 100:.3f}"
        city = "" if i % 11 == 0 else rng.choice(["paris", "rome", "oslo", "a,b"])
        lines.append(f"{int(rng.random() < 0.3)},{price},\"{city}\",{int(rng.integers(0, 50))}")
    lines[5] = "2,1.0,paris,3"  # bad label: rejected by prepare and by the re-read alike
    lines[9] = "0,abc,paris,3"  # non-numeric dense
    path = tmp_path / "log.csv"
    path.write_text("\n".join(lines) + "\n")
    cfg = PrepareConfig(table=TableColumns("y", ("price",), ("city", "user")), sparse_encoding="vocab",
                        min_count=5, on_error="skip", **IN_ORDER)
    check_same(tmp_path, "table", [str(path)], cfg)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    assert copy_preprocess(tmp_path / "ds", model_dir)
    (labels, dense, ids), _ = reencoded(model_dir, [str(path)])  # from the copy beside a model
    np.testing.assert_array_equal(ids, prepared_rows(tmp_path / "ds", Preprocess.load(model_dir).schema)[2])
    # copying it beside an exported model (every `train` and final stage does) loads no pyarrow compute kernels
    code = ("import sys; from ctrnas.data.preprocess import copy_preprocess; "
            f"print(copy_preprocess({str(tmp_path / 'ds')!r}, {str(tmp_path / 'copy')!r}), "
            "'pyarrow.compute' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False"]
    for name in (TRANSFORM_FILE, VOCAB_FILE):  # the dataset's own files, byte for byte
        assert (tmp_path / "copy" / name).read_bytes() == (tmp_path / "ds" / name).read_bytes()


@pytest.mark.parametrize("expand", [False, True])
def test_generated_kdd2012_with_profile_reencodes_to_the_prepared_rows(tmp_path, expand):
    rng = np.random.default_rng(4)
    lines = []
    for _ in range(400):
        imps = int(rng.integers(1, 4))
        clicks = int(rng.integers(0, imps + 1)) if rng.random() < 0.3 else 0
        ids = [str(int(rng.integers(0, 2**63)))] + [str(int(rng.integers(0, 300))) for _ in range(7)]
        lines.append("\t".join([str(clicks), str(imps), ids[0], ids[1], ids[2], str(int(rng.integers(1, 4))),
                                str(int(rng.integers(1, 4))), *ids[3:]]))
    path = tmp_path / "training.txt"
    path.write_text("\n".join(lines) + "\n")
    profile = tmp_path / "userid_profile.txt"
    profile.write_text("\n".join(f"{u}\t{u % 3}\t{u % 6}" for u in range(0, 300, 2)) + "\n")
    cfg = PrepareConfig(kdd_profile=str(profile), kdd_expand_impressions=expand, hash_buckets=2000, **IN_ORDER)
    pre, _ = check_same(tmp_path, "kdd2012", [str(path)], cfg)
    assert "Gender" in pre.schema.sparse_names
