"""The embedding width as a choice of the arch (`Arch.emb_dim`, `SpaceConfig.emb_dims`): JSON and key()
unchanged without it, sampling and mutation unchanged in spaces without a choice, uniform draws with one,
and exported models / analytic counts at the arch's own width."""

import dataclasses
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from ctrnas.errors import ArchValidationError, RecipeError
from ctrnas.space import PRESETS, Arch, get_space
from ctrnas.space.baselines import ARCH_DIR, baseline_arch
from ctrnas.supernet import Supernet, count_params, export
from ctrnas.supernet.fresh import build_supernet
from ctrnas.supernet.testing import make_schema
from ctrnas.train.baselines import build_baseline

DIMS = (16, 32, 64)


def _space(**kw):
    return get_space({"base": "ctrnas-small", "emb_dims": list(DIMS), **kw})


def test_json_round_trip_with_and_without_emb_dim():
    arch = baseline_arch("dcnv2-like")
    assert arch.emb_dim is None and "emb_dim" not in arch.to_json()
    wide = dataclasses.replace(arch, emb_dim=32)
    assert wide.to_json()["emb_dim"] == 32
    assert Arch.from_json(wide.dumps()) == wide
    assert Arch.from_json(json.dumps(arch.to_json())) == arch


def test_an_arch_file_without_the_key_keeps_its_key():
    text = (Path(ARCH_DIR) / "dcnv2-like.json").read_text()
    assert "emb_dim" not in text
    arch = Arch.from_json(text)
    assert arch.emb_dim is None
    assert arch.key() == "0d8a1b6245f95b84"  # computed on main before Arch had emb_dim
    assert arch.key() == dataclasses.replace(arch, emb_dim=None).key() == Arch(arch.blocks).key()
    assert dataclasses.replace(arch, emb_dim=32).key() != arch.key()
    assert dataclasses.replace(arch, emb_dim=32).key() != dataclasses.replace(arch, emb_dim=64).key()


@pytest.mark.parametrize("bad", [0, -16, 16.0, "32", True])
def test_from_json_rejects_a_bad_emb_dim(bad):
    data = baseline_arch("dlrm-like").to_json() | {"emb_dim": bad}
    with pytest.raises(ArchValidationError, match="emb_dim.*positive integer"):
        Arch.from_json(data)


def test_validate_names_the_field():
    arch = baseline_arch("dlrm-like")
    _space().validate(dataclasses.replace(arch, emb_dim=64))
    with pytest.raises(ArchValidationError, match=r"emb_dim.*one of \[16, 32, 64\]"):
        _space().validate(dataclasses.replace(arch, emb_dim=48))
    with pytest.raises(ArchValidationError, match="emb_dim.*no space.emb_dims"):
        get_space("ctrnas-small").validate(dataclasses.replace(arch, emb_dim=32))


def test_space_config_checks_the_widths():
    with pytest.raises(RecipeError, match="emb_dims"):
        _space(emb_dims=[16, 0])
    with pytest.raises(RecipeError, match="emb_dims.*attention_heads=8"):
        get_space({"base": "ctrnas-full", "emb_dims": [16, 12]})
    get_space({"base": "ctrnas-small", "emb_dims": [12]})  # no attention: any width


@pytest.mark.parametrize("preset", ["nasrec-small", "nasrec-full", "ctrnas-small"])
def test_without_emb_dims_sampling_and_mutation_are_unchanged(preset):
    """A space with `emb_dims: []` set explicitly draws exactly the preset's archs (no extra rng draws)."""
    base, same = get_space(preset), get_space({"base": preset, "emb_dims": []})
    for seed in range(4):
        r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
        a, b = base.sample(r1), same.sample(r2)
        assert a == b and b.emb_dim is None
        for _ in range(5):
            a, b = base.mutate(a, r1), same.mutate(b, r2)
            assert a == b and b.emb_dim is None


def test_with_emb_dims_the_blocks_are_drawn_as_before_and_the_width_uniformly():
    space, plain = _space(), get_space("ctrnas-small")
    counts = Counter()
    for seed in range(300):
        arch = space.sample(np.random.default_rng(seed))
        assert arch.blocks == plain.sample(np.random.default_rng(seed)).blocks  # the width is drawn last
        counts[arch.emb_dim] += 1
    assert set(counts) == set(DIMS)
    # chi-square with 2 degrees of freedom; 13.8 is its 0.1% tail
    chi2 = sum((counts[d] - 100) ** 2 / 100 for d in DIMS)
    assert chi2 < 13.8, counts


def test_mutation_moves_the_width_to_the_other_values():
    space = _space()
    rng = np.random.default_rng(0)
    seen = Counter()
    for arch in (baseline_arch("dcnv2-like"), dataclasses.replace(baseline_arch("dcnv2-like"), emb_dim=32)):
        for _ in range(600):
            child = space.mutate(arch, rng)
            if child.emb_dim != arch.emb_dim:
                assert child.blocks == arch.blocks  # exactly one choice changed
                # None is the space's width (16): a move goes elsewhere
                assert child.emb_dim != (arch.emb_dim or PRESETS["ctrnas-small"].emb_dim)
                seen[(arch.emb_dim, child.emb_dim)] += 1
            else:
                assert child.blocks != arch.blocks
    assert {k for k in seen if k[0] is None} == {(None, 32), (None, 64)}
    assert {k for k in seen if k[0] == 32} == {(32, 16), (32, 64)}
    # as likely as re-drawing one micro field (0.5 / 8 in ctrnas-small): about 37 of 600
    assert 10 < seen[(None, 32)] + seen[(None, 64)] < 80


def _n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_dcnv2_like_at_32_exports_the_dcnv2_baseline_at_32():
    schema = make_schema(n_dense=13, cards=(60,) * 26)
    config = dataclasses.replace(_space().config, layernorm=False)
    net = build_supernet(schema, config, None, row_cap=50, drawn=False)  # the run's width: 16; fresh exports only
    arch = dataclasses.replace(baseline_arch("dcnv2-like"), emb_dim=32)
    model = export(net, arch, init="fresh", seed=2)
    assert {m.weight.shape[1] for m in model.stem.ebc.embedding_bags.values()} == {32}
    assert _n_params(model) == _n_params(build_baseline("dcnv2", schema, dim=32, row_cap=50))
    assert _n_params(model) != _n_params(build_baseline("dcnv2", schema, dim=16, row_cap=50))
    assert count_params(schema, config, arch, emb_dim=16, include_embeddings=True, row_cap=50) == _n_params(model)
    # the same model, weight for weight, as one exported from a supernet built at 32
    wide = export(Supernet(schema, config, emb_dim=32, row_cap=50), arch, init="fresh", seed=2)
    mine, theirs = dict(model.state_dict()), dict(wide.state_dict())
    assert mine.keys() == theirs.keys()
    for k in mine:
        torch.testing.assert_close(mine[k], theirs[k], atol=0, rtol=0)
    assert net.emb_dim == 16 and all(p.shape[1] == 16 for p in net.stem.embedding_parameters())


def test_the_weight_sharing_path_refuses_another_width():
    schema = make_schema(n_dense=4, cards=(9, 30, 7))
    net = build_supernet(schema, _space().config, None, drawn=False)
    arch = dataclasses.replace(baseline_arch("dlrm-like"), emb_dim=32)
    with pytest.raises(ArchValidationError, match="emb_dim.*16 wide"):
        net.indexed(arch)
    with pytest.raises(ArchValidationError, match="emb_dim.*fresh weights"):
        export(net, arch, init="inherit")
    net.indexed(dataclasses.replace(arch, emb_dim=16))  # its own width is fine
