"""The `inherit` rung: children of evolution start from their line's trained weights instead of from scratch.

A line is a seed (or a random draw) and all its descendants. Its root trains the first `budget` steps of its
final-stage training from scratch, as a prefix rung does (the same checkpoint in `RUN/search/prefix/<key>/`,
which the final stage continues), and keeps its weights and Adagrad sums at that step (`graft.pt`). Every
descendant, at any depth, starts from that state: each weight it shares with the root (same block number
of the arch, same name within the block) gets the root's values in their overlapping slice (a wider or
narrower layer keeps the slice both have, a new layer its own initial draw), and so do the optimizer's
sums. A cross over the stem's tokens is matched by position in x0 instead (with mixed table widths an
exported cross keeps only the positions its tables fill, `ctrnas.supernet.compact`): a position both hold
gets the root's values, one only the child holds keeps its draw. Root and descendants then all train
`extra` more steps on the same batches and learning-rate schedule and are scored on the search's validation
rows, so the archs of a line are compared at the same point of training. This is hill climbing by network
morphism (Elsken et al., "Simple and efficient architecture search for CNNs", 2017; Net2Net, Chen et al.
2016) on top of the prefix rung's shared training.

Why: an edit of a strong arch usually changes its log loss by less than the noise of a 40% from-scratch
prefix, and a prefix costs 0.4 of a training per edit; inheriting ranks the edits of one arch as well for a
quarter of the cost (docs/search-quality.md, "How the rungs rank one arch's edits"). A descendant's final
training starts from scratch (the exported model is trained as it will be retrained); a root continues its
prefix checkpoint. Lines are not compared fairly with each other (families learn at different speeds), so
use it with `search.evolution.lineages`, which finishes the best of each line.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctrnas.errors import RecipeError
from ctrnas.pipeline.fitness.rungs import PrefixTrainingFitness, prefix_checkpoint, val_score
from ctrnas.search.fitness import FitnessResult

GRAFT = "graft.pt"  # a root's weights and optimizer sums at the end of its own prefix
LINE = "line.json"  # a descendant's root: {"root": key}


def graft_state(trainer) -> dict:
    """A trainer's weights, buffers and Adagrad state by parameter name, and its step (tensors and numbers:
    the file loads with `weights_only`)."""
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    sums, steps = {}, {}
    for opt in trainer.optimizers:
        for p, st in opt.state.items():
            if "sum" in st:
                sums[names[id(p)]] = st["sum"].detach().clone()
                steps[names[id(p)]] = st["step"].detach().clone()
    weights = {n: t.detach().clone() for n, t in trainer.model.state_dict().items()}
    out = {"weights": weights, "sums": sums, "opt_steps": steps, "step": int(trainer.step),
           "rows_seen": int(trainer.rows_seen), "keeps": {n: k for n, k in cross_keeps(trainer.model).items()
                                                          if k is not None}}
    if (blocks := live_blocks(trainer.model)) is not None:
        out["blocks"] = blocks
    return out


BLOCKS = "net.blocks."  # an exported model's blocks: numbered by position among its live blocks


def live_blocks(model) -> list[int] | None:
    """The arch's block numbers in the order of the exported model's `net.blocks` (its live blocks)."""
    arch = getattr(model, "arch", None)
    return None if arch is None else sorted(arch.live_parts())


def root_names(model, state: dict):
    """name -> the root's name of the same tensor: a block is matched by its number in the arch, not by its
    position among the live blocks, which moves when an edit adds or removes a block (a branch). A block
    the root does not have maps to None. Without the root's block numbers (an older graft file), by name."""
    child, root = live_blocks(model), state.get("blocks")
    if child is None or root is None:
        return lambda n: n
    pos = {int(b): i for i, b in enumerate(root)}

    def name(n: str) -> str | None:
        if not n.startswith(BLOCKS):
            return n
        p, dot, rest = n[len(BLOCKS):].partition(".")  # a tensor's or a module's name
        q = pos.get(child[int(p)])
        return None if q is None else f"{BLOCKS}{q}{dot}{rest}"
    return name


def cross_keeps(model) -> dict:
    """Each Cross's module name -> the positions of x0 it keeps (`ctrnas.supernet.compact`), None: all."""
    from ctrnas.supernet.blocks.cross import FixedCross

    return {n: (m.keep.clone() if m.width else None) for n, m in model.named_modules() if isinstance(m, FixedCross)}


def _overlap(dst, src, dims: tuple[int, ...] = (), keep=None, src_keep=None) -> bool:
    """Copy `src` into the slice of `dst` both shapes cover (same number of dimensions only). Along `dims`
    (a cross's x0 positions) the two hold the positions `keep` / `src_keep` (None: 0, 1, ...): only the
    positions both hold are copied, each to its own place, so a child whose tables differ in width from its
    root's gets the root's values where a padded model would have them."""
    import torch

    if dst.dim() != src.dim():
        return False
    if not dims:
        sl = tuple(slice(0, min(a, b)) for a, b in zip(dst.shape, src.shape))
        dst[sl] = src[sl].to(dst.dtype)
        return True
    own = range(dst.shape[dims[0]]) if keep is None else keep.tolist()
    theirs = {int(p): i for i, p in enumerate(range(src.shape[dims[0]]) if src_keep is None else src_keep.tolist())}
    pairs = [(i, theirs[int(p)]) for i, p in enumerate(own) if int(p) in theirs]
    if not pairs:
        return False
    at, frm = (torch.tensor(x, dtype=torch.long) for x in zip(*pairs))
    index = []
    for d in range(dst.dim()):
        if d in dims:
            src = src.index_select(d, frm)
            index.append(at)
        else:
            n = min(dst.shape[d], src.shape[d])
            src = src.narrow(d, 0, n)
            index.append(torch.arange(n))
    grid = tuple(ix.view([-1 if j == d else 1 for j in range(dst.dim())]) for d, ix in enumerate(index))
    dst[grid] = src.to(dst.dtype)
    return True


