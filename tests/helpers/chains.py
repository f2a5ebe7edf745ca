"""Chains of one dense op (each block reads the previous one): the archs the numerical-safety tests train."""

from __future__ import annotations

from ctrnas.space import Arch
from ctrnas.space.arch import BlockChoice


def chain_arch(op: str, depth: int, dense_dim: int = 16, tokens: int = 4, fm: bool = True) -> Arch:
    """`depth` blocks of dense op `op` (and EFC), block i reading block i-1's outputs; block 1 adds FM
    (the one way besides Dot into the dense path when the dense features are constant) unless `fm` is off."""
    return Arch(tuple(
        BlockChoice(dense_idx=(i - 1,), sparse_idx=(i - 1,), dense_left_idx=i - 1, dense_right_idx=i - 1,
                    dense_op=op, sparse_op="efc", dense_dim=dense_dim, sparse_tokens=tokens,
                    dense_sparse_merge=False, fm=fm and i == 1)
        for i in range(1, depth + 1)))


def search_of(archs, fitness_name: str = "params"):
    """A search-stage result whose history holds `archs` in that order (rank 0 first)."""
    import math

    from ctrnas.pipeline.results import SearchStageResult
    from ctrnas.search.fitness import ScoreCache
    from ctrnas.search.history import History, HistoryRecord
    from ctrnas.search.runner import SearchResult

    hist = History([HistoryRecord(index=i, generation=0, key=a.key(), arch=a.to_json(), value=float(-i),
                                  params=math.nan, flops=math.nan) for i, a in enumerate(archs)])
    return SearchStageResult(SearchResult(hist, True, ScoreCache()), "proxy", fitness_name, True, 0.0)
