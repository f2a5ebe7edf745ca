"""Named click-model structures: each keeps the Bayes optimum, is seeded, records its signal fields; the
default structure's data is what it was before structures existed; unknown names are one-line errors."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.special import expit

from ctrnas.cli import main
from ctrnas.data.dataset import SPLITS, read_meta, split_files
from ctrnas.data.synthetic import build, generate, make_settings, structure_overrides
from ctrnas.data.synthetic_profiles import STRUCTURES
from ctrnas.errors import CtrnasError, RecipeError
from ctrnas.recipe import load_recipe

FAST = dict(chunk_rows=4096, calibration_rows=8192, cardinality_cap=2000, noise_cardinality=3000)


def _table(d) -> pa.Table:
    return pa.concat_tables([pq.read_table(split_files(d, s)) for s in SPLITS])


def _recomputed_logit(d, meta, table: pa.Table) -> np.ndarray:
    """The logit of each row from the stored features, by the click model rebuilt from the folder's settings."""
    src, settings = meta["source"], {k: v for k, v in meta["settings"].items()}
    settings["split"] = tuple(settings["split"])
    features, model = build(src["profile"], src["seed"], make_settings(**settings))
    names = [s.name for s in features.profile.sparse]
    ids = np.stack([table.column(n).to_numpy() for n in names], 1)
    dense = np.stack([table.column(x.name).to_numpy() for x in features.profile.dense], 1)
    return model.bias + sum(model.components(ids, dense).values())


@pytest.fixture(scope="module", params=list(STRUCTURES))
def folder(request, tmp_path_factory):
    name = request.param
    shape = {"pairwise": "avazu", "deep": "kdd2012", "sparse-noise": "kdd2012"}.get(name, "criteo")
    d = tmp_path_factory.mktemp(name)
    return d, generate(shape, 6_000, seed=5, out=d, structure=name, **FAST), name


def test_bayes_optimum_is_the_mean_entropy_of_p_recomputed_from_the_features(folder):
    d, meta, _ = folder
    t = _table(d)
    sample = t.take(np.random.default_rng(0).choice(t.num_rows, 2_000, replace=False))
    p = expit(_recomputed_logit(d, meta, sample))
    assert np.allclose(p, sample.column("p_true").to_numpy(), rtol=1e-9, atol=1e-15)  # p depends on features only
    for s in SPLITS:
        q = pq.read_table(split_files(d, s)).column("p_true").to_numpy()
        h = -(q * np.log(q) + (1 - q) * np.log1p(-q)).mean()
        assert meta["bayes_logloss"][s] == pytest.approx(h, rel=1e-9)
    assert meta["click_model"]["structure"] == folder[2]


def test_the_same_seed_gives_the_same_data_and_another_seed_other_data(folder, tmp_path):
    d, meta, name = folder
    shape = meta["source"]["profile"]
    generate(shape, 6_000, seed=5, out=tmp_path / "a", structure=name, **FAST)
    generate(shape, 6_000, seed=6, out=tmp_path / "b", structure=name, **FAST)
    for s in SPLITS:
        assert pq.read_table(split_files(d, s)).equals(pq.read_table(split_files(tmp_path / "a", s)))
    assert not _table(d).slice(0, 200).equals(_table(tmp_path / "b").slice(0, 200))


def test_each_structure_mixes_what_it_names(folder):
    _, meta, name = folder
    share = meta["click_model"]["variance_share"]
    main_part = {"pairwise": "pairwise", "crosses": "bilinear", "dense-gates": "dense_cat", "deep": "mlp",
                 "dense-by-category": "dense_cat",
                 "sparse-noise": "first_order"}.get(name)
    if main_part:
        assert max(share, key=share.get) == main_part
    for c, sd in structure_overrides(name).items():
        if c in share and sd == 0:
            assert share[c] == 0