def _cross_copy(root, crosses: dict, root_keeps: dict):
    """name -> (dims, keep, the root's keep) for copying the tensor `name` from the root (see `_overlap`)."""
    from ctrnas.supernet.compact import x0_dims

    def where(n: str, t):
        for m, keep in crosses.items():
            if n.startswith(m + "."):
                theirs = root(m)
                return x0_dims(n[len(m) + 1:], t), keep, None if theirs is None else root_keeps.get(theirs)
        return (), None, None
    return where


def graft(trainer, state: dict) -> dict:
    """Start `trainer` (a fresh model's) from a root's `graft_state`: shared weights and Adagrad sums by name
    in their overlapping slice, the root's step and rows. Returns {"copied", "fresh"} counts of tensors."""
    import torch

    copied = fresh = 0
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    root = root_names(trainer.model, state)
    where = _cross_copy(root, cross_keeps(trainer.model), state.get("keeps", {}))
    with torch.no_grad():
        for n, t in trainer.model.state_dict(keep_vars=True).items():
            src = state["weights"].get(root(n) or "")
            data = t.data if isinstance(t, torch.nn.Parameter) else t
            if src is not None and _overlap(data, src, *where(n, data)):
                copied += 1
            else:
                fresh += 1
        for opt in trainer.optimizers:
            for p, st in opt.state.items():
                own = names[id(p)]
                n = root(own) or ""
                if "sum" in st and n in state["sums"] and _overlap(st["sum"], state["sums"][n],
                                                                   *where(own, st["sum"])):
                    st["step"] = state["opt_steps"][n].clone()
    trainer.step, trainer.rows_seen = int(state["step"]), int(state["rows_seen"])
    return {"copied": copied, "fresh": fresh}


class InheritedTrainingFitness:
    """fitness(arch, seed, steps, parent) = validation log loss after the arch's line's first `steps` steps
    and `extra` steps of its own (see the module docstring); a root (no parent, or a parent whose line kept
    no weights) trains from scratch. Needs the run folder. A diverged training scores NaN."""

    maximize = False
    takes_parent = True

    def __init__(self, recipe, data, template, val_rows: int, folder: Path | None, extra: int):
        if folder is None:
            raise RecipeError(recipe.source or "recipe", "search.multifidelity.rungs",
                              "an inherit rung keeps each line's weights in the run folder: give the run an "
                              "output folder")
        if recipe.final_train.embedding_update == "fused":
            raise RecipeError(recipe.source or "recipe", "train.embedding_update",
                              "an inherit rung grafts each table's Adagrad sums by parameter name, which the "
                              "fused kernel keeps inside itself: set embedding_update: sparse")
        self.prefix = PrefixTrainingFitness(recipe, data, template, val_rows, folder)
        self.data, self.val_rows, self.extra = data, val_rows, int(extra)
        self.default_budget = self.prefix.default_budget - self.extra

    def folder(self, key: str) -> Path:
        assert self.prefix.folder is not None
        return prefix_checkpoint(self.prefix.folder, key).parent

    def root_of(self, parent: str) -> str | None:
        """The root whose kept weights a child of `parent` starts from (None: the child is a root itself)."""
        if not parent:
            return None
        if (self.folder(parent) / GRAFT).is_file():
            return parent
        line = self.folder(parent) / LINE
        if line.is_file():
            from ctrnas.safeload import read_json

            record = read_json(line, "lineage record")
            root = record.get("root") if isinstance(record, dict) else None
            if not isinstance(root, str):
                return None
            if (self.folder(root) / GRAFT).is_file():
                return root
        return None

    def __call__(self, arch, seed: int, budget: int | None = None, parent: str = "") -> FitnessResult:
        from ctrnas.files import atomic_write_text
        from ctrnas.safeload import load_weights_file, save_weights_file

        base = self.default_budget if budget is None else int(budget)
        end = min(base + self.extra, self.prefix.default_budget)
        key, root = arch.key(), self.root_of(parent)
        out = self.folder(key)
        if root is None:
            trainer, fit = self.prefix.start(arch, out)
            fit(base, True)
            if not (out / GRAFT).is_file() and trainer.step == base and not trainer.diverged:
                save_weights_file(graft_state(trainer), out / GRAFT, "line's weights")
            fit(end, False)  # the live trainer is at `base` already: no second read of its checkpoint
            meta = {"steps": int(trainer.step), "trained_steps": int(trainer.step)}
        else:
            trainer, fit = self.prefix.start(arch, None)
            counts = graft(trainer, load_weights_file(self.folder(root) / GRAFT, "line's weights"))
            start = trainer.step
            fit(end, False)
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out / LINE, json.dumps({"root": root}))
            meta = {"steps": int(trainer.step), "trained_steps": int(trainer.step) - start, "root": root, **counts}
        return val_score(trainer, self.data, self.val_rows, meta)
