"""benchmarks/oracle.py: the click model's own form can hold the generator's exact logit, and it trains."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.data.synthetic import build, make_settings, structure_overrides
from ctrnas.data.synthetic_profiles import STRUCTURES


def _oracle():
    from tests.helpers.bench_scripts import load_script

    return load_script("oracle")


def _inputs(features, ids, dense):
    prof = features.profile
    schema = DatasetSchema("label", tuple(d.name for d in prof.dense),
                           tuple(SparseFeature(s.name, c) for s, c in zip(prof.sparse, features.cards)))
    kjt = KeyedJaggedTensor.from_lengths_sync(keys=list(schema.sparse_names),
                                              values=torch.as_tensor(ids.T.reshape(-1)),
                                              lengths=torch.ones(ids.size, dtype=torch.int32))
    return schema, torch.as_tensor(dense), kjt


@pytest.mark.parametrize("shape,structure", [("kdd2012", s) for s in STRUCTURES] + [("avazu", "pairwise")])
def test_oracle_form_with_the_true_parameters_is_the_generators_logit(shape, structure):
    settings = make_settings(**{**structure_overrides(structure), "cardinality_cap": 500, "calibration_rows": 4000})
    features, click = build(shape, 3, settings)
    ids, dense = features.sample(np.random.default_rng(0), 300)
    truth = click.bias + sum(click.components(ids, dense).values())
    schema, d, kjt = _inputs(features, ids, dense)
    model = _oracle().OracleForm(schema, click)
    assert model.on == {c for c, v in click.scale.items() if v > 0}
    out = model(d, kjt).detach()
    assert not np.allclose(out.numpy(), truth, atol=1e-2)  # random tables: not the truth
    model.load_truth(click)
    np.testing.assert_allclose(model(d, kjt).detach().numpy(), truth, rtol=1e-4, atol=2e-4)


def test_oracle_form_options_widen_and_drop_components():
    settings = make_settings(**{**structure_overrides("dense-gates"), "cardinality_cap": 500, "calibration_rows": 4000})
    features, click = build("kdd2012", 1, settings)
    ids, dense = features.sample(np.random.default_rng(0), 50)
    schema, d, kjt = _inputs(features, ids, dense)
    oracle = _oracle()
    wide = oracle.OracleForm(schema, click, rank=16, drop=("gate",))
    assert "gate" not in wide.on and "dense_cat" in wide.on and wide.d.stem.dim == 16
    assert wide(d, kjt).shape == (50,)
    with pytest.raises(ValueError, match="width 4"):
        wide.load_truth(click)  # the truth has the generator's width only
    shared = oracle.OracleForm(schema, click, shared=True)
    assert shared.d is shared.v  # one table set for every term
    with pytest.raises(ValueError, match="shared"):
        shared.load_truth(click)


def test_oracle_form_learns_and_reports_against_the_baselines(tmp_path, capsys):
    oracle = _oracle()
    out = tmp_path / "out"
    settings = "data.synthetic.settings={chunk_rows: 8192, calibration_rows: 8192, cardinality_cap: 2000}"
    suite = oracle.suite
    assert suite.main(["--rows", "20000", "--profiles", "kdd2012-dense-gates", "--methods", "baselines",
                       "--baselines", "lr", "--seeds", "2", "--out", str(out), "--section", str(tmp_path / "s.md"),
                       "--set", settings]) == 0
    with pytest.raises(SystemExit):
        oracle.main(["--drop", "gates", "--report-only", "--out", str(out), "--section", str(tmp_path / "x.md")])
    argv = ["--rows", "20000", "--profiles", "kdd2012-dense-gates", "--out", str(out), "--section",
            str(tmp_path / "o.md"), "--set", settings, "--probes", "dlrm+fm"]
    assert oracle.main(argv) == 0
    cache = suite.Cache(type("A", (), {"out": out})(), "kdd2012-dense-gates").data
    lr = [r["test"] for k, r in cache.items() if k.startswith("baseline:lr@")]
    orc = [r for k, r in cache.items() if k.startswith("oracle:")]
    assert len(lr) == 2 and len(orc) == 2 and {r["seed"] for r in orc} == {0, 1}
    assert "gate" in orc[0]["components"] and "dense_cat" in orc[0]["components"]
    bayes = suite._truth(type("A", (), {"out": out})(), "kdd2012-dense-gates")["bayes"]
    assert all(bayes < r["test"] for r in orc)
    text = (tmp_path / "o.md").read_text()
    assert "| kdd2012-dense-gates |" in text and "| lr " in text
    tests = [r["test"] for r in orc]  # the form against LR in units of their sds together, by hand
    margin, pair = np.mean(tests) - np.mean(lr), np.hypot(np.std(lr, ddof=1), np.std(tests, ddof=1))
    row = next(line for line in text.splitlines() if line.startswith("| kdd2012-dense-gates | 0."))
    assert row.split(" | ")[6] == f"{margin / pair:+.1f}"
    probes = sorted(r["seed"] for k, r in cache.items() if k.startswith("probe:dlrm+fm@"))
    assert probes == [0, 1] and "| kdd2012-dense-gates | dlrm+fm |" in text
    capsys.readouterr()
    assert oracle.main(argv) == 0  # cached: nothing trains again
    assert "seed" not in capsys.readouterr().out.split("## Room")[0]


def _dense_gates_batch(rows: int, seed: int):
    """(schema, dense, kjt) of `rows` examples of a small dense-gates click model."""
    settings = make_settings(**{**structure_overrides("dense-gates"), "cardinality_cap": 300, "calibration_rows": 2000})
    features, _ = build("kdd2012", 2, settings)
    ids, dense = features.sample(np.random.default_rng(seed), rows)
    return _inputs(features, ids, dense)


def test_probes_build_two_table_sets_and_train_through_the_same_forward():
    oracle = _oracle()
    schema, d, kjt = _dense_gates_batch(40, 0)
    from ctrnas.train.trainer import split_parameters

    for name in oracle.PROBES:
        model = oracle._probe(name, schema, None, seed=0)
        assert model(d, kjt).shape == (40,)
        tables, _ = split_parameters(model)
        per_field = len(tables) // len(schema.sparse)
        # two table sets (plus the first-order tables) unless shared or a single model
        want = {"xdeepfm-32": 2, "xdeepfm~std0.02": 2}.get(name, 2 if "shared" in name else 3)
        assert per_field == want, (name, per_field)
        if name.endswith("~std0.02"):  # vector tables redrawn at N(0, 0.02); first-order weights as built
            vectors = torch.cat([w.flatten() for w in tables if w.shape[1] > 1])
            assert abs(vectors.std().item() - 0.02) < 0.002 and abs(vectors.mean().item()) < 0.002


def test_fwfm_is_fm_at_unit_pair_weights_and_weighs_each_pair():
    oracle = _oracle()
    from ctrnas.train.baselines.common import fm_interaction

    schema, d, kjt = _dense_gates_batch(16, 1)
    torch.manual_seed(0)
    m = oracle._FwFM(schema, 4, None)
    v = m.stem(kjt)
    with torch.no_grad():
        torch.testing.assert_close(m(d, kjt), m.linear(d, kjt) + fm_interaction(v))  # r = 1: FM (Rendle Eq. 5)
        m.r.zero_()
        m.r[1] = 2.5  # pairs in row-major upper-triangle order: the second is fields (0, 2)
        torch.testing.assert_close(m(d, kjt), m.linear(d, kjt) + 2.5 * (v[:, 0] * v[:, 2]).sum(1))
