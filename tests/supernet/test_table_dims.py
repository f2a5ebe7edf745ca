"""Per-table embedding widths (`Arch.table_dims`): the supernet path, the export, the files and the
space's sampling and mutation, checked against TorchRec's own tables and hand counts."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrec.modules.embedding_modules import EmbeddingBagCollection

from ctrnas.errors import ArchValidationError, RecipeError
from ctrnas.space import Arch, get_space
from ctrnas.supernet import Supernet, embedding_bytes, export
from ctrnas.supernet.io import load_exported, save_exported
from ctrnas.supernet.testing import make_batch, make_schema

ROOT = Path(__file__).resolve().parents[2]
SPACE = {"base": "ctrnas-small", "num_blocks": 3, "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3],
         "merge_tokens": 2, "table_dims": [0, 2, 4, 8]}
CARDS = (50, 7, 30, 11)
WIDTHS = {"C0": 2, "C1": 0, "C3": 4}  # C2 keeps the common width 8


@pytest.fixture
def net():
    torch.manual_seed(0)
    return Supernet(make_schema(cards=CARDS), SPACE, emb_dim=8)


def _arch(net, seed=1, tables=WIDTHS):
    arch = net.space.sample(np.random.default_rng(seed))
    return dataclasses.replace(arch, table_dims=tuple(sorted(tables.items())))


def test_supernet_fills_fields_and_common_width_from_the_data(net):
    assert net.space.config.tables == ("C0", "C1", "C2", "C3")
    assert net.space.config.emb_dim == 8


def test_exported_tables_have_the_arch_widths_and_equal_the_supernet_path(net):
    arch = _arch(net)
    dense, kjt, _ = make_batch(net.schema, batch=16, seed=3)
    model = export(net, arch, init="inherit")
    bags = model.stem.ebc.embedding_bags
    assert sorted(bags) == ["t_C0", "t_C2", "t_C3"]  # width 0: no table at all
    assert [bags[f"t_{n}"].weight.shape[1] for n in ("C0", "C2", "C3")] == [2, 8, 4]
    assert isinstance(model.stem.ebc, EmbeddingBagCollection)
    # the narrow tables hold the first columns of the supernet's tables
    for n, w in (("C0", 2), ("C3", 4)):
        assert torch.equal(bags[f"t_{n}"].weight, net.stem.ebc.embedding_bags[f"t_{n}"].weight[:, :w])
    with torch.no_grad():
        tokens = model.stem(kjt)
        # a narrow field's token is its TorchRec lookup zero-padded; a dropped field's token is zero
        lookup = net.stem.ebc(kjt).to_dict()
        assert torch.equal(tokens[:, 0, :2], lookup["C0"][:, :2]) and not tokens[:, 0, 2:].any()
        assert not tokens[:, 1].any()
        assert torch.equal(tokens[:, 2], lookup["C2"])
        torch.testing.assert_close(model(dense, kjt), net(dense, kjt, arch), rtol=0, atol=1e-6)


def test_dropped_field_ids_are_read_and_ignored(net):
    arch = _arch(net)
    model = export(net, arch, init="fresh", seed=2)
    dense, kjt, _ = make_batch(net.schema, batch=8, seed=4)
    values = kjt.values().clone()
    off = kjt.offset_per_key()
    values[off[1]:off[2]] = (values[off[1]:off[2]] + 3) % CARDS[1]  # other ids of the dropped field C1
    other = type(kjt)(keys=kjt.keys(), values=values, lengths=kjt.lengths())
    with torch.no_grad():
        assert torch.equal(model(dense, kjt), model(dense, other))
        values[off[0]:off[1]] = (values[off[0]:off[1]] + 1) % CARDS[0]  # a kept field's ids do matter
        changed = type(kjt)(keys=kjt.keys(), values=values, lengths=kjt.lengths())
        assert not torch.equal(model(dense, kjt), model(dense, changed))


def test_trains_saves_and_serves_the_same_logits(net, tmp_path):
    arch = _arch(net)
    model = export(net, arch, init="fresh", seed=0)
    model.stem.use_sparse_gradients()
    dense, kjt, labels = make_batch(net.schema, batch=32, seed=5)
    emb = torch.optim.SGD(model.stem.embedding_parameters(), lr=0.5)
    opt = torch.optim.Adam(model.net.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, kjt), labels)
        emb.zero_grad(), opt.zero_grad()
        loss.backward()
        emb.step(), opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05
    card = save_exported(model, tmp_path / "m", init="fresh+trained")
    assert card["embedding_bytes"] == 4 * (CARDS[0] * 2 + CARDS[2] * 8 + CARDS[3] * 4)
    assert card["dropped_fields"] == ["C1"]
    assert card["params_embedding"] * 4 == card["embedding_bytes"]
    back = load_exported(tmp_path / "m")
    assert back.arch == arch
    ids = torch.stack([kjt.to_dict()[n].values() for n in net.schema.sparse_names], dim=1)
    served = torch.export.load(str(tmp_path / "m" / "model.pt2")).module()
    with torch.no_grad():
        want = model(dense, kjt)
        torch.testing.assert_close(back(dense, kjt), want, rtol=0, atol=1e-6)
        assert served(dense, ids).shape == (32,)  # the artifact still takes every field's ids
        torch.testing.assert_close(served(dense, ids), torch.sigmoid(want), rtol=0, atol=1e-6)


def test_embedding_bytes_counts_rows_times_widths(net):
    arch = _arch(net)
    want = 4 * (50 * 2 + 7 * 0 + 30 * 8 + 11 * 4)
    assert embedding_bytes(net.schema, arch, 8) == want
    assert embedding_bytes(net.schema, arch, 8, row_cap=10) == 4 * (10 * 2 + 10 * 8 + 10 * 4)
    plain = dataclasses.replace(arch, table_dims=())
    assert embedding_bytes(net.schema, plain, 8) == 4 * 8 * sum(CARDS)
    assert export(net, arch, init="fresh").stem.embedding_bytes() == want


def test_sampling_draws_each_field_from_the_choices_and_is_seeded(net):
    space = net.space
    a, b = space.sample(np.random.default_rng(7)), space.sample(np.random.default_rng(7))
    assert a == b
    seen = set()
    for s in range(40):
        arch = space.sample(np.random.default_rng(s))
        widths = [arch.table_width(n, 8) for n in space.config.tables]
        assert set(widths) <= {0, 2, 4, 8} and any(widths)
        assert all(w != 8 for _, w in arch.table_dims)  # the common width is left out: one form per network
        seen.update(widths)
    assert seen == {0, 2, 4, 8}


@pytest.mark.parametrize("local", [True, False])
def test_a_table_move_changes_one_field_by_one_step(net, local):
    space, options = net.space, [0, 2, 4, 8]
    arch = _arch(net)
    moved = 0
    for s in range(200):
        out = (space.mutate_local if local else space.mutate)(arch, np.random.default_rng(s))
        before = {n: arch.table_width(n, 8) for n in space.config.tables}
        after = {n: out.table_width(n, 8) for n in space.config.tables}
        changed = [n for n in before if before[n] != after[n]]
        if changed:
            moved += 1
            assert len(changed) == 1 and out.blocks == arch.blocks
            n = changed[0]
            assert abs(options.index(after[n]) - options.index(before[n])) == 1
    assert 20 < moved < 180  # table moves happen, and so do the others


def test_older_arch_files_load_unchanged():
    for path in sorted((ROOT / "ctrnas" / "space" / "archs").glob("*.json")):
        data = json.loads(path.read_text())
        arch = Arch.from_json(data)
        assert arch.table_dims == () and "table_dims" not in arch.to_json()
        assert arch.to_json() == data
        assert dataclasses.replace(arch, table_dims=(("C0", 4),)).key() != arch.key()


def test_json_round_trip_and_errors(net):
    arch = _arch(net)
    assert Arch.from_json(arch.dumps()) == arch and arch.to_json()["table_dims"] == WIDTHS
    bad = arch.to_json()
    bad["table_dims"] = {"C0": -1}
    with pytest.raises(ArchValidationError, match="table_dims"):
        Arch.from_json(bad)
    with pytest.raises(ArchValidationError, match="table_dims.C9"):
        net(*make_batch(net.schema)[:2], _arch(net, tables={"C9": 4}))
    with pytest.raises(ArchValidationError, match="table_dims.C0"):
        net.space.validate(_arch(net, tables={"C0": 3}))
    with pytest.raises(ArchValidationError, match="drops every sparse field"):
        net(*make_batch(net.schema)[:2], _arch(net, tables={n: 0 for n in ("C0", "C1", "C2", "C3")}))
    plain = get_space({"base": "ctrnas-small", "num_blocks": 3})
    with pytest.raises(ArchValidationError, match="searches no table"):
        plain.validate(dataclasses.replace(plain.sample(np.random.default_rng(0)), table_dims=(("C0", 4),)))
    with pytest.raises(RecipeError, match="above every common width"):
        Supernet(make_schema(cards=CARDS), SPACE, emb_dim=4)
    with pytest.raises(RecipeError, match="not sparse fields"):
        Supernet(make_schema(cards=CARDS), {**SPACE, "tables": ["C7"]}, emb_dim=8)


def test_with_emb_dims_an_arch_chooses_its_common_width_and_its_tables_fit_it():
    """`emb_dims` beside `table_dims`: the ops run at the arch's own common width (a narrow arch is narrow all
    through, for throughput), and every table fits it, through sampling, mutation and export."""
    torch.manual_seed(0)
    net = Supernet(make_schema(cards=CARDS), {**SPACE, "emb_dims": [4, 8]}, emb_dim=8)
    space = net.space
    for s in range(30):
        arch = space.sample(np.random.default_rng(s))
        common = space.common_width(arch)
        assert all(arch.table_width(n, common) <= common for n in space.config.tables)
        for m in range(5):
            arch = space.mutate(arch, np.random.default_rng(100 * s + m))
            common = space.common_width(arch)
            assert all(0 <= w < common for _, w in arch.table_dims)  # the common width is left out
    wide = _arch(net, tables={"C0": 2, "C1": 0, "C3": 8})
    narrow = space._at_emb_dim(wide, 4)  # C3 (8) no longer fits: it takes the common width 4
    assert narrow.emb_dim == 4 and dict(narrow.table_dims) == {"C0": 2, "C1": 0}
    assert space.narrower(wide, 4).emb_dim == 4 and space.narrower(wide, 2).table_width("C2", 8) == 2
    model = export(net, narrow, init="fresh", seed=1)
    assert model.stem.dim == 4 and model.stem.widths == [2, 0, 4, 4]
    dense, kjt, _ = make_batch(net.schema, batch=8, seed=2)
    assert model(dense, kjt).shape == (8,)
    assert model.stem.embedding_bytes() == embedding_bytes(net.schema, narrow, 8) == 4 * (50 * 2 + 30 * 4 + 11 * 4)
