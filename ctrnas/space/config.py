"""The search-space settings: the frozen `SpaceConfig` and the presets (NASRec-Full / NASRec-Small as in the
paper, and ctrnas-small / ctrnas-full which add DCN-v2's Cross and DLRM's interaction)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ctrnas.errors import RecipeError
from ctrnas.space.ops import ops_of_kind

# NASRec-Full's ops, listed here (not derived from the op table) so that new ops change no paper space.
NASREC_FULL_DENSE_OPS = ("fc", "sum", "gating", "dot")
NASREC_FULL_SPARSE_OPS = ("efc", "attention")
CTRNAS_DENSE_DIMS = (16, 32, 64, 128, 256, 400, 512, 768, 1024)
MACRO_FIELDS = ("dense_idx", "sparse_idx", "dense_left_idx", "dense_right_idx")
MICRO_FIELDS = ("dense_op", "sparse_op", "dense_dim", "sparse_tokens", "dense_sparse_merge", "fm")


@dataclass(frozen=True)
class SpaceConfig:
    """A NASRec-style space (docs/nasrec.md); every field can be set in a recipe's `space:` mapping."""

    name: str = "custom"
    num_blocks: int = 7
    dense_ops: tuple[str, ...] = NASREC_FULL_DENSE_OPS
    sparse_ops: tuple[str, ...] = NASREC_FULL_SPARSE_OPS
    dense_dims: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 768, 1024)
    sparse_tokens: tuple[int, ...] = (16, 32, 48, 64)
    emb_dim: int = 16
    max_inputs: int = 4  # NASRec: at most 4 dense / sparse sources per block
    merge_tokens: int = 8  # tokens added by the dense->sparse merge (NASRec: 8 x 16 = 128)
    dense_sparse_merge: tuple[bool, ...] = (False, True)
    fm: tuple[bool, ...] = (False, True)
    attention_heads: int = 8  # NASRec: 8 heads over d = 16
    # "binomial": 1 + Binomial(min(i-1, max_inputs-1), 0.5) sources (NASRec `binomial-0.5`); "single": one.
    fan_in: Literal["binomial", "single"] = "binomial"
    # NASRec `--use_layernorm`: LayerNorm after each op (FC, Sum, Gating, Dot, EFC, FM, the Attention
    # token projection). False makes those norms the identity, in the supernet and in exported models.
    # Attention's two residual LayerNorms stay either way, as in NASRec's Transformer.
    layernorm: bool = True
    # Embedding widths an arch may choose (`Arch.emb_dim`, one for all tables); empty: no choice, every
    # arch uses the run's width. See docs/multifidelity.md ("Searching the embedding width").
    emb_dims: tuple[int, ...] = ()
    # Widths a single table may take (`Arch.table_dims`; 0 drops the field), e.g. (0, 4, 8, 16, 32); empty:
    # every table has the arch's width. A table is at most as wide as its arch's common width, the run's
    # `train.embedding_dim` or the arch's `emb_dim` (with `emb_dims`, a choice: docs/embedding-search.md).
    table_dims: tuple[int, ...] = ()
    # The sparse fields whose widths are searched; empty: all of the data's (filled from the schema by
    # `SearchSpace.for_fields`, which the supernet and the search call).
    tables: tuple[str, ...] = ()
    # Whether an arch may add a first-order term (`Arch.first_order`, per-id scalar weights as FM's linear
    # part); (False, True): a choice the search draws. (False,): none, the paper's spaces.
    first_order: tuple[bool, ...] = (False,)
    # Whether an arch may add FM's second-order term over the fields' embeddings to its logit (`Arch.field_fm`).
    field_fm: tuple[bool, ...] = (False,)
    # Whether local moves (`mutate_local`, `local_neighbours`) may also change the wiring at the top: add a
    # branch to the last block's dense inputs (an unused block becomes one op over the raw inputs at the
    # smallest width) or remove one of its inputs. Off: local moves keep the wiring and the ops.
    branch_moves: bool = False

    def __post_init__(self) -> None:
        src = f"space {self.name!r}"

        def need(ok: bool, key: str, why: str) -> None:
            if not ok:
                raise RecipeError(src, key, why)

        need(self.num_blocks >= 1, "num_blocks", "must be >= 1")
        for key, kind in (("dense_ops", "dense"), ("sparse_ops", "sparse")):
            known = ops_of_kind(kind)
            need(len(getattr(self, key)) > 0 and set(getattr(self, key)) <= set(known), key,
                 f"must be a non-empty subset of {list(known)}")
        for key in ("dense_ops", "sparse_ops", "dense_dims", "sparse_tokens", "dense_sparse_merge", "fm",
                    "first_order", "field_fm"):
            v = getattr(self, key)
            need(len(v) > 0 and len(set(v)) == len(v), key, "must be a non-empty list without repeats")
        need(all(d > 0 for d in self.dense_dims), "dense_dims", "widths must be positive")
        need(all(t > 0 for t in self.sparse_tokens), "sparse_tokens", "token counts must be positive")
        need(self.emb_dim > 0, "emb_dim", "must be positive")
        need(self.max_inputs >= 1, "max_inputs", "must be >= 1")
        need(self.merge_tokens >= 1, "merge_tokens", "must be >= 1")
        heads_fit = "attention" not in self.sparse_ops or self.emb_dim % self.attention_heads == 0
        need(self.attention_heads >= 1 and heads_fit, "attention_heads", f"must divide emb_dim={self.emb_dim}")
        need(len(set(self.emb_dims)) == len(self.emb_dims) and all(d > 0 for d in self.emb_dims), "emb_dims",
             "must be positive widths without repeats")
        need("attention" not in self.sparse_ops or all(d % self.attention_heads == 0 for d in self.emb_dims),
             "emb_dims", f"each must be divisible by attention_heads={self.attention_heads}")

        need(len(set(self.table_dims)) == len(self.table_dims) and all(d >= 0 for d in self.table_dims)
             and (not self.table_dims or max(self.table_dims) > 0), "table_dims",
             "must be widths >= 0 without repeats, at least one of them > 0 (0 drops a field)")
        need(len(set(self.tables)) == len(self.tables) and all(isinstance(t, str) and t for t in self.tables),
             "tables", "must be sparse field names without repeats")

    @property
    def max_dense_dim(self) -> int:
        return max(self.dense_dims)

    @property
    def max_sparse_tokens(self) -> int:
        return max(self.sparse_tokens)