def test_noise_fields_carry_no_signal_and_signal_fields_do(folder):
    """Shuffling a field the meta calls noise leaves every p unchanged; shuffling a signal field changes it."""
    d, meta, name = folder
    cm = meta["click_model"]
    names = [f["name"] for f in meta["schema"]["sparse"]]
    assert sorted(cm["signal_fields"] + cm["noise_fields"]) == sorted(names)
    t = _table(d).slice(0, 1_500)
    base = _recomputed_logit(d, meta, t)
    rng = np.random.default_rng(1)

    def shuffled(field):
        col = t.column(field).to_numpy().copy()
        rng.shuffle(col)
        return _recomputed_logit(d, meta, t.set_column(t.schema.get_field_index(field), field, pa.array(col)))

    for f in cm["noise_fields"][:5]:
        assert np.array_equal(shuffled(f), base), f
    for f in cm["signal_fields"][:5]:
        assert not np.allclose(shuffled(f), base), f
    if name == "sparse-noise":
        assert len(cm["noise_fields"]) >= 20 and {f"N{i}" for i in range(1, 21)} <= set(cm["noise_fields"])
    else:
        assert cm["noise_fields"] == []


def test_default_structure_data_is_unchanged(tmp_path):
    """Values written by the generator before structures existed (criteo, seed 3, these chunk sizes)."""
    meta = generate("criteo", 5_000, seed=3, out=tmp_path, chunk_rows=4096, calibration_rows=8192)
    t = pq.read_table(split_files(tmp_path, "train"))
    assert t.column("p_true").to_numpy()[:4].tolist() == pytest.approx(
        [0.3511976628437719, 0.3077094560634603, 0.026756478268087237, 0.020815986698235676], rel=1e-12)
    assert t.column("label").to_numpy()[:20].tolist() == [1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1]
    assert meta["click_model"]["bias"] == pytest.approx(-1.8667751803126769, rel=1e-12)
    assert "structure" not in meta["source"] and meta["click_model"]["noise_fields"] == []


def test_unknown_structure_is_a_one_line_error_listing_the_names(tmp_path, capsys):
    with pytest.raises(CtrnasError, match="expected one of: default, pairwise"):
        generate("criteo", 10, seed=0, out=tmp_path / "g", structure="cubic")
    rc = main(["prepare", "synthetic", "--structure", "cubic", "--rows", "10", "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "'cubic'" in err and all(n in err for n in STRUCTURES)
    assert not (tmp_path / "c").exists()
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ndata: {synthetic: {profile: kdd2012, rows: 100, structure: cubic}}\n")
    with pytest.raises(RecipeError) as e:
        load_recipe(recipe)
    msg = str(e.value)
    assert "\n" not in msg and "data.synthetic.structure" in msg and all(n in msg for n in STRUCTURES)


def test_bad_structure_settings_are_named(tmp_path):
    for key, value in (("signal_fraction", 0.0), ("noise_fields", -1), ("num_gates", 0)):
        with pytest.raises(RecipeError, match=key):
            generate("kdd2012", 10, seed=0, out=tmp_path / key, **{key: value})


def test_structure_from_the_cli_and_the_recipe_make_the_same_folder(tmp_path, capsys):
    assert main(["prepare", "synthetic", "--profile", "kdd2012", "--structure", "deep", "--rows", "800",
                 "--out", str(tmp_path / "cli")]) == 0
    assert "deep structure" in capsys.readouterr().out
    from ctrnas.pipeline.data import prepare_data

    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: r\ndata: {{path: {tmp_path / 'rec'}, synthetic: {{profile: kdd2012, rows: 800, "
                      "structure: deep}}\n")
    prepare_data(load_recipe(recipe))
    for s in SPLITS:
        assert pq.read_table(split_files(tmp_path / "cli", s)).equals(pq.read_table(split_files(tmp_path / "rec", s)))
    assert read_meta(tmp_path / "rec")["source"]["structure"] == "deep"
