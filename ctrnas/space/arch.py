"""The architecture value type: per block, NASRec's macro (connections) and micro (ops, widths) choices.

An `Arch` is immutable, hashable, picklable and round-trips through JSON. Structural checks (types, keys)
happen in `from_json` and raise `ArchValidationError(block, field, value, reason)`; whether the values fit
a given search space is `SearchSpace.validate`'s job.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from ctrnas.errors import ArchValidationError
from ctrnas.space.ops import dense_reads_sparse, is_binary, op_spec

FORMAT = "ctrnas-arch/1"


@dataclass(frozen=True)
class BlockChoice:
    """Choices of one choice block (NASRec §3.1; docs/nasrec.md).

    Source index 0 is the embedding stem (raw dense features, sparse embeddings); index j >= 1 is the
    output of block j. Block i (1-based) may read sources 0..i-1.
    """

    dense_idx: tuple[int, ...]  # dense sources concatenated (width-wise) for unary dense ops (FC, Dot)
    sparse_idx: tuple[int, ...]  # sparse sources concatenated along the token axis
    dense_left_idx: int  # left input of binary dense ops (Sum, Gating)
    dense_right_idx: int  # right input of binary dense ops
    dense_op: str  # a dense op of the op table (ctrnas.space.ops)
    sparse_op: str  # "efc" | "attention"
    dense_dim: int  # width of the dense output
    sparse_tokens: int  # number of sparse output tokens (before merge tokens)
    dense_sparse_merge: bool  # append the dense output, projected to extra tokens, to the sparse output
    fm: bool  # add an FM over the sparse output to the dense output
    # The dense op's own choices (e.g. Cross depth/form/rank), sorted (name, value) pairs; empty for ops
    # without any, and then left out of the JSON so archs of the paper's spaces read as before.
    dense_args: tuple[tuple[str, object], ...] = ()

    def arg(self, name: str) -> Any:
        """The dense op's choice `name` (KeyError if the op has none of that name)."""
        return dict(self.dense_args)[name]

    def to_json(self) -> dict[str, Any]:
        out = {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)
               if f.name != "dense_args"}
        if self.dense_args:
            out["dense_args"] = dict(self.dense_args)
        return out


_INT_LISTS = ("dense_idx", "sparse_idx")
_INTS = ("dense_left_idx", "dense_right_idx", "dense_dim", "sparse_tokens")
_STRS = ("dense_op", "sparse_op")
_BOOLS = ("dense_sparse_merge", "fm")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _block_from_json(d: Any, block: int) -> BlockChoice:
    if not isinstance(d, dict):
        raise ArchValidationError(block, "<block>", d, "expected a mapping of choices")
    known = _INT_LISTS + _INTS + _STRS + _BOOLS
    for k in d:
        if k not in known + ("dense_args",):
            raise ArchValidationError(block, str(k), d[k], f"unknown field (known: {', '.join(known)}, dense_args)")
    for k in known:
        if k not in d:
            raise ArchValidationError(block, k, None, "missing field")
    for k in _INT_LISTS:
        v = d[k]
        if not isinstance(v, (list, tuple)) or not all(_is_int(x) for x in v):
            raise ArchValidationError(block, k, v, "expected a list of integers")
    for k in _INTS:
        if not _is_int(d[k]):
            raise ArchValidationError(block, k, d[k], "expected an integer")
    for k in _STRS:
        if not isinstance(d[k], str):
            raise ArchValidationError(block, k, d[k], "expected a string")
    for k in _BOOLS:
        if not isinstance(d[k], bool):
            raise ArchValidationError(block, k, d[k], "expected true or false")
    args = d.get("dense_args", {})
    if not isinstance(args, dict) or not all(isinstance(k, str) and (_is_int(v) or isinstance(v, str))
                                             for k, v in args.items()):
        raise ArchValidationError(block, "dense_args", args, "expected a mapping of names to integers or strings")
    values: dict[str, Any] = {k: (tuple(d[k]) if k in _INT_LISTS else d[k]) for k in known}
    return BlockChoice(**values, dense_args=tuple(sorted(args.items())))


class LiveParts(NamedTuple):
    """Parts of a live block that the output depends on."""

    dense: bool  # the dense output (dense op, plus FM when on) is computed
    sparse: bool  # the sparse op is computed
    merge: bool  # the dense output is merged into the (read) sparse output


