"""Readable features of an architecture (op counts, first/last ops, widths), to see what a trained metric
or a proxy score follows across sampled subnets (the ranking study's attribution table).

Only the parts the output depends on count (`Arch.live_parts`): two encodings of the same network get the
same features."""

from __future__ import annotations

from ctrnas.space.arch import Arch
from ctrnas.space.ops import dense_reads_sparse, is_binary, op_spec, reads_raw


def arch_features(arch: Arch) -> dict[str, float]:
    """Named numeric features of `arch`; absent op names simply do not appear (treat them as 0)."""
    f: dict[str, float] = {name: 0.0 for name in (
        "blocks with fm", "blocks with dense-sparse merge", "blocks reading the raw dense input",
        "blocks reading the embeddings", "total dense width", "total sparse tokens")}

    def add(name: str, v: float = 1.0) -> None:
        f[name] = f.get(name, 0.0) + float(v)

    first = None
    for i, parts in sorted(arch.live_parts().items()):
        b = arch.blocks[i - 1]
        reads_emb = parts.sparse and op_spec(b.sparse_op).reads_sparse and 0 in b.sparse_idx
        if parts.dense:
            first = first or b.dense_op
            add(f"blocks with dense {b.dense_op}")
            add("total dense width", 0 if op_spec(b.dense_op).keeps_width(dict(b.dense_args)) else b.dense_dim)
            add("blocks with fm", b.fm)
            srcs = (b.dense_left_idx, b.dense_right_idx) if is_binary(b.dense_op) else b.dense_idx
            add("blocks reading the raw dense input", 0 in srcs)
            reads_emb = reads_emb or reads_raw(b.dense_op) or (dense_reads_sparse(b.dense_op) and 0 in b.sparse_idx)
        if parts.sparse:
            add(f"blocks with sparse {b.sparse_op}")
            add("total sparse tokens", b.sparse_tokens if op_spec(b.sparse_op).sized else 0)
        add("blocks reading the embeddings", reads_emb)
        add("blocks with dense-sparse merge", parts.merge)
    if first is not None:
        add(f"first dense op {first}")
    if arch.table_dims:  # per-table widths (listed when they differ from the common width)
        f["tables dropped"] = float(sum(w == 0 for _, w in arch.table_dims))
        f["tables narrowed"] = float(sum(w > 0 for _, w in arch.table_dims))
    if arch.first_order:  # absent (0) for archs without one, so other archs' features stay as they were
        f["first-order term"] = 1.0
    if arch.field_fm:
        f["field fm"] = 1.0
    last = arch.blocks[-1]  # the head reads both outputs of the last block: always computed
    add(f"last block dense {last.dense_op}")
    f["last block dense width"] = float(last.dense_dim)
    return f


def feature_matrix(archs: list[Arch]) -> tuple[list[str], list[list[float]]]:
    """Feature names (sorted) and one row per arch; a feature missing from an arch is 0."""
    rows = [arch_features(a) for a in archs]
    names = sorted({k for r in rows for k in r})
    return names, [[r.get(k, 0.0) for k in names] for r in rows]
