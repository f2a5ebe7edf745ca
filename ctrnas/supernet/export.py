"""Standalone subnets: `export(supernet, arch)` copies the chosen slices into plain modules.

The result holds only the live blocks' chosen ops at their widths (plain `nn.Linear`/`nn.LayerNorm`/
`nn.MultiheadAttention`), a copy of the embedding stem and the head. Its forward equals the supernet
path of `arch`. The part after the embedding lookup (`DenseNet`) compiles with TorchScript.
"""


import copy
import math
from typing import List

import torch
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.space import Arch, is_binary, reads_raw
from ctrnas.supernet.blocks.base import as_index
from ctrnas.supernet.compact import compact_cross, compacts, split_dots, use_split_dots
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.supernet.supernet import field_fm, first_order_sum, table_widths


class FixedBlock(nn.Module):
    """One exported block; inputs are list positions of the exported sources (0 = stem)."""

    dense_idx: List[int]  # annotated for TorchScript (an empty list has no inferable type)
    sparse_idx: List[int]

    def __init__(self, dense_idx: list[int], sparse_idx: list[int], left: int, right: int, binary: bool,
                 dense_op: nn.Module | None, sparse_op: nn.Module | None, fm: nn.Module | None, merge: nn.Module | None,
                 dense_raw: bool = False, sparse_raw: bool = False):
        super().__init__()
        self.dense_idx, self.sparse_idx = dense_idx, sparse_idx
        self.dense_raw, self.sparse_raw = dense_raw, sparse_raw  # the op reads the stem's tokens instead
        self.left, self.right, self.binary = left, right, binary
        self.dense_op, self.sparse_op, self.fm, self.merge = dense_op, sparse_op, fm, merge

    def forward(self, dense_outs: list[torch.Tensor], sparse_outs: list[torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        # Parts the output does not depend on were not exported: empty tensors stand in (never read).
        none = torch.empty(0)
        sparse_x, dense_x, left, right = none, none, none, none
        if len(self.sparse_idx) > 0:
            sparse_x = torch.cat([sparse_outs[j] for j in self.sparse_idx], dim=1)
        if self.binary:
            left, right = dense_outs[self.left], dense_outs[self.right]
        elif len(self.dense_idx) > 0:
            dense_x = torch.cat([dense_outs[j] for j in self.dense_idx], dim=1)
        d, s = none, none
        dense_op = self.dense_op
        if dense_op is not None:
            d = dense_op(dense_x, sparse_outs[0] if self.dense_raw else sparse_x, left, right)
        sparse_op = self.sparse_op
        if sparse_op is not None:
            s = sparse_op(dense_x, sparse_outs[0] if self.sparse_raw else sparse_x, left, right)
        fm = self.fm
        if fm is not None:
            d = d + fm(s)
        merge = self.merge
        if merge is not None:
            s = torch.cat([s, merge(d)], dim=1)
        return d, s


class DenseNet(nn.Module):
    """Everything after the embedding lookup: dense [B, n_dense], tokens [B, F, E] -> logits [B]."""

    def __init__(self, blocks: list[FixedBlock], head: nn.Linear):
        super().__init__()
        self.blocks, self.head = nn.ModuleList(blocks), head

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        dense_outs, sparse_outs = [dense], [sparse]
        for blk in self.blocks:
            d, s = blk(dense_outs, sparse_outs)
            dense_outs.append(d)
            sparse_outs.append(s)
        return self.head(torch.cat([dense_outs[-1], sparse_outs[-1].flatten(1)], dim=1)).squeeze(1)


class ExportedModel(nn.Module):
    """A standalone CTR model: `forward(dense, kjt) -> logits [B]`; carries its arch, schema and space.
    `first_order`: the 1-wide stem of the arch's first-order term (`Arch.first_order`), or None; the FM of the
    fields' embeddings (`Arch.field_fm`) has no weights: the arch says whether it is added."""

    def __init__(self, stem: EmbeddingStem, net: DenseNet, arch: Arch, space_config, schema,
                 first_order: EmbeddingStem | None = None):
        super().__init__()
        self.stem, self.net = stem, net
        self.first_order = first_order
        self.field_fm = arch.field_fm
        self.arch, self.space_config, self.schema = arch, space_config, schema
        self.side_by_side = False  # the net takes the lookups side by side (`ctrnas.supernet.compact.split_dots`)

    def stems(self) -> list[EmbeddingStem]:
        """Every embedding stem of the model: the tokens' and, with a first-order term, its 1-wide one."""
        return [self.stem] + ([self.first_order] if self.first_order is not None else [])

    def forward(self, dense: torch.Tensor, kjt: KeyedJaggedTensor) -> torch.Tensor:
        tokens = self.stem.lookups(kjt) if self.side_by_side else self.stem(kjt)
        logits = self.net(dense, tokens)
        if self.field_fm:
            logits = logits + field_fm(tokens)
        if self.first_order is not None:
            logits = logits + first_order_sum(self.first_order(kjt))
        return logits


def _copy_stem(stem: EmbeddingStem) -> EmbeddingStem:
    return copy.deepcopy(stem)  # faster than building a new EmbeddingBagCollection


@torch.no_grad()
def narrow_stem(stem: EmbeddingStem, widths: list[int]) -> EmbeddingStem:
    """A stem of per-field `widths` holding the first columns of `stem`'s tables (the supernet path's mask)."""
    out = EmbeddingStem(stem.schema, stem.dim, stem.row_cap, widths).to(stem.embedding_parameters()[0].device)
    for n, w in zip(stem.names, widths):
        if w:
            out.ebc.embedding_bags[f"t_{n}"].weight.copy_(stem.ebc.embedding_bags[f"t_{n}"].weight[:, :w])
    out.use_sparse_gradients(stem.sparse_gradients)
    return out


EMBEDDING_INITS = ("torchrec", "nasrec")
DENSE_INITS = ("nasrec", "torchrec")


@torch.no_grad()
def reinit(model: nn.Module, seed: int = 0, embedding_init: str = "nasrec", dense_init: str = "nasrec") -> nn.Module:
    """Fresh initialisation from `seed`.

    Dense layers ("nasrec", NASRec's): Xavier-uniform linears and cross kernels (zero bias), unit/zero
    LayerNorm, Xavier attention projections. "torchrec": the baselines' own init, i.e. PyTorch's `nn.Linear`
    default (Kaiming-uniform with a = sqrt(5), bias uniform in +-1/sqrt(fan_in)), which TorchRec's MLP and
    DLRM arches keep, and Xavier-normal cross kernels with zero bias as TorchRec's crossnet modules draw.
    Embedding tables Xavier-normal ("nasrec") or, like TorchRec's EmbeddingBagConfig default and the
    baselines, uniform in +-sqrt(1 / rows) ("torchrec").
    """
    if embedding_init not in EMBEDDING_INITS:
        raise ValueError(f"embedding_init must be one of {EMBEDDING_INITS}, got {embedding_init!r}")
    if dense_init not in DENSE_INITS:
        raise ValueError(f"dense_init must be one of {DENSE_INITS}, got {dense_init!r}")
    g = torch.Generator().manual_seed(seed)
    for name, p in sorted(model.named_parameters()):
        if "bias" in name.split("."):
            nn.init.zeros_(p)  # TorchRec's CrossNet keeps its biases as [n, 1] columns: zero them like any bias
        elif p.dim() >= 2:
            if "embedding_bags" not in name:
                nn.init.xavier_uniform_(p, generator=g)
            elif embedding_init == "nasrec":
                nn.init.xavier_normal_(p, generator=g)
            else:
                bound = (1.0 / p.shape[0]) ** 0.5
                nn.init.uniform_(p, -bound, bound, generator=g)
        elif name.endswith("weight"):
            nn.init.ones_(p)  # LayerNorm scale
        else:
            nn.init.zeros_(p)
    if dense_init == "torchrec":
        _torchrec_dense(model, g)
    return model


def _torchrec_dense(model: nn.Module, g: torch.Generator) -> None:
    """Re-draw linears and cross kernels as PyTorch / TorchRec do (see `reinit`); attention keeps its own."""
    inside_attention = {f"{n}.{c}" for n, m in model.named_modules() if isinstance(m, nn.MultiheadAttention)
                        for c, _ in m.named_modules() if c}
    for name, mod in sorted(model.named_modules()):
        if isinstance(mod, nn.Linear) and name not in inside_attention:
            if mod.weight.numel():  # an empty one (no dense columns) has nothing to draw, and torch warns
                nn.init.kaiming_uniform_(mod.weight, a=math.sqrt(5), generator=g)  # nn.Linear.reset_parameters
            if mod.bias is not None:
                bound = 1 / math.sqrt(mod.in_features) if mod.in_features > 0 else 0.0
                nn.init.uniform_(mod.bias, -bound, bound, generator=g)
    for name, p in sorted(model.named_parameters()):
        if name.split(".")[-2].endswith("kernels"):  # TorchRec crossnets' kernels, W/V/U/C_kernels
            nn.init.xavier_normal_(p, generator=g)


def export(supernet, arch: Arch, init: str = "inherit", seed: int = 0, copy_stem: bool = True,
           embedding_init: str = "nasrec", dense_init: str = "nasrec", compact: bool = True) -> ExportedModel:
    """Standalone copy of subnet `arch`: `init="inherit"` keeps the supernet's weights, `"fresh"` re-draws them.

    `copy_stem=False` hands the supernet's embedding stem itself to the model instead of a copy (saves a
    second set of full-size tables when the supernet is discarded right after, as for training from scratch;
    with `init="fresh"` the supernet's tables are re-drawn too). An arch with its own `emb_dim` exports, with
    fresh weights only, from the supernet's space at that width (`ctrnas.supernet.widths`). `embedding_init` and
    `dense_init` pick how `"fresh"` draws the tables and the other weights (see `reinit`). With narrower tables,
    a cross over the stem's tokens runs on their real positions only, and DLRM's dots, when they alone read the
    tokens, run in two narrower products (`ctrnas.supernet.compact`; the same logits); `compact=False` keeps
    both on the padded tokens.
    """
    if init not in ("inherit", "fresh"):
        raise ValueError(f"init must be 'inherit' or 'fresh', got {init!r}")
    if arch.emb_dim is not None and arch.emb_dim != supernet.emb_dim:
        from ctrnas.supernet.widths import at_width

        supernet, copy_stem = at_width(supernet, arch.emb_dim, init), False  # its stem is new: no copy needed
    ix = supernet.indexed(arch)
    device = supernet.head.weight.device
    widths = table_widths(arch, supernet.schema.sparse_names, supernet.emb_dim)
    pos = {0: 0}
    blocks = []
    crosses = []  # (block position, dense inputs) of the crosses to compact (ctrnas.supernet.compact)
    for k, io in enumerate(ix.plan.blocks, start=1):
        pos[io.index] = k
        sb = supernet.blocks[io.index - 1]
        cols = _Cols(as_index(io.dense_cols, device), as_index(io.tok_cols, device))
        binary = bool(io.dense_ops) and is_binary(io.dense_ops[0])
        blocks.append(FixedBlock(
            dense_idx=[pos[j] for j in io.dense_idx], sparse_idx=[pos[j] for j in io.sparse_idx],
            left=pos[io.left], right=pos[io.right], binary=binary,
            dense_op=sb.dense_ops[io.dense_ops[0]].extract(io, cols) if io.dense_ops else None,
            sparse_op=sb.sparse_ops[io.sparse_ops[0]].extract(io, cols) if io.sparse_ops else None,
            fm=sb.fm.extract(io.dense_dim) if io.fm else None,
            merge=sb.merge.extract(io.dense_dim) if io.merge else None,
            dense_raw=bool(io.dense_ops) and reads_raw(io.dense_ops[0]),
            sparse_raw=bool(io.sparse_ops) and reads_raw(io.sparse_ops[0])))
        if compact and compacts(io, widths, supernet.emb_dim):
            crosses.append((k - 1, io.dense_in))
    head = supernet.head.extract(None, as_index(ix.plan.head_cols, device))
    if any(w != supernet.emb_dim for w in widths):
        stem = narrow_stem(supernet.stem, widths)
    else:
        stem = _copy_stem(supernet.stem) if copy_stem else supernet.stem
    first = None
    if arch.first_order:  # a dropped field (width 0) has no first-order weights either
        kept = [min(w, 1) for w in widths]
        if not all(kept):
            first = narrow_stem(supernet.first_order, kept)
        else:
            first = _copy_stem(supernet.first_order) if copy_stem else supernet.first_order
    model = ExportedModel(stem, DenseNet(blocks, head), arch, supernet.space.config,
                          supernet.schema, first)
    if init == "fresh":
        reinit(model, seed, embedding_init, dense_init)
    for k, dense_in in crosses:  # after the init: the compact model starts as the padded one
        blk = model.net.blocks[k]
        blk.dense_op = compact_cross(blk.dense_op, dense_in, widths, supernet.emb_dim)
    base = split_dots(ix.plan.blocks, widths, supernet.emb_dim, arch.field_fm) if compact else None
    if base is not None:  # DLRM's dots in two narrower products from the lookups side by side
        use_split_dots(model, widths, supernet.emb_dim, base)
    return model


class _Cols:
    def __init__(self, dense_cols, tok_cols):
        self.dense_cols, self.tok_cols = dense_cols, tok_cols
