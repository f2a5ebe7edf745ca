"""How many one-choice edits separate two archs: `SearchSpace.mutate`'s step (one choice of one block re-drawn,
or one arch-level choice) counted from one arch to the network of another."""

from __future__ import annotations

from typing import Any

from ctrnas.space.arch import Arch, BlockChoice
from ctrnas.space.ops import dense_reads_sparse, is_binary, op_spec


def _sparse_read(arch: Arch) -> set[int]:
    """Blocks whose sparse output a live part reads (the head reads the last block's), as `Arch.live_parts`."""
    read = {arch.num_blocks}
    for i, parts in arch.live_parts().items():
        b = arch.blocks[i - 1]
        if (parts.dense and dense_reads_sparse(b.dense_op)) or (parts.sparse and op_spec(b.sparse_op).reads_sparse):
            read.update(b.sparse_idx)
    return read


def _depends_on(arch: Arch) -> list[tuple[int, str]]:
    """The (block, field) choices `arch`'s network depends on: those `Arch.key` reads (dense args apart)."""
    out, read = [], _sparse_read(arch)
    for i, parts in arch.live_parts().items():
        b = arch.blocks[i - 1]
        fields = []
        if parts.dense:
            fields += ["dense_op", "fm"]
            if not op_spec(b.dense_op).keeps_width(dict(b.dense_args)):
                fields.append("dense_dim")
            fields += ["dense_left_idx", "dense_right_idx"] if is_binary(b.dense_op) else ["dense_idx"]
            if dense_reads_sparse(b.dense_op):
                fields.append("sparse_idx")
        if parts.sparse:
            fields.append("sparse_op")
            spec = op_spec(b.sparse_op)
            if spec.sized:
                fields.append("sparse_tokens")
            if spec.reads_sparse:
                fields.append("sparse_idx")
        if i in read:  # a merge adds tokens to a sparse output that is read
            fields.append("dense_sparse_merge")
        out += [(i, f) for f in dict.fromkeys(fields)]
    return out


def _shaping_args(b: BlockChoice) -> dict[str, Any]:
    spec = op_spec(b.dense_op)
    args = dict(b.dense_args)
    return spec.shaping(args) if spec.shaping else args


def edit_distance(src: Arch, dst: Arch) -> int:
    """The fewest one-choice edits (`SearchSpace.mutate` steps) that turn `src` into an arch with `dst`'s network.

    Each choice `dst`'s network depends on (`Arch.key`'s) where `src` holds another value costs one edit; a
    dense op's own choices (a cross's depth, form, rank) cost one each when the two blocks have the same op (a
    new op draws its choices with it); the embedding width, each table width and each logit term one each.
    Choices of parts `dst` does not use cost nothing. Not symmetric: `src`'s dead blocks may already hold what
    `dst` needs. 0 exactly when the two build the same network.
    """
    if src.num_blocks != dst.num_blocks:
        raise ValueError(f"archs of {src.num_blocks} and {dst.num_blocks} blocks: no edit changes the block count")
    n = 0
    for i, name in _depends_on(dst):
        a, b = src.blocks[i - 1], dst.blocks[i - 1]
        n += getattr(a, name) != getattr(b, name)
        if name == "dense_op" and a.dense_op == b.dense_op:  # the args `dst` keys on, as `src` holds them
            n += sum(a.arg(k) != v for k, v in _shaping_args(b).items())
    n += src.emb_dim != dst.emb_dim
    tables = dict(src.table_dims), dict(dst.table_dims)
    n += sum(tables[0].get(k) != tables[1].get(k) for k in set(tables[0]) | set(tables[1]))
    n += (src.first_order != dst.first_order) + (src.field_fm != dst.field_fm)
    return int(n)