@dataclass(frozen=True)
class Arch:
    """A NASRec architecture: one `BlockChoice` per block, block 1 first."""

    blocks: tuple[BlockChoice, ...]
    # Width of every embedding table (one for all, as DLRM's dot products and DCN-v2's cross need); None:
    # the run's (the recipe's `train.embedding_dim`, the supernet's). Left out of the JSON and of `key()`
    # when None, so archs of spaces without `emb_dims` read and hash as before.
    emb_dim: int | None = None
    # Width of single tables, as sorted (sparse field name, width) pairs; 0 drops the field (no table, its
    # token is zeros). A field not listed has the common width above. Narrower tables are zero-padded to the
    # common width for the ops (docs/embedding-search.md). Left out of the JSON and of `key()` when empty.
    table_dims: tuple[tuple[str, int], ...] = ()
    # A first-order (logistic-regression) term: a learned scalar per sparse id, summed over the fields and
    # added to the logit, as FM's and DeepFM's linear part. Left out of the JSON and of `key()` when False.
    first_order: bool = False
    # FM's second-order term over the fields' embeddings (Rendle 2010 Eq. 5, the stem's tokens, not a block's)
    # added to the logit, as FM and DeepFM do; no weights of its own. Left out of the JSON and `key()` when False.
    field_fm: bool = False

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def table_width(self, name: str, common: int) -> int:
        """Width of field `name`'s table when the common width is `common` (0: the field is dropped)."""
        return dict(self.table_dims).get(name, common)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (`json.dumps` it to write a file)."""
        out: dict[str, Any] = {"format": FORMAT, "blocks": [b.to_json() for b in self.blocks]}
        if self.emb_dim is not None:
            out["emb_dim"] = self.emb_dim
        if self.table_dims:
            out["table_dims"] = dict(self.table_dims)
        if self.first_order:
            out["first_order"] = True
        if self.field_fm:
            out["field_fm"] = True
        return out

    def dumps(self) -> str:
        """Canonical JSON text: sorted keys, no spaces (the input of `key()`)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> "Arch":
        """Parse a dict (or JSON text); a malformed block raises ArchValidationError naming block and field."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as e:
                raise ArchValidationError(None, "<json>", None, f"not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ArchValidationError(None, "<root>", type(data).__name__, "expected a mapping")
        if data.get("format", FORMAT) != FORMAT:
            raise ArchValidationError(None, "format", data.get("format"), f"expected {FORMAT!r}")
        blocks = data.get("blocks")
        if not isinstance(blocks, list) or not blocks:
            raise ArchValidationError(None, "blocks", blocks, "expected a non-empty list of blocks")
        emb_dim = data.get("emb_dim")
        if emb_dim is not None and not (_is_int(emb_dim) and emb_dim > 0):
            raise ArchValidationError(None, "emb_dim", emb_dim, "expected a positive integer or no key")
        tables = data.get("table_dims", {})
        if not isinstance(tables, dict) or not all(isinstance(k, str) and _is_int(v) and v >= 0
                                                   for k, v in tables.items()):
            raise ArchValidationError(None, "table_dims", tables,
                                      "expected a mapping of sparse field names to widths >= 0 (0 drops the field)")
        flags = {k: data.get(k, False) for k in ("first_order", "field_fm")}
        for k, v in flags.items():
            if not isinstance(v, bool):
                raise ArchValidationError(None, k, v, "expected true or false")
        return cls(tuple(_block_from_json(b, i + 1) for i, b in enumerate(blocks)), emb_dim,
                   tuple(sorted(tables.items())), **flags)

    def key(self) -> str:
        """Stable de-duplication hash (sha1, 16 hex digits) of the choices that shape the network.

        Equal for two archs iff they build the same network: only the choices `live_parts` says are
        used enter it (dead blocks, a dense op whose output nothing reads, unused inputs are left out).
        """
        parts = []
        for i, (need_d, need_s, merge) in self.live_parts().items():
            b = self.blocks[i - 1]
            d: dict[str, Any] = {}
            if need_d:
                spec = op_spec(b.dense_op)
                d.update(dense_op=b.dense_op, fm=b.fm)
                if not spec.keeps_width(dict(b.dense_args)):
                    d.update(dense_dim=b.dense_dim)
                if b.dense_args:
                    d.update(dense_args=spec.shaping(dict(b.dense_args)) if spec.shaping else dict(b.dense_args))
                if is_binary(b.dense_op):
                    d.update(dense_left_idx=b.dense_left_idx, dense_right_idx=b.dense_right_idx)
                else:
                    d.update(dense_idx=list(b.dense_idx))
                if dense_reads_sparse(b.dense_op):
                    d.update(sparse_idx=list(b.sparse_idx))
            if need_s:
                spec = op_spec(b.sparse_op)
                d.update(sparse_op=b.sparse_op)
                if spec.sized:
                    d.update(sparse_tokens=b.sparse_tokens)
                if spec.reads_sparse:
                    d.update(sparse_idx=list(b.sparse_idx))
            d.update(merge=merge)
            parts.append([i, d])
        top = [self.num_blocks, parts] + ([{"emb_dim": self.emb_dim}] if self.emb_dim is not None else [])
        if self.table_dims:
            top.append({"table_dims": dict(self.table_dims)})
        if self.first_order:
            top.append({"first_order": True})
        if self.field_fm:
            top.append({"field_fm": True})
        text = json.dumps(top, sort_keys=True, separators=(",", ":"))
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    def live_parts(self) -> dict[int, "LiveParts"]:
        """For each block the output depends on: which of its parts are computed (see `LiveParts`).

        The head reads both outputs of the last block. A block's dense output d = dense_op + FM(sparse) is
        needed if a later needed part reads it or it is merged into a read sparse output; its sparse op
        output is needed if a later needed part reads it (sparse ops, dense ops that read sparse inputs) or
        FM feeds a needed d.
        Walking from the last block back, every part is settled before its sources are.
        """
        n = self.num_blocks
        dense_read, sparse_read = {n}, {n}
        out: dict[int, LiveParts] = {}
        for i in range(n, 0, -1):
            b = self.blocks[i - 1]
            need_d = i in dense_read or (b.dense_sparse_merge and i in sparse_read)
            need_s = i in sparse_read or (b.fm and need_d)
            if not (need_d or need_s):
                continue
            out[i] = LiveParts(need_d, need_s, b.dense_sparse_merge and i in sparse_read)
            if need_d:
                if is_binary(b.dense_op):
                    dense_read.update((b.dense_left_idx, b.dense_right_idx))
                else:
                    dense_read.update(b.dense_idx)
                if dense_reads_sparse(b.dense_op):
                    sparse_read.update(b.sparse_idx)
            if need_s and op_spec(b.sparse_op).reads_sparse:
                sparse_read.update(b.sparse_idx)
        return dict(sorted(out.items()))

    def live_blocks(self) -> tuple[int, ...]:
        """1-based indices of the blocks the output depends on (see `live_parts`)."""
        return tuple(self.live_parts())
