"""The op table: the one place an op is declared (name, kind, arity, what it reads, block, cost, choices).

The space reads it to sample, mutate, validate and hash archs; the supernet resolves each op's `block`
key to its class (`ctrnas.supernet.blocks.BLOCKS`, which checks at import that every op here has a class).
A preset lists its ops by name, so adding an op here changes no existing preset. See docs/ops.md.
Every op reads tokens of one width: an arch's narrower tables (`Arch.table_dims`) are zero-padded to it and a
dropped field's token is zero, so no op needs a rule of its own (docs/embedding-search.md); an exported Cross
over the stem's tokens drops the padded positions, the same outputs at less cost (`ctrnas.supernet.compact`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal


@dataclass(frozen=True)
class OpSpec:
    """One op of a choice block."""

    name: str  # what archs and recipes call it
    kind: Literal["dense", "sparse"]  # which output of the block it makes
    arity: int  # dense ops: 1 reads the concatenated `dense_idx` sources, 2 reads `dense_left_idx`/`dense_right_idx`
    reads_sparse: bool  # reads the `sparse_idx` tokens (EFC, Attention; Dot-Product and Cross among dense ops)
    block: str  # key of its supernet class in `ctrnas.supernet.blocks.BLOCKS`
    cost: str  # parameters and FLOPs in words; the block class's `cost(dims, io)` computes them
    # op-specific choices (name, options) kept in `BlockChoice.dense_args`
    args: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    # Optional rule over a block's choices (a `BlockChoice`): the reason they do not fit the op, or None.
    check: Callable[[object], str | None] | None = None
    # Reads the raw embeddings (the stem's tokens) whatever `sparse_idx` says, as DLRM's interaction does.
    reads_raw: bool = False
    # The output's size is the block's `dense_dim` / `sparse_tokens`; False: it has none (the `none` op).
    sized: bool = True
    # Allowed in the last block only (the head's input): `none` anywhere else starves later blocks of tokens.
    last_block_only: bool = False
    # Optional: the args that shape the network (e.g. a full-rank cross has no rank), for `Arch.key`.
    shaping: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Dense ops: the output keeps the op's input width (dense inputs, plus the tokens flattened for ops that
    # read them) instead of the block's `dense_dim`: always (True) or for some args (a rule over them).
    passthrough: bool | Callable[[dict[str, Any]], bool] = False
    # Polynomial degree of the output in the stem's values (dense features, embeddings) with LayerNorm off,
    # from its dense inputs' degrees (in `dense_idx` order; left, right for binary ops) and its tokens' degree
    # (`ctrnas.train.normalise`). None: a degree-1 map (dense: the inputs' highest, sparse: the tokens').
    degree: Callable[[tuple[int, ...], int], int] | None = None

    def arg_options(self, name: str) -> tuple[Any, ...]:
        return dict(self.args)[name]

    def output_degree(self, inputs: tuple[int, ...], tokens: int) -> int:
        if self.degree is not None:
            return self.degree(inputs, tokens)
        return max(inputs) if self.kind == "dense" else tokens

    def keeps_width(self, args: dict[str, Any]) -> bool:
        """The dense output is as wide as the op's input (see `passthrough`), not the block's `dense_dim`."""
        return self.passthrough(args) if callable(self.passthrough) else self.passthrough


def _cross_check(block: Any) -> str | None:  # a BlockChoice (arch.py imports this module)
    # A full-rank W over a block's max-size input would be n_max^2 weights per layer (about 545M over 3
    # layers at block 7 of NASRec-Full), so full rank is the DCN-v2 setting only: over the raw inputs.
    raw = block.dense_idx == (0,) and block.sparse_idx == (0,)
    if block.arg("form") == "full" and block.arg("depth") > 0 and not raw:
        return "the full-rank cross reads only the raw inputs (dense_idx and sparse_idx [0])"
    # The unprojected output x_L is as wide as x0: over the raw inputs that width is known (the supernet
    # makes room for it), and FM / merge, which take the block's `dense_dim`, do not apply.
    if block.arg("out") == "raw" and (not raw or block.fm or block.dense_sparse_merge):
        return "the unprojected cross (out: raw) reads only the raw inputs and takes no FM or merge"
    return None


def _cross_shaping(args: dict[str, Any]) -> dict[str, Any]:
    if args.get("depth") == 0:  # no cross layer: form and rank shape nothing
        return {k: v for k, v in args.items() if k not in ("form", "rank")}
    return {k: v for k, v in args.items() if not (k == "rank" and args.get("form") == "full")}


def _concat_check(block: Any) -> str | None:
    if block.fm or block.dense_sparse_merge:
        return "concat has no width of its own for FM or merge to take"
    return None


CROSS_EXPERTS = 4  # experts of the low-rank mixture (DCN-v2's DCN-Mix uses 4)

_TABLE = (
    OpSpec("fc", "dense", 1, False, "fc", "Linear(dense_in -> d) + LN"),
    OpSpec("sum", "dense", 2, False, "sum", "Linear(max(left, right) -> d) + LN"),
    # Gating: sigmoid(left) in (0, 1) times right keeps the right input's degree.
    OpSpec("gating", "dense", 2, False, "gating", "Linear(left -> w) gate, Linear(w -> d) + LN; w = max(left, right)",
           degree=lambda ins, tokens: ins[1]),
    # Dot-Product: pairwise products of its (projected) inputs double their degree.
    OpSpec("dot", "dense", 1, True, "dot",
           "Linear(dense_in -> E), token Linear(tok_in -> K), pairwise dots of K+1, Linear(K(K+1)/2 -> d) + LN",
           degree=lambda ins, tokens: 2 * max(max(ins), tokens)),
    # `out`: "proj" projects x_L to the block's width (DCN-v2's stacked form, the first deep layer), "raw"
    # keeps x_L itself (n wide), for a later `concat` beside a deep tower: DCN-v2's parallel form. Depth 0
    # is no cross layer (x_L = x0): projected, a deep layer over the dense inputs and the tokens flattened,
    # which DCN-v2's deep tower starts with (NASRec's FC reads no tokens).
    OpSpec("cross", "dense", 1, True, "cross",
           "depth x (full: n^2 + n; low rank r: 2nr + n; mixture: experts (2nr + r^2) + n) + experts n gates, "
           "then (out proj) Linear(n -> d) + LN; n = dense_in + tok_in E",
           args=(("depth", (0, 1, 2, 3)), ("form", ("full", "lowrank", "mixture")), ("rank", (8, 16, 32)),
                 ("out", ("proj", "raw"))),
           check=_cross_check, shaping=_cross_shaping, passthrough=lambda a: a.get("out") == "raw"),
    # The identity over the concatenated dense inputs, in the last block: the head is then one linear layer
    # over several blocks' outputs, as DCN-v2's parallel form ends (cross output beside the deep output).
    OpSpec("concat", "dense", 1, False, "concat", "nothing (the head reads the dense inputs side by side)",
           last_block_only=True, check=_concat_check, passthrough=True),
    # DLRM's interaction (Naumov et al. 2019), which the NASRec Dot-Product is not: the dense input (projected
    # to E unless it is E wide) and the raw embeddings, all pairwise dots, concatenated with the dense vector.
    OpSpec("interaction", "dense", 1, False, "interaction",
           "[Linear(dense_in -> E) unless dense_in = E], F+1 vectors: Linear(E + F(F+1)/2 -> d) + LN; "
           "bmm 2 (F+1)^2 E FLOPs", reads_raw=True),
    # xDeepFM's CIN (Lian et al. 2018) over the dense input (a token, as in `interaction`) and the raw
    # embeddings: layer k's maps are products of layer k-1's with the raw tokens, degree k + 1; the pooled
    # maps are projected and normalised, so with LayerNorm on the output's degree is reset.
    OpSpec("cin", "dense", 1, False, "cin",
           "[Linear(dense_in -> E) unless dense_in = E], m = F+1 tokens; depth x Conv1x1(H_prev m -> maps) "
           "over the E positions (H_0 = m), pooled over E; Linear(depth maps -> d) + LN",
           reads_raw=True, args=(("depth", (1, 2, 3)), ("maps", (8, 16, 32))),
           degree=lambda ins, tokens: 4 * max(max(ins), tokens)),
    OpSpec("efc", "sparse", 1, True, "efc", "token Linear(tok_in -> s) + LN(E)"),
    # Attention ends in LayerNorms, kept even with LayerNorm off: they reset the degree.
    OpSpec("attention", "sparse", 1, True, "attention", "token Linear(tok_in -> s) + LN, MHA and FFN over E",
           degree=lambda ins, tokens: 1),
    # NASRec's zero op: a last block without a sparse output feeds only its dense output to the head, as a
    # DLRM or DCN-v2 top does (measured: `none` in earlier blocks leaves later ones without tokens, the worst
    # subnets of a small run). It reads the raw tokens only for their batch size.
    OpSpec("none", "sparse", 1, False, "none", "nothing", reads_raw=True, sized=False, last_block_only=True),
)

OPS: dict[str, OpSpec] = {spec.name: spec for spec in _TABLE}


def op_spec(name: str) -> OpSpec:
    """The table entry of op `name` (KeyError names the known ops)."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r} (known: {', '.join(OPS)})") from None


def ops_of_kind(kind: str) -> tuple[str, ...]:
    return tuple(n for n, s in OPS.items() if s.kind == kind)


def is_binary(name: str) -> bool:
    """A dense op reading `dense_left_idx`/`dense_right_idx` instead of the `dense_idx` list."""
    return op_spec(name).arity == 2


def dense_reads_sparse(name: str) -> bool:
    """A dense op that also reads the block's chosen sparse inputs (read even when only the dense part is live)."""
    return op_spec(name).reads_sparse


def reads_raw(name: str) -> bool:
    """An op that reads the stem's tokens (source 0) whatever the block's `sparse_idx` says."""
    return op_spec(name).reads_raw
