"""A supernet at another embedding width, for archs that choose their own (`Arch.emb_dim`).

Only a from-scratch export (`init="fresh"`) can use one: every weight is re-drawn from the training seed,
so nothing of the original supernet's weights is needed, only the shapes. The dense part at each width is
built once per supernet and kept while the supernet lives; its tables are one row each, and each export
gets a new stem of full-size tables on the original stem's schema (rows as there: full, capped or tiny).
"""

from __future__ import annotations

import copy
import dataclasses
import weakref

from ctrnas.data.schema import DatasetSchema
from ctrnas.errors import ArchValidationError
from ctrnas.supernet.fresh import build_supernet, undrawn
from ctrnas.supernet.stem import EmbeddingStem

_DENSE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # supernet -> {width: dense-only supernet}


def _one_row(schema: DatasetSchema) -> DatasetSchema:
    return dataclasses.replace(schema, sparse=tuple(dataclasses.replace(f, cardinality=1) for f in schema.sparse))


def dense_at(supernet, dim: int):
    """The supernet's space at embedding width `dim` with one-row tables (built once per supernet and width;
    its weights are zeros, as the export re-draws them)."""
    cache = _DENSE.setdefault(supernet, {})
    if dim not in cache:
        stem = supernet.stem
        net = build_supernet(_one_row(stem.schema), supernet.space, None, dim, stem.row_cap, drawn=False)
        cache[dim] = net.to(supernet.head.weight.device)
    return cache[dim]


def width_variants(supernet) -> dict:
    """{width: dense-only supernet} built so far for `supernet` (what it holds beyond itself)."""
    return dict(_DENSE.get(supernet, {}))


def at_width(supernet, dim: int, init: str):
    """`supernet` itself when `dim` is its width, else a supernet of its space at width `dim` whose stem is a
    new set of tables (of the original stem's rows, zeros until the export draws them); `init` must be "fresh"
    then."""
    if dim == supernet.emb_dim:
        return supernet
    if init != "fresh":
        raise ArchValidationError(None, "emb_dim", dim, f"inherited weights need the supernet's width "
                                  f"{supernet.emb_dim}; an arch of another width exports only with fresh weights")
    dense = dense_at(supernet, dim)
    old = supernet.stem
    with undrawn():  # re-drawn by the export
        stem = EmbeddingStem(old.schema, dim, old.row_cap).to(supernet.head.weight.device)
        # the first-order term's 1-wide tables, full-size as the stem's (none without the choice)
        first = None if supernet.first_order is None else \
            EmbeddingStem(old.schema, 1, old.row_cap).to(supernet.head.weight.device)
    out = copy.copy(dense)  # shares the dense part; nothing is copied
    out._modules = {**dense._modules, "stem": stem, "first_order": first}
    out.schema = supernet.schema
    return out
