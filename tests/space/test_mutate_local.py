"""`mutate_local`: one small step from an arch (a width, depth or rank to its neighbour, FM flipped, a
categorical op choice re-drawn), never a change of wiring or op unless the space has `branch_moves`."""

import dataclasses

import numpy as np

from ctrnas.space import get_space
from ctrnas.space.baselines import baseline_arch
from ctrnas.space.config import PRESETS
from ctrnas.space.ops import op_spec


def diffs(a, b):
    out = []
    for i, (x, y) in enumerate(zip(a.blocks, b.blocks), start=1):
        for f in dataclasses.fields(x):
            if getattr(x, f.name) != getattr(y, f.name):
                out.append((i, f.name, getattr(x, f.name), getattr(y, f.name)))
    if a.emb_dim != b.emb_dim:
        out.append((None, "emb_dim", a.emb_dim, b.emb_dim))
    return out


def test_local_moves_change_one_live_choice_by_one_step():
    cfg = dataclasses.replace(PRESETS["ctrnas-small"], num_blocks=7, dense_dims=(16, 32, 64, 128, 256, 400),
                              sparse_tokens=(16, 32), dense_sparse_merge=(False,), emb_dims=(8, 16, 32))
    space = get_space(cfg)
    rng = np.random.default_rng(0)
    seen_fields = set()
    for name in ("dlrm-like", "dcnv2-like", "deepfm-like"):
        arch = space.validate(baseline_arch(name))
        live = set(arch.live_parts())
        for _ in range(60):
            child = space.mutate_local(arch, rng)
            d = diffs(arch, child)
            assert len(d) == 1, d
            assert child.key() != arch.key()  # never a change the network does not depend on
            block, field, old, new = d[0]
            seen_fields.add(field if field != "dense_args" else "dense_args")
            assert field not in ("dense_op", "sparse_op", "dense_idx", "sparse_idx", "dense_left_idx",
                                 "dense_right_idx")
            assert block is None or block in live
            if field == "dense_dim":
                opts = cfg.dense_dims
                assert abs(opts.index(new) - opts.index(old)) == 1
            if field == "emb_dim":
                assert {old or 16, new} in ({8, 16}, {16, 32})
            if field == "dense_args":
                changed = {k for k in set(dict(old)) | set(dict(new)) if dict(old).get(k) != dict(new).get(k)}
                assert len(changed) == 1
                k = changed.pop()
                if k in ("depth", "rank"):
                    opts = {"depth": (0, 1, 2, 3), "rank": (8, 16, 32)}[k]
                    assert abs(opts.index(dict(new)[k]) - opts.index(dict(old)[k])) == 1
    assert {"dense_dim", "dense_args", "fm", "emb_dim"} <= seen_fields


def test_local_moves_are_seeded():
    space = get_space("ctrnas-small")
    arch = space.sample(np.random.default_rng(1))
    a = [space.mutate_local(arch, np.random.default_rng(5)).key() for _ in range(3)]
    assert len(set(a)) == 1


def test_local_neighbours_are_every_one_step_edit_of_dlrm_like():
    """DLRM's live choices: bottom widths 64 and 16, the interaction's 256, the top's 128, FM on any of these
    four blocks, and the embedding width: 2 + 1 + 2 + 2 widths, 4 FM flips and 2 embedding widths."""
    cfg = dataclasses.replace(PRESETS["ctrnas-small"], num_blocks=7, dense_dims=(16, 32, 64, 128, 256, 400),
                              sparse_tokens=(16, 32), dense_sparse_merge=(False,), emb_dims=(8, 16, 32))
    space = get_space(cfg)
    arch = space.validate(baseline_arch("dlrm-like"))
    edits = sorted((d[0] or 0, d[1], str(d[3])) for d in (diffs(arch, n)[0] for n in space.local_neighbours(arch)))
    expected = sorted([(1, "dense_dim", "32"), (1, "dense_dim", "128"), (2, "dense_dim", "32"),
                       (3, "dense_dim", "128"), (3, "dense_dim", "400"), (7, "dense_dim", "64"),
                       (7, "dense_dim", "256"), (1, "fm", "True"), (2, "fm", "True"), (3, "fm", "True"),
                       (7, "fm", "True"), (0, "emb_dim", "8"), (0, "emb_dim", "32")])
    assert edits == expected
    assert all(len(diffs(arch, n)) == 1 for n in space.local_neighbours(arch))


def test_local_neighbours_hold_every_draw_of_mutate_local():
    cfg = dataclasses.replace(PRESETS["ctrnas-small"], num_blocks=7, dense_dims=(16, 32, 64, 128, 256, 400),
                              sparse_tokens=(16, 32), dense_sparse_merge=(False,), first_order=(False, True))
    space = get_space(cfg)
    for name in ("dcnv2-like", "deepfm-like"):
        arch = space.validate(baseline_arch(name))
        rng = np.random.default_rng(3)
        drawn = {space.mutate_local(arch, rng).key() for _ in range(1500)}
        assert drawn == {n.key() for n in space.local_neighbours(arch)}


def test_branch_moves_add_or_remove_one_input_of_the_last_block():
    """With `branch_moves`, a local move may also wire an unused block, made one unary op over the raw inputs
    at the smallest width, into the last block, or drop one of the last block's inputs; everything else
    stays. Off (the default), the neighbourhood is the same as before the option existed."""
    base = dataclasses.replace(PRESETS["ctrnas-small-cin"], num_blocks=7, dense_dims=(16, 32, 64, 128, 256, 400),
                               sparse_tokens=(16, 32), dense_sparse_merge=(False,))
    on = get_space(dataclasses.replace(base, branch_moves=True))
    off = get_space(base)
    arch = on.validate(baseline_arch("dcnv2-like"))  # concat of blocks 1 and 3; blocks 4-6 unused
    plain = {a.key() for a in off.local_neighbours(arch)}
    extra = [a for a in on.local_neighbours(arch) if a.key() not in plain]
    grown = [a for a in extra if len(a.blocks[-1].dense_idx) == 3]
    shrunk = [a for a in extra if len(a.blocks[-1].dense_idx) == 1]
    assert len(grown) + len(shrunk) == len(extra)
    assert sorted(a.blocks[3].dense_op for a in grown) == sorted(["fc", "dot", "cross", "interaction", "cin"])
    for a in grown:
        new = a.blocks[3]
        assert a.blocks[-1].dense_idx == (1, 3, 4) and new.dense_idx == (0,) and new.dense_dim == 16
        assert dict(new.dense_args) == {n: opts[0] for n, opts in op_spec(new.dense_op).args}
        assert a.blocks[:3] == arch.blocks[:3] and a.blocks[4:6] == arch.blocks[4:6]
    assert sorted(a.blocks[-1].dense_idx for a in shrunk) == [(1,), (3,)]
    assert all(len(diffs(arch, a)) == 1 for a in shrunk)
    rng = np.random.default_rng(0)
    drawn = {on.mutate_local(arch, rng).key() for _ in range(200)}
    assert {a.key() for a in extra} <= drawn  # mutate_local draws them too
    from ctrnas.space.config import space_record
    assert "branch_moves" not in space_record(base) and space_record(on.config)["branch_moves"] is True
