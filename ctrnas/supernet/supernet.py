"""The NASRec weight-sharing supernet (docs/nasrec.md): every op of every block at maximum width.

`supernet(dense, kjt, arch)` runs exactly the subnet `arch` (only its live blocks, its ops at its widths,
reading only its chosen inputs, by weight slicing); `supernet(dense, kjt, full=True)` runs every op of
every block at maximum width with all connections, as NASRec's full-supernet warm-up does.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.schema import DatasetSchema
from ctrnas.errors import ArchValidationError
from ctrnas.space import Arch, SearchSpace, SpaceConfig, get_space
from ctrnas.supernet.blocks import FM, Merge, op_class
from ctrnas.supernet.blocks.fm import fm_interaction
from ctrnas.supernet.blocks.base import OpInput, as_index
from ctrnas.supernet.elastic import ElasticLinear
from ctrnas.supernet.layout import BlockIO, Dims, Plan, resolve, resolve_full
from ctrnas.supernet.stem import EmbeddingStem


class SuperBlock(nn.Module):
    """Choice block i: all candidate dense/sparse ops, FM and merge, sharing max-size weights."""

    def __init__(self, dims: Dims, config: SpaceConfig, i: int):
        super().__init__()
        self.index = i
        self.dense_ops = nn.ModuleDict({n: op_class(n)(dims, i) for n in config.dense_ops})
        self.sparse_ops = nn.ModuleDict({n: op_class(n)(dims, i) for n in config.sparse_ops})
        self.fm = FM(dims) if True in config.fm else None
        self.merge = Merge(dims) if dims.merge_tokens else None

    def forward(self, io: BlockIO, x: OpInput) -> tuple[torch.Tensor, torch.Tensor]:
        # Several ops only in full mode; none when the subnet never reads that output.
        dense = sum(self.dense_ops[n](io, x) for n in io.dense_ops) if io.dense_ops else None
        sparse = sum(self.sparse_ops[n](io, x) for n in io.sparse_ops) if io.sparse_ops else None
        if io.fm:
            dense = dense + self.fm(sparse, io.dense_dim)
        if io.merge:
            sparse = torch.cat([sparse, self.merge(dense)], dim=1)
        return dense, sparse


class _Indexed:
    """A resolved plan plus its index tensors (on the weights' device), cached per (arch, device)."""

    def __init__(self, plan: Plan, device: torch.device, mask: torch.Tensor | None = None,
                 first_order: torch.Tensor | None = None, field_fm: bool = False):
        self.plan = plan
        self.field_fm = field_fm  # add FM's second-order term over the stem's tokens (`Arch.field_fm`)
        # [F, 1] of 0/1, the fields whose first-order weights the arch adds (a dropped field's are not), or
        # None: the arch has no first-order term
        self.first_order = first_order
        self.cols = [(as_index(io.dense_cols, device), as_index(io.tok_cols, device)) for io in plan.blocks]
        self.head_cols = as_index(plan.head_cols, device)
        self.mask = mask  # [F, E] of 0/1 for archs with narrower tables (`table_mask`), else None


def table_widths(arch: Arch, names, common: int) -> list[int]:
    """Each sparse field's table width in `arch` (in `names` order), checked against the data's fields."""
    known = set(names)
    for name, w in arch.table_dims:
        if name not in known:
            raise ArchValidationError(None, f"table_dims.{name}", w, f"no sparse field of that name in the data "
                                      f"(it has {len(names)}: {', '.join(list(names)[:8])}...)")
        if w > common:
            raise ArchValidationError(None, f"table_dims.{name}", w, f"wider than the common width {common}")
    widths = [arch.table_width(n, common) for n in names]
    if not any(widths):
        raise ArchValidationError(None, "table_dims", dict(arch.table_dims), "drops every sparse field: keep one")
    return widths


def table_mask(widths: list[int], common: int, device: torch.device) -> torch.Tensor | None:
    """[F, E] mask keeping the first `widths[f]` columns of field f's token: the supernet's full-width tables
    then give exactly the tokens of the arch's narrower (zero-padded) ones (as OptEmbed masks dimensions)."""
    if all(w == common for w in widths):
        return None
    return (torch.arange(common).unsqueeze(0) < torch.tensor(widths).unsqueeze(1)).float().to(device)


def first_order_sum(weights: torch.Tensor, kept: torch.Tensor | None = None) -> torch.Tensor:
    """The first-order term of the logit: per-id scalars [B, F, 1] summed over the (kept) fields -> [B]."""
    return (weights if kept is None else weights * kept).sum(dim=(1, 2))


def field_fm(tokens: torch.Tensor) -> torch.Tensor:
    """FM's second-order term over the fields' embeddings, Rendle (2010) Eq. 5: [B, F, E] -> [B]."""
    return fm_interaction(tokens).sum(dim=1)


class Supernet(nn.Module):
    """NASRec supernet over `space` for `schema`; `emb_dim` defaults to the space's (16)."""

    def __init__(self, schema: DatasetSchema, space: str | SpaceConfig | SearchSpace = "nasrec-full",
                 emb_dim: int | None = None, row_cap: int | None = None):
        super().__init__()
        space = get_space(space)
        self.space = space.for_fields(schema.sparse_names, emb_dim or space.config.emb_dim)
        self.schema, self.row_cap = schema, row_cap
        self.dims = Dims.of(schema, self.space.config, emb_dim)
        self.stem = EmbeddingStem(schema, self.dims.emb, row_cap)
        self.blocks = nn.ModuleList(SuperBlock(self.dims, self.space.config, i)
                                    for i in range(1, self.space.config.num_blocks + 1))
        self.head = ElasticLinear(self.dims.head_in, 1)
        # the first-order term's per-id scalars (`Arch.first_order`), built last so that the other weights
        # draw as in a space without the choice
        self.first_order = EmbeddingStem(schema, 1, row_cap) if True in self.space.config.first_order else None
        self._plans: OrderedDict[tuple, _Indexed] = OrderedDict()

    @property
    def emb_dim(self) -> int:
        return self.dims.emb

    def indexed(self, arch: Arch | None = None, full: bool = False) -> _Indexed:
        """The resolved plan of `arch` (or the full supernet), validated and cached (LRU of 256)."""
        if not full and arch is None:
            raise ArchValidationError(None, "arch", None, "pass an architecture or full=True")
        if not full and arch.emb_dim not in (None, self.dims.emb):
            raise ArchValidationError(None, "emb_dim", arch.emb_dim, f"this supernet's tables are {self.dims.emb} "
                                      "wide: its weight-sharing path scores only archs of that width")
        device = self.head.weight.device
        key = ("<full>" if full else arch, device)
        hit = self._plans.get(key)
        if hit is None:
            if full:
                kept = torch.ones(len(self.schema.sparse), 1, device=device) if self.first_order is not None else None
                hit = _Indexed(resolve_full(self.dims, self.space.config), device, None, kept,
                               True in self.space.config.field_fm)
            else:
                plan = resolve(self.dims, self.space.validate(arch))
                widths = table_widths(arch, self.schema.sparse_names, self.dims.emb)
                kept = torch.tensor([[float(w > 0)] for w in widths], device=device) if arch.first_order else None
                hit = _Indexed(plan, device, table_mask(widths, self.dims.emb, device), kept, arch.field_fm)
            self._plans[key] = hit
            if len(self._plans) > 256:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
        return hit

    def forward(self, dense: torch.Tensor, kjt: KeyedJaggedTensor, arch: Arch | None = None,
                full: bool = False) -> torch.Tensor:
        """Logits [B] of subnet `arch` (or of the full supernet when `full`)."""
        ix = self.indexed(arch, full)
        tokens = self.stem(kjt)
        logits = self.forward_tokens(dense, tokens, ix)
        if ix.field_fm:
            logits = logits + field_fm(tokens if ix.mask is None else tokens * ix.mask)
        if ix.first_order is not None:
            logits = logits + first_order_sum(self.first_order(kjt), ix.first_order)
        return logits

    def forward_tokens(self, dense: torch.Tensor, sparse: torch.Tensor, ix: _Indexed) -> torch.Tensor:
        """The part after the embedding lookup: dense [B, n_dense], sparse tokens [B, F, E] -> logits [B]
        (the tokens of the supernet's full-width tables; an arch's narrower tables are masked here)."""
        if ix.mask is not None:
            sparse = sparse * ix.mask
        dense_outs, sparse_outs = {0: dense}, {0: sparse}
        d = s = None
        for io, (dcols, tcols) in zip(ix.plan.blocks, ix.cols):
            x = OpInput(
                dense=torch.cat([dense_outs[j] for j in io.dense_idx], dim=1) if io.dense_idx else None,
                sparse=torch.cat([sparse_outs[j] for j in io.sparse_idx], dim=1) if io.sparse_idx else None,
                left=dense_outs[io.left], right=dense_outs[io.right], dense_cols=dcols, tok_cols=tcols,
                raw=sparse)
            d, s = self.blocks[io.index - 1](io, x)
            dense_outs[io.index], sparse_outs[io.index] = d, s
        return self.head(torch.cat([d, s.flatten(1)], dim=1), None, ix.head_cols).squeeze(1)

    def subnet(self, arch: Arch) -> "SubnetView":
        """A plain module running `arch` on the shared weights; its parameters are only those `arch` uses."""
        return SubnetView(self, arch)


class SubnetView(nn.Module):
    """`arch`'s path through a supernet as an `nn.Module` with `forward(dense, kjt)`.

    It registers only the stem, the ops of the live blocks and the head, so `parameters()` and
    `named_modules()` list what the subnet uses (the tensors are the supernet's full-size shared ones;
    rows/columns outside the subnet's slice get zero gradient).
    """

    def __init__(self, supernet: Supernet, arch: Arch):
        super().__init__()
        object.__setattr__(self, "_supernet", supernet)  # not a submodule: keep unused params out
        self.arch = arch
        ix = supernet.indexed(arch)
        self.stem, self.head = supernet.stem, supernet.head
        if arch.first_order:
            self.first_order = supernet.first_order
        used = nn.ModuleDict()
        for io in ix.plan.blocks:
            blk = supernet.blocks[io.index - 1]
            mods = nn.ModuleDict()
            if io.dense_ops:
                mods["dense"] = blk.dense_ops[io.dense_ops[0]]
            if io.sparse_ops:
                mods["sparse"] = blk.sparse_ops[io.sparse_ops[0]]
            if io.fm:
                mods["fm"] = blk.fm
            if io.merge:
                mods["merge"] = blk.merge
            used[f"block{io.index}"] = mods
        self.blocks = used

    def forward(self, dense: torch.Tensor, kjt: KeyedJaggedTensor) -> torch.Tensor:
        return self._supernet(dense, kjt, self.arch)
