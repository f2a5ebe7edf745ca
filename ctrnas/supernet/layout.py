"""Where each source sits in a block's max-size input, and which columns a subnet reads.

The supernet lays out the dense input of block i as [stem dense | block 1 | ... | block i-1], each block
slot `Dims.slot` wide (`max_dense`, or the raw inputs' width when an unprojected Cross may put that
there), and the sparse input as [stem tokens | block 1 tokens | ...], each block slot
`max_tokens + merge_tokens` long (main tokens first, merge tokens at the end of the slot). A subnet reads
only the columns/tokens its chosen sources produce; `resolve` turns an arch into those index lists.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ctrnas.data.schema import DatasetSchema
from ctrnas.space import Arch, SpaceConfig, dense_reads_sparse, is_binary, op_spec


@dataclass(frozen=True)
class Dims:
    """Shapes shared by the supernet, export and the analytic counts (all known from schema + space)."""

    n_dense: int
    n_sparse: int
    emb: int
    max_dense: int
    max_tokens: int
    merge_tokens: int  # 0 when the space never merges
    heads: int
    layernorm: bool = True  # SpaceConfig.layernorm: each op's LayerNorm on, or the identity
    # Widest dense output a block may have beyond max_dense: the raw inputs' width when an op may keep it
    # (an unprojected Cross over the raw inputs), else 0. `slot` is then each block's room in the layout.
    raw_out: int = 0
    # Widest dense output of the last block when an op there may keep its input width (`concat`), else 0.
    last_out: int = 0

    @classmethod
    def of(cls, schema: DatasetSchema, config: SpaceConfig, emb_dim: int | None = None) -> "Dims":
        emb = emb_dim or config.emb_dim
        keeps = [op_spec(n) for n in config.dense_ops if op_spec(n).passthrough]
        raw = schema.dense_dim + len(schema.sparse) * emb if any(not s.last_block_only for s in keeps) else 0
        dims = cls(n_dense=schema.dense_dim, n_sparse=len(schema.sparse), emb=emb,
                   max_dense=config.max_dense_dim, max_tokens=config.max_sparse_tokens,
                   merge_tokens=config.merge_tokens if True in config.dense_sparse_merge else 0,
                   heads=config.attention_heads, layernorm=config.layernorm, raw_out=raw)
        if any(s.last_block_only for s in keeps):
            dims = dataclasses.replace(dims, last_out=dims.dense_in_max(config.num_blocks))
        return dims

    @property
    def slot(self) -> int:
        """Room of one block's dense output in a later block's input: max_dense, or the raw width if wider."""
        return max(self.max_dense, self.raw_out)

    @property
    def pad_width(self) -> int:
        """Common width binary ops pad to (the stem's dense width may exceed the widest block)."""
        return max(self.slot, self.n_dense)

    @property
    def dot_tokens(self) -> int:
        """Tokens the Dot-Product op compresses the sparse input to: round(sqrt(2 * max_dense)) (NASRec)."""
        return max(1, round(math.sqrt(2 * self.max_dense)))

    @property
    def block_tokens(self) -> int:
        return self.max_tokens + self.merge_tokens

    def dense_offset(self, j: int) -> int:
        return 0 if j == 0 else self.n_dense + (j - 1) * self.slot

    def tok_offset(self, j: int) -> int:
        return 0 if j == 0 else self.n_sparse + (j - 1) * self.block_tokens

    def dense_in_max(self, i: int) -> int:
        return self.dense_offset(i)

    def tok_in_max(self, i: int) -> int:
        return self.tok_offset(i)

    @property
    def head_dense(self) -> int:
        """Width of the head's dense part: the widest dense output the last block may have."""
        return max(self.slot, self.last_out)

    @property
    def head_in(self) -> int:
        return self.head_dense + self.block_tokens * self.emb


@dataclass(frozen=True)
class BlockIO:
    """One block of a subnet (or of the full supernet) with its resolved input/output shapes."""

    index: int  # 1-based block number
    dense_ops: tuple[str, ...]  # one op for a subnet, all ops for the full supernet (outputs summed)
    dense_args: tuple  # the dense op's own choices (sorted pairs); () for the full supernet and ops without any
    sparse_ops: tuple[str, ...]
    dense_idx: tuple[int, ...]
    sparse_idx: tuple[int, ...]
    left: int
    right: int
    dense_dim: int
    tokens: int  # main sparse output tokens
    merge: bool
    fm: bool
    dense_in: int  # width of the concatenated dense input
    dense_cols: tuple[int, ...] | None  # columns of the max-size dense input read (None: all)
    tok_in: int
    tok_cols: tuple[int, ...] | None
    left_w: int
    right_w: int


@dataclass(frozen=True)
class Plan:
    """A resolved subnet: its live blocks in order and the head's input columns."""

    blocks: tuple[BlockIO, ...]
    head_in: int
    head_cols: tuple[int, ...] | None


def _resolve(dims: Dims, choices: list[dict], full: bool) -> Plan:
    dense_w = {0: dims.n_dense}
    main_tok = {0: dims.n_sparse}
    merged = {0: False}
    out = []
    for c in choices:
        i = c["index"]
        dcols, tcols = [], []
        for j in c["dense_idx"]:
            off = dims.dense_offset(j)
            dcols.extend(range(off, off + dense_w[j]))
        for j in c["sparse_idx"]:
            off = dims.tok_offset(j)
            tcols.extend(range(off, off + main_tok[j]))
            if merged[j]:
                tcols.extend(range(off + dims.max_tokens, off + dims.block_tokens))
        width = c["dense_dim"]
        if width is None:  # an op that keeps its input's width (`OpSpec.passthrough`)
            reads_tokens = c["dense_ops"] and dense_reads_sparse(c["dense_ops"][0])
            width = len(dcols) + (len(tcols) * dims.emb if reads_tokens else 0)
        io = BlockIO(index=i, dense_ops=c["dense_ops"], dense_args=c.get("dense_args", ()),
                     sparse_ops=c["sparse_ops"], dense_idx=c["dense_idx"],
                     sparse_idx=c["sparse_idx"], left=c["left"], right=c["right"], dense_dim=width,
                     tokens=c["tokens"], merge=c["merge"], fm=c["fm"], dense_in=len(dcols),
                     dense_cols=None if full and dims.slot == dims.max_dense else tuple(dcols), tok_in=len(tcols),
                     tok_cols=None if full else tuple(tcols), left_w=dense_w[c["left"]],
                     right_w=dense_w[c["right"]])
        out.append(io)
        dense_w[i], main_tok[i], merged[i] = io.dense_dim, io.tokens, io.merge
    last = out[-1]
    hcols = list(range(last.dense_dim))
    hcols.extend(dims.head_dense + t * dims.emb + e for t in range(last.tokens) for e in range(dims.emb))
    if last.merge:
        start = dims.head_dense + dims.max_tokens * dims.emb
        hcols.extend(range(start, start + dims.merge_tokens * dims.emb))
    # The full supernet reads whole max-size inputs, unless slots are wider than its max_dense outputs.
    return Plan(tuple(out), len(hcols), None if full and dims.head_dense == dims.max_dense else tuple(hcols))


def resolve(dims: Dims, arch: Arch) -> Plan:
    """The live parts of `arch` with their input columns; nothing the output does not depend on is kept
    (dead blocks, a dense op nobody reads, inputs of ops that do not run; see `Arch.live_parts`)."""
    choices = []
    for i, live in arch.live_parts().items():
        b = arch.blocks[i - 1]
        binary = is_binary(b.dense_op)
        sized = op_spec(b.sparse_op).sized
        reads_sparse = ((live.sparse and op_spec(b.sparse_op).reads_sparse)
                        or (live.dense and dense_reads_sparse(b.dense_op)))
        choices.append(dict(index=i, dense_ops=(b.dense_op,) if live.dense else (),
                            dense_args=b.dense_args if live.dense else (),
                            sparse_ops=(b.sparse_op,) if live.sparse else (),
                            dense_idx=b.dense_idx if live.dense and not binary else (),
                            sparse_idx=b.sparse_idx if reads_sparse else (),
                            left=b.dense_left_idx if live.dense and binary else 0,
                            right=b.dense_right_idx if live.dense and binary else 0,
                            dense_dim=(None if op_spec(b.dense_op).keeps_width(dict(b.dense_args)) else b.dense_dim)
                            if live.dense else 0,
                            tokens=b.sparse_tokens if live.sparse and sized else 0,
                            merge=live.merge and dims.merge_tokens > 0, fm=b.fm and live.dense))
    return _resolve(dims, choices, full=False)


def resolve_full(dims: Dims, config: SpaceConfig) -> Plan:
    """The full supernet (NASRec warm-up): all ops (outputs summed), max widths, all connections.

    Binary ops read the previous block (left) and the one before it (right; the stem for block 1 and 2).
    """
    # Ops without an output of their own (`none`) add nothing to the sum; alone, the block has no tokens.
    sized = tuple(n for n in config.sparse_ops if op_spec(n).sized)
    sparse_ops, tokens = (sized, dims.max_tokens) if sized else (tuple(config.sparse_ops), 0)
    # Ops that keep their input width (`concat`) have no max-width output to add to the others: left out
    # (they have no weights); the Cross runs projected, every form at once.
    dense_ops = tuple(n for n in config.dense_ops if op_spec(n).passthrough is not True)
    choices = []
    for i in range(1, config.num_blocks + 1):
        choices.append(dict(index=i, dense_ops=dense_ops, sparse_ops=sparse_ops,
                            dense_idx=tuple(range(i)), sparse_idx=tuple(range(i)), left=i - 1,
                            right=max(i - 2, 0), dense_dim=dims.max_dense, tokens=tokens,
                            merge=dims.merge_tokens > 0, fm=True in config.fm))
    return _resolve(dims, choices, full=True)
