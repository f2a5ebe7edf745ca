"""Analytic parameter and FLOP counts of a subnet, without building it.

Conventions (chosen to match `torch.utils.flop_counter.FlopCounterMode` over the exported model):
FLOPs are per example, 2 x multiply-adds of matrix products (linear layers, attention products, the
Dot-Product bmm); embedding lookups, biases, norms and elementwise ops are not counted.
"""

from __future__ import annotations

from ctrnas.data.schema import DatasetSchema
from ctrnas.space import Arch, SearchSpace, SpaceConfig, get_space
from ctrnas.supernet.blocks import FM, Merge, op_class
from ctrnas.supernet.blocks.cross import Cross
from ctrnas.supernet.blocks.interaction import Interaction
from ctrnas.supernet.compact import compacts, split_dots
from ctrnas.supernet.elastic import linear_cost
from ctrnas.supernet.layout import Dims, resolve
from ctrnas.supernet.supernet import table_widths


def _costs(schema: DatasetSchema, space, arch: Arch, emb_dim: int | None) -> tuple[int, int, Dims]:
    space = get_space(space)
    dims = Dims.of(schema, space.config, arch.emb_dim or emb_dim)  # the arch's own width wins
    plan = resolve(dims, space.validate(arch))
    widths = table_widths(arch, schema.sparse_names, dims.emb)
    split = split_dots(plan.blocks, widths, dims.emb, arch.field_fm)  # the export's DLRM dots in two products
    params = flops = 0
    for io in plan.blocks:
        if compacts(io, widths, dims.emb):  # the export's cross runs on the tables' real positions only
            parts = [Cross.cost(dims, io, tok_width=sum(widths))]
        elif split and io.dense_ops == ("interaction",):
            parts = [Interaction.cost(dims, io, dot_width=split)]
        else:
            parts = [op_class(n).cost(dims, io) for n in io.dense_ops]
        parts += [op_class(n).cost(dims, io) for n in io.sparse_ops]
        if io.fm:
            parts.append(FM.cost(dims, io.dense_dim))
        if io.merge:
            parts.append(Merge.cost(dims, io.dense_dim))
        params += sum(p for p, _ in parts)
        flops += sum(f for _, f in parts)
    p, f = linear_cost(plan.head_in, 1)
    return params + p, flops + f, dims


def count_params(schema: DatasetSchema, space: str | SpaceConfig | SearchSpace, arch: Arch,
                 emb_dim: int | None = None, include_embeddings: bool = False, row_cap: int | None = None) -> int:
    """Trainable parameters of the exported subnet; embedding tables count only if `include_embeddings`
    (rows capped at `row_cap` as in the stem). `emb_dim` is the run's width, for archs without their own."""
    params, _, dims = _costs(schema, space, arch, emb_dim)
    if include_embeddings:
        params += _table_cells(schema, arch, dims.emb, row_cap)
    return params


def _table_cells(schema: DatasetSchema, arch: Arch, common: int, row_cap: int | None) -> int:
    """Cells of the arch's tables; a first-order term (`Arch.first_order`) adds a 1-wide table per kept field."""
    widths = table_widths(arch, schema.sparse_names, common)
    if arch.first_order:
        widths = [w + min(w, 1) for w in widths]
    return sum(max(min(c, row_cap) if row_cap else c, 1) * w for c, w in zip(schema.cardinalities, widths))


def embedding_bytes(schema: DatasetSchema, arch: Arch, emb_dim: int, row_cap: int | None = None) -> int:
    """Bytes of the subnet's embedding tables: rows (the data's cardinality, capped at `row_cap` as in the
    stem) x its width (`Arch.table_dims`, else the arch's or the run's `emb_dim`, plus 1 with a first-order
    term) x 4 (float32)."""
    return 4 * _table_cells(schema, arch, arch.emb_dim or emb_dim, row_cap)


def count_flops(schema: DatasetSchema, space: str | SpaceConfig | SearchSpace, arch: Arch,
                emb_dim: int | None = None) -> int:
    """FLOPs per example of the exported subnet (embedding lookups excluded; see module docstring)."""
    return _costs(schema, space, arch, emb_dim)[1]
