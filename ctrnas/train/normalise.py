"""Whether a from-scratch model gets its ops' LayerNorms: NASRec's "off", "on", or "auto" by product degree.

Without LayerNorm nothing bounds the scale of a block's output, and the multiplicative ops raise it to a
power: Dot-Product takes pairwise dot products of its (projected) inputs, so its output scales as the
square of its inputs; the FM term squares the block's sparse output. A chain of them is a polynomial of
high degree in the weights and embeddings: a relative change e in early weights moves the logit by about
degree x e, and Adagrad's first steps (lr 0.12-0.16) are large relative changes, so such models blow up
within a few steps (benchmarks/RESULTS.md, numerics section). Sigmoid-Gating multiplies by a gate in
(0, 1) and keeps its right input's degree; FC, Sum and EFC are degree 1 maps; Attention ends in
LayerNorms (kept even with LayerNorm off) and resets the degree. DCN-v2's Cross and DLRM's interaction
count as degree 1 maps on purpose: their papers train them without LayerNorm, and so do the DCN-v2 and
DLRM baselines here, which the shipped `dcnv2-like` / `dlrm-like` archs must equal (`concat` is the
identity).

`product_degree` is the degree of the logit in the stem's values (dense features, embeddings), following
these rules over the live blocks (each op's rule is its `OpSpec.degree` in the op table); plain MLP-like
subnets have 1, DLRM-like ones 2, products of products 4+.
Trained as the Avazu recipe's final stage without LayerNorm, 15 of 17 random NASRec-Full subnets of degree
2 and all 30 of degree 4+ diverged, 1 of 3 of degree 1; with LayerNorm none did (benchmarks/RESULTS.md).
"""

from __future__ import annotations

from ctrnas.space import OPS, Arch

# final.layernorm "auto": LayerNorm on from this degree up (any Dot-Product or FM term; measured to diverge
# without it), off for plain MLP-like subnets as NASRec's stand-alone training
AUTO_DEGREE = 2


def product_degree(arch: Arch) -> int:
    """Polynomial degree of the logit in the stem's values with LayerNorm off (see the module docstring)."""
    dense, sparse = {0: 1}, {0: 1}  # per source: degree of its dense / sparse output
    for i, (need_d, need_s, merge) in arch.live_parts().items():
        b = arch.blocks[i - 1]
        s_in = max((sparse.get(j, 1) for j in b.sparse_idx), default=1)
        s = OPS[b.sparse_op].output_degree((), s_in)
        d = 1
        if need_d:
            op = OPS[b.dense_op]
            ins = (dense[b.dense_left_idx], dense[b.dense_right_idx]) if op.arity == 2 else \
                tuple(dense[j] for j in b.dense_idx)
            d = op.output_degree(ins, s_in)  # each op's rule is in the op table (`OpSpec.degree`)
            if b.fm:
                d = max(d, 2 * s)
        if merge:
            s = max(s, d)
        dense[i], sparse[i] = d, s
    last = arch.num_blocks
    return max(dense.get(last, 1), sparse.get(last, 1))


def use_layernorm(setting: bool | str | None, arch: Arch, space_default: bool) -> bool:
    """The LayerNorm choice for one final model: `setting` True/False as given, None the space's own,
    "auto" on when the arch's product degree is at least AUTO_DEGREE (else off, as NASRec)."""
    if setting is None:
        return space_default
    if setting == "auto":
        return product_degree(arch) >= AUTO_DEGREE
    return bool(setting)
