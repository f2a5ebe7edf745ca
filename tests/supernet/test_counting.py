"""Analytic params/FLOPs: a hand-computed tiny arch, and agreement with counts over exported models."""

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from ctrnas.space import Arch, BlockChoice, get_space
from ctrnas.supernet import Supernet, count_flops, count_params, export
from ctrnas.supernet.fresh import build_supernet
from ctrnas.supernet.testing import make_batch, make_schema


def _hand_built(layernorm: bool = True):
    """(schema, space, arch) of the hand-counted example: F = 3 sparse fields, E = 4."""
    schema = make_schema(n_dense=2, cards=(10, 20, 30))
    space = get_space({"num_blocks": 2, "dense_dims": [3, 5], "sparse_tokens": [2, 4], "merge_tokens": 1,
                       "emb_dim": 4, "attention_heads": 2, "layernorm": layernorm})
    b1 = BlockChoice(dense_idx=(0,), sparse_idx=(0,), dense_left_idx=0, dense_right_idx=0, dense_op="fc",
                     sparse_op="efc", dense_dim=5, sparse_tokens=2, dense_sparse_merge=False, fm=True)
    b2 = BlockChoice(dense_idx=(0, 1), sparse_idx=(1,), dense_left_idx=0, dense_right_idx=1, dense_op="dot",
                     sparse_op="attention", dense_dim=3, sparse_tokens=4, dense_sparse_merge=True, fm=False)
    return schema, space, Arch((b1, b2))


def test_params_and_flops_of_a_hand_built_arch():
    schema, space, arch = _hand_built()
    E = 4
    # block 1: FC 2->5 + LN(5); EFC over tokens 3->2 + LN(E); FM E->5 + LN(5)
    p1 = (2 * 5 + 5 + 10) + (3 * 2 + 2 + 2 * E) + (E * 5 + 5 + 10)
    f1 = 2 * 2 * 5 + 2 * E * 3 * 2 + 2 * E * 5
    # block 2: Dot with K = round(sqrt(2*5)) = 3 tokens: proj 7->E, compress 2->3 tokens, 6 pairs -> 3, LN(3)
    p_dot = (7 * E + E) + (2 * 3 + 3) + (6 * 3 + 3) + 6
    f_dot = 2 * 7 * E + 2 * E * 2 * 3 + 2 * (4 * 4 * E) + 2 * 6 * 3
    # Attention: tokens 2->4, MHA (in 3E*E+3E, out E*E+E), FFN 2x(E*E+E), 3 LN(E)
    p_att = (2 * 4 + 4) + (4 * E * E + 4 * E) + 2 * (E * E + E) + 3 * 2 * E
    f_att = 2 * E * 2 * 4 + 2 * 4 * E * 3 * E + 2 * 4 * E * E + 2 * 2 * 4 * 4 * E + 2 * 2 * 4 * E * E
    # merge 3 -> 1 token of E
    p_merge, f_merge = 3 * E + E, 2 * 3 * E
    # head: dense 3 + (4 + 1 merge) tokens * E -> 1
    p_head, f_head = 3 + 5 * E + 1, 2 * (3 + 5 * E)
    assert count_params(schema, space, arch) == p1 + p_dot + p_att + p_merge + p_head == 340
    assert count_flops(schema, space, arch) == f1 + f_dot + f_att + f_merge + f_head == 1534
    assert count_params(schema, space, arch, include_embeddings=True) == 340 + (10 + 20 + 30) * E
    assert count_params(schema, space, arch, include_embeddings=True, row_cap=15) == 340 + (10 + 15 + 15) * E


def test_params_of_the_hand_built_arch_without_layernorm():
    # Same arch as above with `layernorm: false`: the op LNs go (FC LN(5), EFC LN(E), FM LN(5), Dot LN(3),
    # Attention's projection LN(E)); Attention's two residual LN(E) stay; FLOPs do not count norms anyway.
    schema, space, arch = _hand_built(layernorm=False)
    E = 4
    assert count_params(schema, space, arch) == 340 - (10 + 2 * E + 10 + 6 + 2 * E) == 298
    assert count_flops(schema, space, arch) == 1534


def counted_flops(model, batch) -> float:
    """FLOPs per example of the exported model by torch's counter (plus CPU flash attention, which it misses)."""
    dense, kjt, _ = batch
    tokens = model.stem(kjt)

    def cpu_flash(q, k, v, *args, out_shape=None, **kw):
        return sdpa_flop_count(q, k, v)

    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: cpu_flash}
    with FlopCounterMode(display=False, custom_mapping=mapping) as fc:
        model.net(dense, tokens)
    return fc.get_total_flops() / dense.shape[0]


@pytest.mark.parametrize("layernorm", [True, False], ids=["layernorm", "no-layernorm"])
@pytest.mark.parametrize("base", ["nasrec-full", "nasrec-small", "ctrnas-full"])
def test_counts_match_the_exported_model(base, layernorm):
    torch.manual_seed(0)
    schema = make_schema()
    space = get_space({"base": base, "num_blocks": 4, "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3, 5],
                       "merge_tokens": 2, "attention_heads": 2, "layernorm": layernorm})
    net = Supernet(schema, space, row_cap=20)
    batch = make_batch(schema, batch=4)
    rng = np.random.default_rng(0)
    for _ in range(25 if layernorm else 15):
        arch = space.sample(rng)
        model = export(net, arch)
        assert count_params(schema, space, arch) == sum(p.numel() for p in model.net.parameters())
        assert count_params(schema, space, arch, include_embeddings=True, row_cap=20) == sum(
            p.numel() for p in model.parameters())
        assert count_flops(schema, space, arch) == counted_flops(model, batch)


def test_counts_at_default_widths():
    torch.manual_seed(0)
    schema = make_schema(n_dense=13, cards=(30,) * 6)
    net = build_supernet(schema, "nasrec-full", None, drawn=False)  # counts: its weights do not matter
    arch = get_space("nasrec-full").sample(np.random.default_rng(11))
    model = export(net, arch)
    assert count_params(schema, "nasrec-full", arch) == sum(p.numel() for p in model.net.parameters())
    assert count_flops(schema, "nasrec-full", arch) == counted_flops(model, make_batch(schema, batch=2))
