"""Readable features of an architecture (op counts, first/last block ops, widths), to see what a trained
metric or a proxy score follows across sampled subnets (the ranking study's attribution table)."""

from __future__ import annotations

from ctrnas.space.arch import Arch

_BINARY = ("sum", "gating")  # dense ops that read dense_left_idx / dense_right_idx instead of dense_idx


def _reads_stem_dense(b) -> bool:
    srcs = (b.dense_left_idx, b.dense_right_idx) if b.dense_op in _BINARY else b.dense_idx
    return 0 in srcs


def arch_features(arch: Arch) -> dict[str, float]:
    """Named numeric features of `arch`; absent op names simply do not appear (treat them as 0)."""
    blocks = arch.blocks
    f: dict[str, float] = {}

    def add(name: str, v: float = 1.0) -> None:
        f[name] = f.get(name, 0.0) + float(v)

    for b in blocks:
        add(f"blocks with dense {b.dense_op}")
        add(f"blocks with sparse {b.sparse_op}")
    add(f"block 1 dense {blocks[0].dense_op}")
    add(f"last block dense {blocks[-1].dense_op}")
    f["blocks with fm"] = float(sum(b.fm for b in blocks))
    f["blocks with dense-sparse merge"] = float(sum(b.dense_sparse_merge for b in blocks))
    f["blocks reading the raw dense input"] = float(sum(_reads_stem_dense(b) for b in blocks))
    f["blocks reading the embeddings"] = float(sum(0 in b.sparse_idx for b in blocks))
    f["total dense width"] = float(sum(b.dense_dim for b in blocks))
    f["total sparse tokens"] = float(sum(b.sparse_tokens for b in blocks))
    f["last block dense width"] = float(blocks[-1].dense_dim)
    return f


def feature_matrix(archs: list[Arch]) -> tuple[list[str], list[list[float]]]:
    """Feature names (sorted) and one row per arch; a feature missing from an arch is 0."""
    rows = [arch_features(a) for a in archs]
    names = sorted({k for r in rows for k in r})
    return names, [[r.get(k, 0.0) for k in names] for r in rows]
