"""The first-order term (`Arch.first_order`): one 1-wide EmbeddingStem whose per-id scalars are summed into the
logit, in the supernet path, the exported model (inherit and fresh), its files and model.pt2, and the counts."""

import dataclasses

import numpy as np
import pytest
import torch

from ctrnas.space import get_space
from ctrnas.supernet import Supernet, count_params, embedding_bytes, export
from ctrnas.supernet.io import load_exported, save_exported
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.supernet.testing import make_batch, make_schema
from ctrnas.train.trainer import split_parameters

CARDS = (50, 7, 30, 11)
SPACE = {"base": "ctrnas-small", "num_blocks": 3, "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3],
         "merge_tokens": 2, "first_order": [False, True]}


def _net(space=SPACE, row_cap=None):
    torch.manual_seed(0)
    return Supernet(make_schema(cards=CARDS), space, emb_dim=8, row_cap=row_cap).eval()


def _arch(net, seed=1, on=True):
    return dataclasses.replace(net.space.sample(np.random.default_rng(seed)), first_order=on)


def _by_hand(table_of, kjt, names, rows=None) -> torch.Tensor:
    """sum_f w_f[id_f], read off the tables with plain indexing (ids folded by `rows` when capped)."""
    ids = kjt.to_dict()
    out = 0
    for i, n in enumerate(names):
        v = ids[n].values() % rows[i] if rows else ids[n].values()
        out = out + table_of(n)[v, 0]
    return out


def test_a_space_without_the_choice_builds_no_first_order_tables():
    plain = _net({k: v for k, v in SPACE.items() if k != "first_order"})
    assert plain.first_order is None
    assert _net().first_order.dim == 1 and _net().first_order.rows == list(CARDS)


def test_supernet_path_adds_the_per_id_weights_and_the_export_equals_it():
    net = _net()
    dense, kjt, _ = make_batch(net.schema, batch=16, seed=3)
    on = _arch(net)
    off = dataclasses.replace(on, first_order=False)
    bags = net.first_order.ebc.embedding_bags
    with torch.no_grad():
        bags["t_C1"].weight.normal_()  # not zero, so the term shows
        want = _by_hand(lambda n: bags[f"t_{n}"].weight, kjt, net.schema.sparse_names)
        torch.testing.assert_close(net(dense, kjt, on) - net(dense, kjt, off), want, rtol=0, atol=1e-5)
        model = export(net, on, init="inherit")
        assert model.first_order is not None and model.first_order is not net.first_order
        torch.testing.assert_close(model(dense, kjt), net(dense, kjt, on), rtol=0, atol=1e-6)
        assert export(net, off).first_order is None
        fresh = export(net, on, init="fresh", seed=4)
        fbags = fresh.first_order.ebc.embedding_bags
        assert not torch.equal(fbags["t_C0"].weight, bags["t_C0"].weight)  # re-drawn
        body = fresh.net(dense, fresh.stem(kjt))
        by_hand = _by_hand(lambda n: fbags[f"t_{n}"].weight, kjt, net.schema.sparse_names)
        torch.testing.assert_close(fresh(dense, kjt), body + by_hand, rtol=0, atol=1e-6)
        # the fresh model's weights put into the supernet give the supernet path the same logits
        net.stem.load_state_dict(fresh.stem.state_dict())
        net.first_order.load_state_dict(fresh.first_order.state_dict())
        again = export(net, on, init="inherit")
        again.net.load_state_dict(fresh.net.state_dict())
        torch.testing.assert_close(again(dense, kjt), fresh(dense, kjt), rtol=0, atol=1e-6)


def test_subnet_view_and_trainer_see_the_first_order_tables():
    net = _net()
    on = _arch(net)
    assert net.subnet(on).first_order is net.first_order
    model = export(net, on, init="fresh")
    emb, dense = split_parameters(model)
    weights = {id(p) for p in model.first_order.embedding_parameters()}
    assert weights <= {id(p) for p in emb} and not weights & {id(p) for p in dense}


def test_a_dropped_field_has_no_first_order_weight():
    net = _net({**SPACE, "table_dims": [0, 4, 8]})
    on = dataclasses.replace(_arch(net), table_dims=(("C1", 0),))
    model = export(net, on, init="inherit")
    assert sorted(model.first_order.ebc.embedding_bags) == ["t_C0", "t_C2", "t_C3"]
    dense, kjt, _ = make_batch(net.schema, batch=8, seed=2)
    with torch.no_grad():
        net.first_order.ebc.embedding_bags["t_C1"].weight.fill_(5.0)
        torch.testing.assert_close(model(dense, kjt), net(dense, kjt, on), rtol=0, atol=1e-6)
    assert embedding_bytes(net.schema, on, 8) == 4 * (50 * 9 + 30 * 9 + 11 * 9)
    assert model.first_order.embedding_bytes() + model.stem.embedding_bytes() == embedding_bytes(net.schema, on, 8)


