"""Synthetic generator: truth recorded in meta.json, Bernoulli labels, determinism, shapes of the real data."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.special import expit
from scipy.stats import norm

from ctrnas.data.dataset import SPLITS, load_schema, read_meta, split_files
from ctrnas.data.synthetic import generate
from ctrnas.data.synthetic_profiles import PROFILES
from ctrnas.errors import CtrnasError, RecipeError

FAST = dict(chunk_rows=4096, calibration_rows=8192)  # small chunks keep the tests quick


def _split(d, s) -> pa.Table:
    return pq.read_table(split_files(d, s))


@pytest.fixture(scope="module")
def criteo(tmp_path_factory):
    d = tmp_path_factory.mktemp("criteo")
    return d, generate("criteo", 30_000, seed=7, out=d, rows_per_shard=5_000, **FAST)


def test_bayes_logloss_equals_numpy_entropy_of_stored_p_true(criteo):
    d, meta = criteo
    for s in SPLITS:
        p = _split(d, s).column("p_true").to_numpy()
        h = -(p * np.log(p) + (1 - p) * np.log(1 - p)).mean()
        assert meta["bayes_logloss"][s] == pytest.approx(h, rel=1e-9)
        assert read_meta(d)["bayes_logloss"][s] == pytest.approx(h, rel=1e-9)


def test_labels_are_bernoulli_of_p_true(criteo):
    d, _ = criteo
    t = pa.concat_tables([_split(d, s) for s in SPLITS])
    y, p = t.column("label").to_numpy(), t.column("p_true").to_numpy()
    assert set(np.unique(y)) == {0.0, 1.0}
    # in each p_true decile the click count is a sum of independent Bernoulli(p): mean sum p, var sum p(1-p)
    edges = np.quantile(p, np.linspace(0, 1, 11))
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (p >= lo) & (p <= hi)
        assert abs(y[m].sum() - p[m].sum()) < 4.5 * math.sqrt((p[m] * (1 - p[m])).sum())


def test_split_is_8_1_1_and_ctr_is_calibrated(criteo):
    d, meta = criteo
    rows = {s: meta["splits"][s]["rows"] for s in SPLITS}
    n = sum(rows.values())
    assert n == 30_000
    for s, share in zip(SPLITS, (0.8, 0.1, 0.1)):
        assert abs(rows[s] - share * n) < 4.5 * math.sqrt(n * share * (1 - share))
        ctr = _split(d, s).column("label").to_numpy().astype(np.float64).mean()
        assert meta["splits"][s]["ctr"] == pytest.approx(ctr, rel=1e-12)
    p = pa.concat_tables([_split(d, s) for s in SPLITS]).column("p_true").to_numpy()
    assert p.mean() == pytest.approx(PROFILES["criteo"].ctr, abs=0.015)  # bias fitted on its own sample


def test_same_seed_same_rows_whatever_rows_per_shard(tmp_path, criteo):
    d, _ = criteo
    generate("criteo", 30_000, seed=7, out=tmp_path / "a", rows_per_shard=1_000_000, **FAST)
    generate("criteo", 30_000, seed=8, out=tmp_path / "b", rows_per_shard=1_000_000, **FAST)
    assert len(split_files(d, "train")) > 1 and len(split_files(tmp_path / "a", "train")) == 1
    for s in SPLITS:
        assert _split(d, s).equals(_split(tmp_path / "a", s))
    assert not _split(d, "train").slice(0, 100).equals(_split(tmp_path / "b", "train").slice(0, 100))


def test_smaller_dataset_is_a_prefix_of_a_larger_one(tmp_path, criteo):
    d, _ = criteo
    generate("criteo", 10_001, seed=7, out=tmp_path, **FAST)
    for s in SPLITS:
        small = _split(tmp_path, s)
        assert small.equals(_split(d, s).slice(0, small.num_rows))


def test_schema_shapes_and_value_ranges(tmp_path):
    shapes = {"criteo": (13, 26, 0.256), "avazu": (1, 22, 0.17), "kdd2012": (3, 10, 0.04)}
    for name, (nd, ns, ctr) in shapes.items():
        meta = generate(name, 3_000, seed=1, out=tmp_path / name, cardinality_cap=500, **FAST)
        sch = load_schema(tmp_path / name)
        assert (sch.dense_dim, len(sch.sparse)) == (nd, ns)
        assert all(2 <= c <= 500 for c in sch.cardinalities)
        assert meta["settings"]["cardinality_cap"] == 500 and meta["source"]["profile"] == name
        t = _split(tmp_path / name, "train")
        assert t.schema.field("label").type == pa.float32() and t.schema.field("p_true").type == pa.float64()
        for f in sch.sparse:
            ids = t.column(f.name).to_numpy()
            assert t.schema.field(f.name).type == pa.int64() and ids.min() >= 0 and ids.max() < f.cardinality
        for c in sch.dense:
            x = t.column(c).to_numpy()
            assert t.schema.field(c).type == pa.float32() and x.min() >= 0
            raw = np.expm1(x.astype(np.float64))
            assert np.allclose(raw, np.round(raw), rtol=1e-5, atol=1e-3)  # log1p of integer counts
    avazu = _split(tmp_path / "avazu", "train").column("dense_0").to_numpy()
    assert (avazu == 0).all()  # NASRec's pseudo dense feature
    t = _split(tmp_path / "kdd2012", "train")
    depth = np.round(np.expm1(t.column("Depth").to_numpy().astype(np.float64)))
    assert set(np.unique(depth)) <= {1.0, 2.0, 3.0}


def test_zipf_head_frequency_and_slope(tmp_path):
    n, card, s = 40_000, 2_001, 1.05  # criteo C1 has zipf 1.05 and no missing values
    generate("criteo", n, seed=3, out=tmp_path, cardinality_cap=card, **FAST)
    t = pa.concat_tables([_split(tmp_path, x) for x in SPLITS])
    counts = np.sort(np.bincount(t.column("C1").to_numpy()))[::-1]
    h = (np.arange(1, card, dtype=float) ** -s).sum()  # Zipf over ids 1..card-1
    p1 = 1 / h
    assert abs(counts[0] - n * p1) < 4.5 * math.sqrt(n * p1 * (1 - p1))
    r = np.arange(1, 31)
    slope = np.polyfit(np.log(r), np.log(counts[:30]), 1)[0]
    assert slope == pytest.approx(-s, abs=0.2)


def test_missing_rates_follow_the_profile(criteo):
    d, _ = criteo
    t = pa.concat_tables([_split(d, x) for x in SPLITS])
    n = t.num_rows
    c22 = (t.column("C22").to_numpy() == 0).mean()  # Criteo C22 is missing in 76% of rows
    assert abs(c22 - 0.76) < 4.5 * math.sqrt(0.76 * 0.24 / n)
    assert (t.column("C1").to_numpy() > 0).all()
    # I1 = 0 when missing (45%) or when floor(exp(N(ln 1, 1.3))) = 0, i.e. with probability Phi(0) = 1/2
    spec = PROFILES["criteo"].dense[0]
    q = spec.missing + (1 - spec.missing) * norm.cdf(-spec.log_median / spec.sigma)
    zero = (t.column("I1").to_numpy() == 0).mean()
    assert abs(zero - q) < 4.5 * math.sqrt(q * (1 - q) / n)


def test_heavy_tailed_counts(criteo):
    d, _ = criteo
    x = np.expm1(_split(d, "train").column("I5").to_numpy().astype(np.float64))
    x = x[x > 0]
    assert np.quantile(x, 0.99) / np.median(x) > 20  # lognormal sigma 1.6: q99/q50 = exp(2.33*1.6) ~ 41


def test_component_variances_match_their_target_scales(tmp_path):
    meta = generate("criteo", 20_000, seed=2, out=tmp_path, first_order=1.0, pairwise=0.6, triple=0.0, mlp=0.3,
                    gate=0.0, dense=0.4, **FAST)
    var = meta["click_model"]["component_variance"]
    for c, sd in {"first_order": 1.0, "pairwise": 0.6, "mlp": 0.3, "dense": 0.4}.items():
        assert var[c] == pytest.approx(sd**2, rel=0.15)  # scaled on a separate calibration sample
    assert var["triple"] == 0 and var["gate"] == 0
    p = pa.concat_tables([_split(tmp_path, x) for x in SPLITS]).column("p_true").to_numpy()
    logit = np.log(p) - np.log1p(-p)
    assert meta["click_model"]["logit_variance"] == pytest.approx(logit.var(), rel=1e-6)


def test_model_seed_keeps_the_click_model_and_redraws_rows(tmp_path):
    a = generate("avazu", 2_000, seed=1, out=tmp_path / "a", **FAST)
    b = generate("avazu", 2_000, seed=2, out=tmp_path / "b", model_seed=1, **FAST)
    ma, mb = a["click_model"], b["click_model"]
    assert ma["bias"] == mb["bias"] and ma["pairs"] == mb["pairs"] and ma["triples"] == mb["triples"]
    assert not _split(tmp_path / "a", "train").equals(_split(tmp_path / "b", "train"))


def test_bad_settings_are_named(tmp_path):
    with pytest.raises(RecipeError, match="pairwise_scale"):
        generate("criteo", 10, seed=0, out=tmp_path, pairwise_scale=1.0)
    with pytest.raises(RecipeError, match="rank"):
        generate("criteo", 10, seed=0, out=tmp_path, rank="4")
    with pytest.raises(CtrnasError, match="profile"):
        generate("movielens", 10, seed=0, out=tmp_path)


def test_p_true_is_sigmoid_of_bias_plus_components_on_constant_model(tmp_path):
    meta = generate("kdd2012", 3_000, seed=4, out=tmp_path, first_order=0.0, dense=0.0, pairwise=0.0, triple=0.0,
                    mlp=0.0, gate=0.0, ctr=0.1, **FAST)
    p = _split(tmp_path, "train").column("p_true").to_numpy()
    assert np.allclose(p, 0.1) and np.allclose(p, expit(meta["click_model"]["bias"]))
    assert meta["bayes_logloss"]["train"] == pytest.approx(-(0.1 * math.log(0.1) + 0.9 * math.log(0.9)))


def _one_hot_r2(d, names) -> float:
    """R^2 of the best additive fit (one weight per field value) to logit(p_true), by least squares."""
    t = pa.concat_tables([_split(d, s) for s in SPLITS])
    p = t.column("p_true").to_numpy()
    z = np.log(p) - np.log1p(-p)
    cols = [np.ones(len(z))]
    for n in names:
        ids = t.column(n).to_numpy()
        cols += [(ids == v).astype(float) for v in np.unique(ids)[1:]]
    x = np.stack(cols, 1)
    resid = z - x @ np.linalg.lstsq(x, z, rcond=None)[0]
    return 1 - resid.var() / z.var()


def test_first_order_model_is_additive_and_interactions_are_not(tmp_path):
    off = dict(dense=0.0, triple=0.0, mlp=0.0, gate=0.0, cardinality_cap=12, **FAST)
    generate("kdd2012", 6_000, seed=5, out=tmp_path / "lr", pairwise=0.0, **off)
    generate("kdd2012", 6_000, seed=5, out=tmp_path / "fm", pairwise=1.0, **off)
    names = load_schema(tmp_path / "lr").sparse_names
    assert _one_hot_r2(tmp_path / "lr", names) == pytest.approx(1.0, abs=1e-9)
    assert _one_hot_r2(tmp_path / "fm", names) < 0.9  # pairwise effects: no additive model explains them
