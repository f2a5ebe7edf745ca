"""The prepare pipeline end to end: splits against sklearn/formulas, meta.json accounting, errors, re-runs, CLI."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn.model_selection import StratifiedKFold

from ctrnas.cli import main
from ctrnas.data.dataset import read_meta, split_files
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig, load_prepare_config
from ctrnas.errors import CtrnasError, DataFormatError, RecipeError

QUIET = dict(progress=False)


def numbered_criteo(path, n, seed=0, ctr=0.3):
    """Criteo lines whose I1 is the row number (so output rows can be traced back), labels Bernoulli(ctr)."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < ctr).astype(int)
    with open(path, "w") as f:
        for i in range(n):
            sparse = [f"{int(rng.integers(0, 50)):08x}" for _ in range(26)]
            f.write("\t".join([str(labels[i]), str(i)] + [str(int(rng.integers(0, 9)))] * 12 + sparse) + "\n")
    return labels


def rows_by_split(out):
    """{split: (row numbers, labels)} from I1 written with dense_transform none."""
    got = {}
    for s in ("train", "val", "test"):
        t = pq.read_table(out / s)
        got[s] = (np.asarray(t.column("I1")).astype(int), np.asarray(t.column("label")))
    return got


def test_stratified_split_is_sklearn_stratified_kfold_2018(tmp_path):
    labels = numbered_criteo(tmp_path / "train.txt", 3000)
    cfg = PrepareConfig(dense_transform="none", block_size=8192, rows_per_shard=700, **QUIET)
    meta = prepare("criteo", [str(tmp_path / "train.txt")], tmp_path / "o", cfg)
    folds = StratifiedKFold(n_splits=10, shuffle=True, random_state=2018)._make_test_folds(None, labels)
    want = {"train": np.flatnonzero(folds < 8), "val": np.flatnonzero(folds == 8), "test": np.flatnonzero(folds == 9)}
    got = rows_by_split(tmp_path / "o")
    for s in want:
        assert np.array_equal(got[s][0], want[s])  # same rows, in file order
        assert np.array_equal(got[s][1], labels[want[s]])
        assert meta["splits"][s]["ctr"] == pytest.approx(labels[want[s]].mean())
        assert meta["splits"][s]["rows"] == len(want[s])
    assert len(split_files(tmp_path / "o", "train")) == -(-len(want["train"]) // 700)


def test_random_split_is_seeded_and_independent_of_chunking(tmp_path):
    numbered_criteo(tmp_path / "train.txt", 4000, ctr=0.2)
    a = prepare("criteo", [str(tmp_path / "train.txt")], tmp_path / "a",
                PrepareConfig(split="random", seed=7, dense_transform="none", split_ratios=(0.7, 0.1, 0.2), **QUIET))
    prepare("criteo", [str(tmp_path / "train.txt")], tmp_path / "b",
            PrepareConfig(split="random", seed=7, dense_transform="none", split_ratios=(0.7, 0.1, 0.2),
                          block_size=20000, **QUIET))
    ga, gb = rows_by_split(tmp_path / "a"), rows_by_split(tmp_path / "b")
    u = np.random.Generator(np.random.PCG64(7)).random(4000)
    want = {"train": np.flatnonzero(u < 0.7), "val": np.flatnonzero((u >= 0.7) & (u < 0.8)),
            "test": np.flatnonzero(u >= 0.8)}
    for s in want:
        assert np.array_equal(ga[s][0], want[s]) and np.array_equal(gb[s][0], want[s])
    assert a["split"]["method"] == "random"


def test_order_split_keeps_file_order(tmp_path):
    numbered_criteo(tmp_path / "day_0", 1001)
    prepare("criteo", [str(tmp_path / "day_0")], tmp_path / "o",
            PrepareConfig(split="order", dense_transform="none", **QUIET))
    got = rows_by_split(tmp_path / "o")
    # round(1001 * 0.8) = 801 train, round(1001 * 0.9) - 801 = 100 val, the remaining 100 test
    assert got["train"][0].tolist() == list(range(801))
    assert got["val"][0].tolist() == list(range(801, 901))
    assert got["test"][0].tolist() == list(range(901, 1001))


def test_skip_mode_counts_every_row_and_keeps_first_rejects(tmp_path, raw):
    rng = np.random.default_rng(5)
    lines, bad = [], {}
    for i in range(400):
        r = rng.random()
        if r < 0.05:
            lines.append("0\t1")
            bad[len(lines)] = "field_count"
        elif r < 0.08:
            lines.append("1\tzz" + "\t" * 38)
            bad[len(lines)] = "non_numeric_dense"
        elif r < 0.10:
            lines.append("")
        else:
            lines.append(raw.criteo_line(rng))
    path = raw.write_text(tmp_path / "train.txt", lines)
    meta = prepare("criteo", [str(path)], tmp_path / "o",
                   PrepareConfig(on_error="skip", max_rejects=10, block_size=4096, **QUIET))
    rows = meta["rows"]
    n_blank = sum(1 for l in lines if l == "")
    assert rows["read"] == len(lines) - n_blank == rows["written"] + rows["rejected"]
    assert rows["rejected"] == len(bad)
    assert rows["rejected_by_reason"] == {k: list(bad.values()).count(k) for k in set(bad.values())}
    assert sum(meta["splits"][s]["rows"] for s in ("train", "val", "test")) == rows["written"]
    tsv = (tmp_path / "o" / "rejects.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[:4] == ["file", "line", "field", "reason"]
    assert [int(l.split("\t")[1]) for l in tsv[1:]] == sorted(bad)[:10]
    assert [l.split("\t")[3] for l in tsv[1:]] == [bad[k] for k in sorted(bad)[:10]]


def test_interrupted_run_leaves_incomplete_folder_and_rerun_finishes(tmp_path, raw):
    rng = np.random.default_rng(9)
    lines = [raw.criteo_line(rng) for _ in range(3000)]
    broken = lines[:2500] + ["0\t1"] + lines[2500:]
    path = raw.write_text(tmp_path / "train.txt", broken)
    out = tmp_path / "o"
    cfg = PrepareConfig(split="random", rows_per_shard=300, block_size=16384, hash_table_size="buckets",
                        **QUIET)  # no scan: writes first
    with pytest.raises(DataFormatError) as e:
        prepare("criteo", [str(path)], out, cfg)
    assert e.value.line == 2501
    assert list((out / "train").iterdir())  # shards were being written ...
    with pytest.raises(CtrnasError, match="did not finish"):
        read_meta(out)  # ... but the folder does not look complete
    raw.write_text(path, lines)
    meta = prepare("criteo", [str(path)], out, cfg)
    assert meta["rows"]["written"] == 3000
    files = sorted(p.name for p in (out / "train").iterdir())
    assert files == sorted(f.split("/")[1] for f in meta["splits"]["train"]["files"])  # no stale shards
    assert sum(pq.read_metadata(out / f).num_rows for s in ("train", "val", "test")
               for f in meta["splits"][s]["files"]) == 3000


def test_keyboard_interrupt_mid_write_leaves_no_meta(tmp_path, raw, monkeypatch):
    rng = np.random.default_rng(4)
    path = raw.write_text(tmp_path / "t.txt", [raw.criteo_line(rng) for _ in range(500)])
    prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(**QUIET))
    from ctrnas.data import dataset

    def boom(self, split, table):
        raise KeyboardInterrupt

    monkeypatch.setattr(dataset.DatasetWriter, "write", boom)
    with pytest.raises(KeyboardInterrupt):
        prepare("criteo", [str(path)], tmp_path / "o", PrepareConfig(**QUIET))
    assert not (tmp_path / "o" / "meta.json").exists()


def test_limit_stops_after_n_accepted_rows(tmp_path):
    numbered_criteo(tmp_path / "t", 500)
    meta = prepare("criteo", [str(tmp_path / "t")], tmp_path / "o",
                   PrepareConfig(limit=123, dense_transform="none", block_size=4096, **QUIET))
    got = rows_by_split(tmp_path / "o")
    assert sorted(np.concatenate([got[s][0] for s in got]).tolist()) == list(range(123))
    assert meta["rows"]["read"] == 123


def test_config_file_data_section_and_cli_overrides(tmp_path):
    (tmp_path / "r.yaml").write_text("data:\n  dense_transform: log_square\n  min_count: 3\n  split: random\n")
    cfg = load_prepare_config(tmp_path / "r.yaml", {"min_count": 5, "seed": None})
    assert (cfg.dense_transform, cfg.min_count, cfg.split, cfg.seed) == ("log_square", 5, "random", 2018)
    (tmp_path / "bad.yaml").write_text("dense_transform: log2\n")
    with pytest.raises(RecipeError, match="dense_transform"):
        load_prepare_config(tmp_path / "bad.yaml")
    with pytest.raises(RecipeError, match="split_ratios"):
        PrepareConfig(split_ratios=(0.75, 0.15, 0.1))


def test_cli_prepare_prints_summary_and_reports_bad_line(tmp_path, raw, capsys):
    rng = np.random.default_rng(0)
    path = raw.write_text(tmp_path / "train.txt", [raw.criteo_line(rng) for _ in range(200)])
    (tmp_path / "p.yaml").write_text("split: order\nhash_buckets: 50\n")
    rc = main(["prepare", "criteo", "-i", str(path), "-o", str(tmp_path / "o"), "--config", str(tmp_path / "p.yaml"),
               "--hash-buckets", "77", "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "read 200 rows" in text and str(tmp_path / "o") in text
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert meta["settings"]["hash_buckets"] == 77 and meta["split"]["method"] == "order"
    assert all(f["cardinality"] <= 77 for f in meta["schema"]["sparse"])
    bad = raw.write_text(tmp_path / "bad.txt", [raw.criteo_line(rng) for _ in range(5)] + ["1\tx"])
    rc = main(["prepare", "criteo", "-i", str(bad), "-o", str(tmp_path / "b"), "--no-progress"])
    assert rc == 1
    assert "bad.txt, line 6" in capsys.readouterr().err


def test_cli_registers_every_kind_and_table_columns_merge_with_config(tmp_path):
    from ctrnas.cli import build_parser
    from ctrnas.cli.prepare import _overrides

    parser = build_parser()
    for kind in ("criteo", "avazu", "kdd2012", "table"):
        args = parser.parse_args(["prepare", kind, "-i", "x", "-o", "y"])
        assert args.kind == kind and callable(args.func)
    args = parser.parse_args(["prepare", "synthetic", "--profile", "avazu", "--rows", "10", "--out", "y"])
    assert (args.profile, args.rows, args.seed) == ("avazu", 10, 0)
    (tmp_path / "t.yaml").write_text("table: {label: click, dense: [a], sparse: [b, c]}\nsplit: random\n")
    args = parser.parse_args(["prepare", "table", "-i", "x", "-o", "y", "--config", str(tmp_path / "t.yaml"),
                              "--label", "clicked"])
    cfg = load_prepare_config(args.config, _overrides(args))
    assert (cfg.table.label, cfg.table.dense, cfg.table.sparse, cfg.split) == ("clicked", ("a",), ("b", "c"), "random")
