"""The data stage reuses a folder made from the same source and refuses to replace one made from another."""

import json

import numpy as np
import pytest

from ctrnas.data.dataset import read_meta
from ctrnas.errors import CtrnasError
from ctrnas.data.dataset import SOURCE_FILE
from ctrnas.pipeline.data import prepare_data
from ctrnas.recipe import load_recipe


def _recipe(path, tests_recipe_path, rows, *more):
    return load_recipe(tests_recipe_path, [f"data.path={path}", f"data.synthetic.rows={rows}", *more])


def _rows(path):
    return sum(s["rows"] for s in read_meta(path)["splits"].values())


def test_a_folder_from_another_source_is_kept_unless_overwrite(tests_recipe_path, tmp_path):
    path = tmp_path / "d"
    first = prepare_data(_recipe(path, tests_recipe_path, 2000))
    assert not first.reused and _rows(path) == 2000
    assert prepare_data(_recipe(path, tests_recipe_path, 2000)).reused

    with pytest.raises(CtrnasError) as e:
        prepare_data(_recipe(path, tests_recipe_path, 3000))
    msg = str(e.value)
    assert str(path) in msg and "synthetic.rows: 2000 -> 3000" in msg and "--set data.overwrite=true" in msg
    assert _rows(path) == 2000  # untouched

    again = prepare_data(_recipe(path, tests_recipe_path, 3000, "data.overwrite=true"))
    assert not again.reused and _rows(path) == 3000
    assert json.loads((path / SOURCE_FILE).read_text())["synthetic"]["rows"] == 3000


def test_a_hand_prepared_folder_is_kept_and_an_interrupted_one_is_remade(tests_recipe_path, tmp_path):
    path = tmp_path / "d"
    prepare_data(_recipe(path, tests_recipe_path, 2000))
    (path / SOURCE_FILE).unlink()  # as a folder made by other tools (or before the record existed)
    with pytest.raises(CtrnasError, match="has no readable ctrnas-source.json"):
        prepare_data(_recipe(path, tests_recipe_path, 2000))

    (path / "meta.json").unlink()  # an interrupted run writes meta.json last
    remade = prepare_data(_recipe(path, tests_recipe_path, 2000))
    assert not remade.reused and _rows(path) == 2000


def _criteo_file(path, n=300):
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(n):
        dense = [str(int(x)) for x in rng.integers(0, 100, 13)]
        sparse = [f"{int(x):08x}" for x in rng.integers(0, 50, 26)]
        lines.append("\t".join([str(int(rng.random() < 0.3))] + dense + sparse))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_run_reuses_a_folder_prepared_by_hand_with_the_recipe_settings(tests_recipe_path, tmp_path, monkeypatch):
    from ctrnas.cli import main

    monkeypatch.chdir(tmp_path)  # relative input paths, as in the README
    _criteo_file(tmp_path / "train.txt")
    assert main(["prepare", "criteo", "-i", "train.txt", "-o", "data/criteo", "--hash-buckets", "77",
                 "--no-progress"]) == 0

    def recipe(buckets):
        return load_recipe(tests_recipe_path, ["data.path=data/criteo", "data.synthetic=null",
                                               "data.raw={kind: criteo, inputs: [train.txt]}",
                                               f"data.prepare={{hash_buckets: {buckets}}}"])

    stamp = (tmp_path / "data/criteo/meta.json").stat().st_mtime_ns
    assert prepare_data(recipe(77)).reused
    with pytest.raises(CtrnasError, match=r"prepare\.hash_buckets: 77 -> 78"):
        prepare_data(recipe(78))
    assert (tmp_path / "data/criteo/meta.json").stat().st_mtime_ns == stamp


def test_a_synthetic_recipe_on_your_own_folder_says_synthetic_null_and_never_overwrite(tests_recipe_path, tmp_path):
    from ctrnas.cli import main

    _criteo_file(tmp_path / "train.txt")
    assert main(["prepare", "criteo", "-i", str(tmp_path / "train.txt"), "-o", str(tmp_path / "mine"),
                 "--no-progress"]) == 0
    stamp = (tmp_path / "mine/meta.json").stat().st_mtime_ns
    recipe = load_recipe(tests_recipe_path, [f"data.path={tmp_path / 'mine'}"])  # still data.synthetic
    with pytest.raises(CtrnasError) as e:
        prepare_data(recipe)
    msg = str(e.value)
    assert "prepared from criteo files" in msg and "--set data.synthetic=null" in msg
    assert "overwrite" not in msg and f"--set output=DIR: the results otherwise go to {recipe.output_dir}" in msg
    assert (tmp_path / "mine/meta.json").stat().st_mtime_ns == stamp
    # the fix it names: the folder is searched as it is
    fixed = prepare_data(load_recipe(tests_recipe_path, [f"data.path={tmp_path / 'mine'}", "data.synthetic=null"]))
    assert fixed.reused and _rows(tmp_path / "mine") == 300
    (tmp_path / "mine" / SOURCE_FILE).unlink()  # of unknown origin: may be real data too
    with pytest.raises(CtrnasError, match="has no readable ctrnas-source.json") as e:
        prepare_data(recipe)
    assert "--set data.synthetic=null" in str(e.value) and "overwrite" not in str(e.value)


def test_records_from_before_absolute_paths_still_match(tests_recipe_path, tmp_path, monkeypatch):
    from ctrnas.cli import main

    monkeypatch.chdir(tmp_path)
    _criteo_file(tmp_path / "train.txt")
    assert main(["prepare", "criteo", "-i", "train.txt", "-o", "d", "--no-progress"]) == 0
    marker = tmp_path / "d" / SOURCE_FILE
    rec = json.loads(marker.read_text())
    # the old form: inputs as given (relative) and the settings that only change how files are cut
    rec["raw"]["inputs"] = ["train.txt"]
    rec["prepare"].update(block_size=1024, rows_per_shard=7, progress=False)
    marker.write_text(json.dumps(rec))
    recipe = load_recipe(tests_recipe_path, ["data.path=d", "data.synthetic=null",
                                             "data.raw={kind: criteo, inputs: [train.txt]}"])
    assert prepare_data(recipe).reused

    marker.write_text("{not json")  # unreadable: unknown source, refused (not a traceback)
    with pytest.raises(CtrnasError, match=r"no readable ctrnas-source.json.*--set data.raw=null"):
        prepare_data(recipe)


def test_rewriting_a_folder_drops_its_old_source_record(tmp_path):
    from ctrnas.data.synthetic import generate

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / SOURCE_FILE).write_text(json.dumps({"synthetic": {"rows": 1}}))
    generate("criteo", 1000, 0, tmp_path / "d")  # direct API call: writes no record of its own
    assert not (tmp_path / "d" / SOURCE_FILE).exists() and _rows(tmp_path / "d") == 1000


def test_warmup_cache_key_changes_when_the_split_changes(tests_data, tests_recipe_path):
    import dataclasses
    import copy

    from ctrnas.pipeline.fitness.build import warmup_fingerprint

    recipe = load_recipe(tests_recipe_path)
    meta = copy.deepcopy(tests_data.meta)
    meta["splits"]["train"]["ctr"] += 1e-6  # same rows, other rows in each split
    other = dataclasses.replace(tests_data, meta=meta)
    assert warmup_fingerprint(recipe, tests_data) == warmup_fingerprint(recipe, tests_data)
    assert warmup_fingerprint(recipe, other) != warmup_fingerprint(recipe, tests_data)