PRESETS = {
    "nasrec-full": SpaceConfig(name="nasrec-full", dense_ops=("fc", "sum", "gating", "dot"),
                               sparse_ops=("efc", "attention")),
    "nasrec-small": SpaceConfig(name="nasrec-small", dense_ops=("fc", "dot"), sparse_ops=("efc",)),
    # NASRec's spaces plus DCN-v2's Cross, DLRM's interaction, `concat` and the `none` sparse op, and
    # DCN-v2's hidden width 400: the ops and width that make DLRM and DCN-v2 points of the space
    # (ctrnas/space/archs/).
    # `concat` (last block only) ends DCN-v2's parallel form.
    "ctrnas-small": SpaceConfig(name="ctrnas-small", dense_ops=("fc", "dot", "cross", "interaction", "concat"),
                                sparse_ops=("efc", "none"), dense_dims=CTRNAS_DENSE_DIMS),
    "ctrnas-full": SpaceConfig(name="ctrnas-full",
                               dense_ops=("fc", "sum", "gating", "dot", "cross", "interaction", "concat"),
                               sparse_ops=("efc", "attention", "none"), dense_dims=CTRNAS_DENSE_DIMS),
    # ctrnas-small with FM's two logit terms as choices, so FM and DeepFM itself (`deepfm-terms-like`) are
    # points of it
    "ctrnas-small-fm": SpaceConfig(name="ctrnas-small-fm", dense_ops=("fc", "dot", "cross", "interaction", "concat"),
                                   sparse_ops=("efc", "none"), dense_dims=CTRNAS_DENSE_DIMS,
                                   first_order=(False, True), field_fm=(False, True)),
    # ctrnas-small-fm with xDeepFM's CIN, so xDeepFM (`xdeepfm-like`) is a point of it too
    "ctrnas-small-cin": SpaceConfig(name="ctrnas-small-cin",
                                    dense_ops=("fc", "dot", "cross", "interaction", "cin", "concat"),
                                    sparse_ops=("efc", "none"), dense_dims=CTRNAS_DENSE_DIMS,
                                    first_order=(False, True), field_fm=(False, True)),
}


def space_record(config: SpaceConfig) -> dict[str, Any]:
    """`config` as a plain dict for fingerprints, without `emb_dims` (or the table choices, `first_order`,
    `field_fm`, `branch_moves`) while at their defaults: a fingerprint written before the field existed (a
    warm-up, a final-stage job) still matches, so those runs resume."""
    from ctrnas.config import to_dict

    out = to_dict(config)
    for key in ("emb_dims", "table_dims", "tables"):
        if not getattr(config, key):
            out.pop(key, None)
    for key in ("first_order", "field_fm"):
        if tuple(getattr(config, key)) == (False,):
            out.pop(key, None)
    if not config.branch_moves:
        out.pop("branch_moves", None)
    return out