@pytest.mark.parametrize("row_cap", [None, 20])
def test_counts_include_the_one_wide_tables(row_cap):
    net = _net(row_cap=row_cap)
    on = _arch(net)
    off = dataclasses.replace(on, first_order=False)
    rows = sum(min(c, row_cap) if row_cap else c for c in CARDS)
    space = net.space
    assert count_params(net.schema, space, on, 8, include_embeddings=True, row_cap=row_cap) == \
        count_params(net.schema, space, off, 8, include_embeddings=True, row_cap=row_cap) + rows
    assert count_params(net.schema, space, on, 8) == count_params(net.schema, space, off, 8)  # dense part alone
    assert embedding_bytes(net.schema, on, 8, row_cap) == embedding_bytes(net.schema, off, 8, row_cap) + 4 * rows
    model = export(net, on, init="fresh")
    assert sum(p.numel() for p in model.parameters()) == count_params(net.schema, space, on, 8, True, row_cap)


def test_saved_model_loads_and_serves_the_same_probabilities(tmp_path):
    net = _net(row_cap=20)  # capped: model.pt2 folds the ids once for both stems
    on = _arch(net)
    model = export(net, on, init="fresh", seed=1)
    with torch.no_grad():
        for p in model.first_order.embedding_parameters():
            p.normal_()
    card = save_exported(model, tmp_path / "m", init="fresh")
    assert card["params_embedding"] == sum(min(c, 20) for c in CARDS) * 9
    assert card["embedding_bytes"] == 4 * card["params_embedding"]
    back = load_exported(tmp_path / "m")
    assert back.arch == on and isinstance(back.first_order, EmbeddingStem)
    dense, kjt, _ = make_batch(net.schema, batch=16, seed=5)
    ids = torch.stack([kjt.to_dict()[n].values() for n in net.schema.sparse_names], dim=1)
    served = torch.export.load(str(tmp_path / "m" / "model.pt2")).module()
    with torch.no_grad():
        want = model(dense, kjt)
        torch.testing.assert_close(back(dense, kjt), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(served(dense, ids), torch.sigmoid(want), rtol=0, atol=1e-6)
        off = export(net, dataclasses.replace(on, first_order=False), init="fresh", seed=1)
        assert not torch.allclose(off(dense, kjt), want)  # the term is in what is served


def _pairwise(tokens: torch.Tensor) -> torch.Tensor:
    """sum_{i<j} <v_i, v_j> over the fields, by a double loop (the FM term's definition, Rendle 2010 Eq. 1)."""
    f = tokens.shape[1]
    return sum((tokens[:, i] * tokens[:, j]).sum(dim=1) for i in range(f) for j in range(i + 1, f))


FM_SPACE = {**SPACE, "field_fm": [False, True], "table_dims": [0, 4, 8]}


def test_field_fm_adds_the_fields_pairwise_products_in_the_supernet_the_export_and_model_pt2(tmp_path):
    net = _net(FM_SPACE, row_cap=20)
    arch = dataclasses.replace(_arch(net), table_dims=(("C1", 0), ("C2", 4)))  # a dropped and a narrow field
    on, off = dataclasses.replace(arch, field_fm=True), dataclasses.replace(arch, field_fm=False)
    dense, kjt, _ = make_batch(net.schema, batch=16, seed=3)
    with torch.no_grad():
        tokens = net.stem(kjt).clone()
        tokens[:, 1] = 0  # C1 dropped
        tokens[:, 2, 4:] = 0  # C2 4 wide
        torch.testing.assert_close(net(dense, kjt, on) - net(dense, kjt, off), _pairwise(tokens), rtol=0, atol=1e-5)
        model = export(net, on, init="inherit")
        torch.testing.assert_close(model(dense, kjt), net(dense, kjt, on), rtol=0, atol=1e-5)
    assert count_params(net.schema, net.space, on, 8, True, 20) == count_params(net.schema, net.space, off, 8, True,
                                                                                 20) == \
        sum(p.numel() for p in model.parameters())  # no weights of its own
    fresh = export(net, on, init="fresh", seed=2)
    save_exported(fresh, tmp_path / "m", init="fresh")
    back = load_exported(tmp_path / "m")
    assert back.arch == on and back.field_fm
    ids = torch.stack([kjt.to_dict()[n].values() for n in net.schema.sparse_names], dim=1)
    served = torch.export.load(str(tmp_path / "m" / "model.pt2")).module()
    with torch.no_grad():
        want = fresh(dense, kjt)
        torch.testing.assert_close(want - fresh.net(dense, fresh.stem(kjt)) - first_order_part(fresh, kjt),
                                   _pairwise(fresh.stem(kjt)), rtol=0, atol=1e-5)
        torch.testing.assert_close(back(dense, kjt), want, rtol=0, atol=1e-6)
        torch.testing.assert_close(served(dense, ids), torch.sigmoid(want), rtol=0, atol=1e-6)


def first_order_part(model, kjt) -> torch.Tensor:
    return 0 if model.first_order is None else model.first_order(kjt).sum(dim=(1, 2))
