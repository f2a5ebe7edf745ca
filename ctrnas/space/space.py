"""Search spaces: sampling, mutation and validation of archs in a `SpaceConfig` (its fields and the presets
are in ctrnas.space.config, re-exported here). Ops come from the op table."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from ctrnas.config import from_dict
from ctrnas.errors import ArchValidationError, RecipeError
from ctrnas.space.arch import Arch, BlockChoice
from ctrnas.space.ops import is_binary, op_spec
from ctrnas.space.config import (CTRNAS_DENSE_DIMS, MACRO_FIELDS, MICRO_FIELDS, NASREC_FULL_DENSE_OPS,  # noqa: F401
                                  NASREC_FULL_SPARSE_OPS, PRESETS, SpaceConfig)


TABLE_MOVES = 0.25  # share of `mutate`'s edits that move a table width, in spaces that search them


class SearchSpace:
    """Samples, mutates and validates `Arch` values of one `SpaceConfig`."""

    def __init__(self, config: SpaceConfig):
        self.config = config

    @property
    def name(self) -> str:
        return self.config.name

    def __repr__(self) -> str:
        return f"SearchSpace({self.config!r})"

    # -- sampling (NASRec "single-operator any-connection", docs/nasrec.md) --------------------------
    def _sample_sources(self, i: int, rng: np.random.Generator) -> tuple[int, ...]:
        c = self.config
        if c.fan_in == "single":
            n = 1
        else:
            n = 1 + int(rng.binomial(min(i - 1, c.max_inputs - 1), 0.5))
        return tuple(sorted(int(x) for x in rng.choice(i, size=n, replace=False)))

    def _sample_field(self, i: int, name: str, rng: np.random.Generator) -> Any:
        if name in ("dense_idx", "sparse_idx"):
            return self._sample_sources(i, rng)
        if name in ("dense_left_idx", "dense_right_idx"):
            return int(rng.integers(i))
        options = self._options(i, name)
        return options[int(rng.integers(len(options)))]  # a Python value from the config, never a numpy scalar

    def _options(self, i: int, name: str) -> tuple[Any, ...]:
        """The values micro field `name` may take in block i (ops meant for the last block only leave the others)."""
        c = self.config
        options = {"dense_op": c.dense_ops, "sparse_op": c.sparse_ops, "dense_dim": c.dense_dims,
                   "sparse_tokens": c.sparse_tokens, "dense_sparse_merge": c.dense_sparse_merge, "fm": c.fm}[name]
        if name in ("dense_op", "sparse_op") and i < c.num_blocks:
            options = tuple(o for o in options if not op_spec(str(o)).last_block_only) or options
        return options

    def _sample_args(self, block: BlockChoice, rng: np.random.Generator) -> BlockChoice | None:
        """`block` with its dense op's own choices drawn uniformly (none for ops without any), or None when
        no choice fits the op's rule (e.g. `concat` with FM on): the caller draws the block again.

        Draws again while the op's rule rejects them (e.g. a full-rank Cross off the raw inputs), so a rule
        narrows the options without a draw of its own; ops without choices draw nothing.
        """
        spec = op_spec(block.dense_op)
        if not spec.args:
            out = dataclasses.replace(block, dense_args=())
            return out if spec.check is None or spec.check(out) is None else None
        for _ in range(1000):
            args = tuple(sorted((n, opts[int(rng.integers(len(opts)))]) for n, opts in spec.args))
            out = dataclasses.replace(block, dense_args=args)
            if spec.check is None or spec.check(out) is None:
                return out
        return None

    def sample(self, rng: np.random.Generator) -> Arch:
        """A random arch: one dense and one sparse op per block, uniform widths, binomial fan-in, and a uniform
        embedding width when the space has a choice (`emb_dims`)."""
        blocks = []
        for i in range(1, self.config.num_blocks + 1):
            for _ in range(1000):
                drawn = BlockChoice(**{f: self._sample_field(i, f, rng) for f in MACRO_FIELDS + MICRO_FIELDS})
                b = self._sample_args(drawn, rng)
                if b is not None:
                    break
            else:
                raise ArchValidationError(i, "dense_args", self.config.name, "no draw fits the ops' rules")
            blocks.append(b)
        emb = self.config.emb_dims
        # drawn after the blocks and only with a choice, so spaces without one sample exactly as before
        arch = Arch(tuple(blocks), emb[int(rng.integers(len(emb)))] if emb else None)
        if self.config.table_dims:
            arch = self._sample_tables(arch, rng)
        # drawn last and only with a choice, so spaces without one sample exactly as before
        for key in ("first_order", "field_fm"):
            values = getattr(self.config, key)
            arch = dataclasses.replace(arch, **{key: values[int(rng.integers(len(values)))] if len(values) > 1
                                                else values[0]})
        return arch

    def _sample_tables(self, arch: Arch, rng: np.random.Generator) -> Arch:
        self._need_tables()
        options = self._table_options(arch)
        for _ in range(1000):
            widths = {n: options[int(rng.integers(len(options)))] for n in self.config.tables}
            if any(widths.values()):  # at least one searched field keeps a table
                return self._with_tables(arch, widths)
        raise ArchValidationError(None, "table_dims", list(self.config.table_dims), "no draw keeps a table")

    # -- per-table widths (Arch.table_dims; docs/embedding-search.md) --------------------------------
    def for_fields(self, names: Sequence[str], emb_dim: int) -> "SearchSpace":
        """This space for data with sparse fields `names` at the run's embedding width `emb_dim`: a space that
        searches table widths gets the fields to search (`tables`, all of them unless the recipe names some)
        and the common width (`emb_dim`); other spaces are returned unchanged."""
        c = self.config
        if not c.table_dims:
            return self
        unknown = [t for t in c.tables if t not in names]
        if unknown:
            raise RecipeError("space", "tables", f"{unknown} are not sparse fields of the data (it has "
                              f"{list(names)})")
        if max(c.table_dims) > max((emb_dim, *c.emb_dims)):
            raise RecipeError("space", "table_dims", f"{list(c.table_dims)} holds widths above every common width "
                              f"({emb_dim}, train.embedding_dim, and emb_dims {list(c.emb_dims)}): narrower tables "
                              "are zero-padded to the common width, never cut")
        return SearchSpace(dataclasses.replace(c, tables=c.tables or tuple(names), emb_dim=emb_dim))

    def at_table_width(self, arch: Arch, width: int) -> Arch:
        """`arch` with every searched field's table `width` wide (a seed at a narrower uniform width)."""
        self._need_tables()
        return self._with_tables(arch, {n: width for n in self.config.tables})

    def drop_tables(self, arch: Arch, names: Sequence[str]) -> Arch:
        """`arch` with the tables of `names` dropped (width 0; searched fields only)."""
        self._need_tables()
        unknown = [n for n in names if n not in self.config.tables]
        if unknown:
            raise ArchValidationError(None, "table_dims", unknown, "not searched fields of the space")
        return self._with_tables(arch, {n: 0 for n in names})

    def narrower(self, arch: Arch, width: int) -> Arch:
        """`arch` with every searched table `width` wide: at that common width when the space may choose it
        (`emb_dims`; its ops then run at that width too), else zero-padded to the arch's own."""
        if width in self.config.emb_dims:
            return self._at_emb_dim(arch, width)
        return self.at_table_width(arch, width)

    def _at_emb_dim(self, arch: Arch, dim: int) -> Arch:
        """`arch` at common width `dim`; tables wider than it (or as wide) take the common width."""
        tables = tuple((n, w) for n, w in arch.table_dims if w < dim)
        return dataclasses.replace(arch, emb_dim=dim, table_dims=tables)

    def _need_tables(self) -> None:
        if not self.config.tables:
            raise ArchValidationError(None, "table_dims", list(self.config.table_dims), "the space does not know "
                                      "the data's sparse fields: use SearchSpace.for_fields(schema.sparse_names, width)")

    def common_width(self, arch: Arch) -> int:
        """The width every table of `arch` has unless `table_dims` says otherwise."""
        return self.config.emb_dim if arch.emb_dim is None else arch.emb_dim

    def _table_options(self, arch: Arch) -> tuple[int, ...]:
        """Widths a table of `arch` may take: the space's choices up to the common width, and that width."""
        common = self.common_width(arch)
        return tuple(sorted({d for d in self.config.table_dims if d <= common} | {common}))

    def _with_tables(self, arch: Arch, widths: dict[str, int]) -> Arch:
        """`arch` with the given table widths; a width equal to the common one is left out (one form per net)."""
        common = self.common_width(arch)
        merged = {**dict(arch.table_dims), **widths}
        return dataclasses.replace(arch, table_dims=tuple(sorted((n, w) for n, w in merged.items() if w != common)))

    def _table_step(self, arch: Arch, rng: np.random.Generator) -> Arch | None:
        """`arch` with one searched field's table one step narrower or wider in the choices (None: no move keeps
        a table)."""
        self._need_tables()
        options = self._table_options(arch)
        common = self.common_width(arch)
        for _ in range(100):
            name = self.config.tables[int(rng.integers(len(self.config.tables)))]
            now = arch.table_width(name, common)
            j = options.index(now) if now in options else 0
            near = [options[k] for k in (j - 1, j + 1) if 0 <= k < len(options)]
            if not near:
                return None
            out = self._with_tables(arch, {name: near[int(rng.integers(len(near)))]})
            if any(out.table_width(n, common) for n in self.config.tables):
                return out
        return None

    @property
    def _micro_fields(self) -> tuple[str, ...]:
        # Only spaces with an op that has its own choices mutate them: the paper's spaces draw as before.
        has_args = any(op_spec(n).args for n in self.config.dense_ops)
        return MICRO_FIELDS + (("dense_args",) if has_args else ())

    def _num_options(self, i: int, name: str) -> int:
        if name in ("dense_idx", "sparse_idx"):
            return 2 if i > 1 else 1  # any block past the first has more than one source set
        if name in ("dense_left_idx", "dense_right_idx"):
            return i
        return len(self._options(i, name))

    def mutate(self, arch: Arch, rng: np.random.Generator) -> Arch:
        """Copy of `arch` with exactly one choice of one block re-drawn to a different value.

        As NASRec's `mutate_spec`: pick a block, then a macro (50%) or micro (50%) field; fields with a
        single option (e.g. connections of block 1) are skipped by drawing again. With `emb_dims`, the
        embedding width is one more choice (an arch without one has the space's `emb_dim`); with
        `first_order` / `field_fm: [false, true]`, so is that term.
        """
        self.validate(arch)
        c = self.config
        micro = self._micro_fields
        # the width is one more micro field, as likely as re-drawing any one of them (e.g. some block's
        # dense_dim); drawn only with a choice, so spaces without one mutate exactly as before
        now = c.emb_dim if arch.emb_dim is None else arch.emb_dim
        if c.emb_dims and rng.random() < 0.5 / len(micro) and (others := [d for d in c.emb_dims if d != now]):
            return self._at_emb_dim(arch, others[int(rng.integers(len(others)))])
        # a logit term flips as often as the width moves (a space without the choice draws nothing)
        for key in ("first_order", "field_fm"):
            if len(getattr(c, key)) > 1 and rng.random() < 0.5 / len(micro):
                return _flip(arch, key)
        # a table width moves one step, in a quarter of the mutations of a space that searches them
        if c.table_dims and rng.random() < TABLE_MOVES and (out := self._table_step(arch, rng)) is not None:
            return out
        for _ in range(1000):
            i = int(rng.integers(1, c.num_blocks + 1))
            group = MACRO_FIELDS if rng.random() < 0.5 else micro
            name = group[int(rng.integers(len(group)))]
            b = arch.blocks[i - 1]
            if name == "dense_args":
                new_b = self._mutate_arg(b, rng)
                if new_b is None:
                    continue
            else:
                if self._num_options(i, name) < 2:
                    continue
                old = getattr(b, name)
                while True:
                    new = self._sample_field(i, name, rng)
                    if new != old:
                        break
                new_b = dataclasses.replace(b, **{name: new})
                if name == "dense_op":
                    new_b = self._sample_args(new_b, rng)  # the new op's own choices
                    if new_b is None:
                        continue
            spec = op_spec(new_b.dense_op)
            if spec.check is not None and spec.check(new_b) is not None:
                continue  # e.g. a new source for a full-rank Cross: draw another mutation
            blocks = list(arch.blocks)
            blocks[i - 1] = new_b
            return dataclasses.replace(arch, blocks=tuple(blocks))
        raise ArchValidationError(None, "<space>", c.name, "no choice has more than one option; cannot mutate")

    def mutate_local(self, arch: Arch, rng: np.random.Generator) -> Arch:
        """A small edit of a block the output depends on: one width, token count, cross depth or rank one
        step up or down its list, a categorical op choice (e.g. the cross form) re-drawn, FM flipped, the
        embedding width one step (with `emb_dims`), or a logit term (`first_order`, `field_fm`) flipped (with
        that choice). The wiring and the ops stay: the search refines a strong
        arch (a DLRM or DCN-v2 seed) instead of jumping to another DAG, as `mutate` often does.
        Falls back to `mutate` when no local edit fits (e.g. every live field has one option)."""
        self.validate(arch)
        c = self.config
        # half the local edits of a space that searches table widths move one table a step
        if c.table_dims and rng.random() < 0.5 and (out := self._table_step(arch, rng)) is not None:
            return out
        moves = self._local_moves(arch)
        for _ in range(100):
            if not moves:
                break
            move = moves[int(rng.integers(len(moves)))]
            outs, draws = self._move_outcomes(arch, move)
            if not outs:
                continue
            out = outs[int(rng.integers(len(outs)))] if draws else outs[0]
            if move[0] is None:  # the embedding width or a logit term: no block to check
                return out
            if (fits := self._local_fit(arch, out, move[0])) is not None:
                return fits
        return self.mutate(arch, rng)

    def mutate_widths(self, arch: Arch, rng: np.random.Generator) -> Arch:
        """`arch` with its embedding widths alone moved one step: one table one step in its choices or, in a
        space with `emb_dims`, the common width one step along them (one move in as many as there are tables,
        plus one). The blocks and logit terms stay: the widths step of "structure first, widths second"
        (docs/embedding-search.md)."""
        self.validate(arch)
        self._need_tables()
        c = self.config
        near = _near(tuple(sorted(c.emb_dims)), self.common_width(arch))
        if near and rng.random() < 1 / (len(c.tables) + 1):
            return self._at_emb_dim(arch, near[int(rng.integers(len(near)))])
        out = self._table_step(arch, rng)
        if out is None:
            raise ArchValidationError(None, "table_dims", list(c.table_dims), "no table width can move")
        return out

    def width_neighbours(self, arch: Arch) -> list[Arch]:
        """The archs of `local_neighbours` that differ from `arch` in embedding widths alone."""
        same = (arch.blocks, arch.first_order, arch.field_fm)
        return [a for a in self.local_neighbours(arch) if (a.blocks, a.first_order, a.field_fm) == same]

    def _local_moves(self, arch: Arch) -> list[tuple[Any, ...]]:
        """The kinds of edit `mutate_local` draws from, in a fixed order: (block, field[, arg name]) of a live
        block, (None, "emb_dim" / "first_order" / "field_fm"), or with `branch_moves` (last block, "branch" /
        "prune")."""
        c = self.config
        live = sorted(i for i, p in arch.live_parts().items() if p.dense or p.sparse)
        moves: list[tuple[Any, ...]] = []
        for i in live:
            b, parts = arch.blocks[i - 1], arch.live_parts()[i]
            if parts.dense and not op_spec(b.dense_op).keeps_width(dict(b.dense_args)):
                moves.append((i, "dense_dim"))
            if parts.dense:
                moves += [(i, "arg", n) for n, opts in op_spec(b.dense_op).args if len(opts) > 1]
                if len(self._options(i, "fm")) > 1:
                    moves.append((i, "fm"))
            if parts.sparse and op_spec(b.sparse_op).sized:
                moves.append((i, "sparse_tokens"))
        if len(c.emb_dims) > 1:
            moves.append((None, "emb_dim"))
        moves += [(None, key) for key in ("first_order", "field_fm") if len(getattr(c, key)) > 1]
        last = arch.blocks[-1]
        if c.branch_moves and not is_binary(last.dense_op):
            if len(last.dense_idx) < c.max_inputs and self._unused_block(arch) is not None:
                moves.append((arch.num_blocks, "branch"))
            if len(last.dense_idx) > 1:
                moves.append((arch.num_blocks, "prune"))
        return moves

    @staticmethod
    def _unused_block(arch: Arch) -> int | None:
        """The first block before the last that the output does not depend on (where a branch can go)."""
        live = arch.live_parts()
        return next((k for k in range(1, arch.num_blocks) if k not in live), None)

    def _branches(self, arch: Arch) -> list[Arch]:
        """`arch` with one more input to its last block: an unused block made one unary op over the raw
        inputs (each op of the space that block may take), at the smallest width and each arg's first option."""
        k = self._unused_block(arch)
        assert k is not None
        old, last = arch.blocks[k - 1], arch.blocks[-1]
        fm = False if False in self._options(k, "fm") else self._options(k, "fm")[0]
        outs = []
        for op in self._options(k, "dense_op"):
            spec = op_spec(str(op))
            if spec.arity != 1:
                continue
            new = dataclasses.replace(old, dense_op=op, dense_idx=(0,), sparse_idx=(0,), fm=fm,
                                      dense_dim=min(self._options(k, "dense_dim")),
                                      dense_args=tuple(sorted((n, opts[0]) for n, opts in spec.args)))
            blocks = list(arch.blocks)
            blocks[k - 1] = new
            blocks[-1] = dataclasses.replace(last, dense_idx=tuple(sorted(last.dense_idx + (k,))))
            outs.append(dataclasses.replace(arch, blocks=tuple(blocks)))
        return outs

    def _move_outcomes(self, arch: Arch, move: tuple[Any, ...]) -> tuple[list[Arch], bool]:
        """The archs one move of `_local_moves` can give, unchecked, each move's smaller value first, and
        whether `mutate_local` draws among them (a width, a depth, an op choice) or takes the one (a flip)."""
        c, near = self.config, _near
        i, what = move[0], move[1]
        if what in ("first_order", "field_fm"):
            return [_flip(arch, what)], False
        if what == "emb_dim":
            return [self._at_emb_dim(arch, d) for d in near(tuple(sorted(c.emb_dims)), self.common_width(arch))], True
        b = arch.blocks[i - 1]
        if what == "branch":
            return self._branches(arch), True
        if what == "prune":
            return [dataclasses.replace(arch, blocks=arch.blocks[:-1] + (dataclasses.replace(
                b, dense_idx=tuple(x for x in b.dense_idx if x != s)),)) for s in b.dense_idx], True
        if what == "arg":
            opts = tuple(op_spec(b.dense_op).arg_options(move[2]))
            numeric = all(isinstance(o, int) and not isinstance(o, bool) for o in opts)
            values = near(opts, b.arg(move[2])) if numeric else [o for o in opts if o != b.arg(move[2])]
            news = [dataclasses.replace(b, dense_args=tuple(sorted({**dict(b.dense_args), move[2]: v}.items())))
                    for v in values]
        elif what == "fm":
            news = [dataclasses.replace(b, fm=not b.fm)]
        else:
            news = [dataclasses.replace(b, **{what: v}) for v in near(self._options(i, what), getattr(b, what))]
        outs = []
        for new_b in news:
            blocks = list(arch.blocks)
            blocks[i - 1] = new_b
            outs.append(dataclasses.replace(arch, blocks=tuple(blocks)))
        return outs, what != "fm"

    def _local_fit(self, arch: Arch, out: Arch, block: int | None) -> Arch | None:
        """`out` validated, or None when its edited block (if any) breaks its op's rule, the network does not
        depend on the edit (a full-rank cross's rank: same key) or it leaves the space."""
        if block is not None:
            spec = op_spec(out.blocks[block - 1].dense_op)
            if spec.check is not None and spec.check(out.blocks[block - 1]) is not None:
                return None
        if out.key() == arch.key():
            return None
        try:
            return self.validate(out)
        except ArchValidationError:
            return None

    def local_neighbours(self, arch: Arch) -> list[Arch]:
        """Every distinct arch one `mutate_local` edit away from `arch`, in a fixed order (each move's smaller
        value first): the whole neighbourhood that local mutation draws from, e.g. to train all of it.
        Edits the network does not depend on (same key) are left out."""
        self.validate(arch)
        c = self.config
        out: dict[str, Arch] = {}
        for move in self._local_moves(arch):
            for candidate in self._move_outcomes(arch, move)[0]:
                fits = self._local_fit(arch, candidate, move[0])
                if fits is not None:
                    out.setdefault(fits.key(), fits)
        if c.table_dims:  # each searched table one step narrower or wider (never every table dropped)
            options, common = self._table_options(arch), self.common_width(arch)
            for name in c.tables:
                for w in _near(options, arch.table_width(name, common)):
                    moved = self._with_tables(arch, {name: w})
                    if any(moved.table_width(n, common) for n in c.tables) and moved.key() != arch.key():
                        out.setdefault(moved.key(), self.validate(moved))
        return list(out.values())

    def _mutate_arg(self, b: BlockChoice, rng: np.random.Generator) -> BlockChoice | None:
        """`b` with one of its dense op's own choices re-drawn to another value (None: the op has none)."""
        spec = op_spec(b.dense_op)
        names = [n for n, opts in spec.args if len(opts) > 1]
        if not names:
            return None
        name = names[int(rng.integers(len(names)))]
        opts = [o for o in spec.arg_options(name) if o != b.arg(name)]
        args = dict(b.dense_args)
        args[name] = opts[int(rng.integers(len(opts)))]
        return dataclasses.replace(b, dense_args=tuple(sorted(args.items())))

    # -- validation ---------------------------------------------------------------------------------
    def validate(self, arch: Arch) -> Arch:
        """Check `arch` fits this space; raise ArchValidationError naming the block and field. Returns arch."""
        c = self.config
        if not isinstance(arch, Arch):
            raise ArchValidationError(None, "<arch>", type(arch).__name__, "expected an Arch")
        if arch.num_blocks != c.num_blocks:
            raise ArchValidationError(None, "blocks", arch.num_blocks,
                                      f"space {c.name!r} has {c.num_blocks} blocks")
        if arch.emb_dim is not None and arch.emb_dim not in c.emb_dims:
            raise ArchValidationError(None, "emb_dim", arch.emb_dim, f"space {c.name!r} allows " + (
                f"one of {list(c.emb_dims)}" if c.emb_dims else "none (no space.emb_dims): leave the key out"))
        self._validate_tables(arch)
        for key in ("first_order", "field_fm"):
            if getattr(arch, key) not in getattr(c, key):
                raise ArchValidationError(None, key, getattr(arch, key), (
                    f"space {c.name!r} has no such term (space.{key}: [false, true] adds the choice)"
                    if getattr(arch, key) else f"space {c.name!r} gives every arch one (space.{key}: [true])"))
        for i, b in enumerate(arch.blocks, start=1):
            for name in ("dense_idx", "sparse_idx"):
                v = getattr(b, name)
                if not 1 <= len(v) <= c.max_inputs:
                    raise ArchValidationError(i, name, list(v), f"expected 1..{c.max_inputs} sources")
                if any(x < 0 or x >= i for x in v):
                    raise ArchValidationError(i, name, list(v), f"sources must lie in 0..{i - 1}")
                if list(v) != sorted(set(v)):
                    raise ArchValidationError(i, name, list(v), "sources must be increasing without repeats")
            for name in ("dense_left_idx", "dense_right_idx"):
                v = getattr(b, name)
                if not 0 <= v < i:
                    raise ArchValidationError(i, name, v, f"source must lie in 0..{i - 1}")
            for name in MICRO_FIELDS:
                options = self._options(i, name)
                v = getattr(b, name)
                if v not in options or type(v) is not type(options[0]):
                    raise ArchValidationError(i, name, v, f"expected one of {list(options)}")
            self._validate_args(i, b)
        return arch

    def _validate_tables(self, arch: Arch) -> None:
        c = self.config
        if not arch.table_dims:
            return
        if not c.table_dims:
            raise ArchValidationError(None, "table_dims", dict(arch.table_dims), f"space {c.name!r} searches no table "
                                      "widths (no space.table_dims): leave the key out")
        common = self.common_width(arch)
        for name, w in arch.table_dims:
            if w not in c.table_dims and w != common:
                raise ArchValidationError(None, f"table_dims.{name}", w, f"expected one of {list(c.table_dims)}")
            if w > common:
                raise ArchValidationError(None, f"table_dims.{name}", w, f"wider than the common width {common}")
            if c.tables and name not in c.tables:
                raise ArchValidationError(None, f"table_dims.{name}", w, f"not a searched field ({list(c.tables)})")

    @staticmethod
    def _validate_args(i: int, b: BlockChoice) -> None:
        spec = op_spec(b.dense_op)
        args = dict(b.dense_args)
        if set(args) != {n for n, _ in spec.args}:
            raise ArchValidationError(i, "dense_args", args,
                                      f"{b.dense_op} takes {[n for n, _ in spec.args] or 'no args'}")
        for name, options in spec.args:
            if args[name] not in options or type(args[name]) is not type(options[0]):
                raise ArchValidationError(i, f"dense_args.{name}", args[name], f"expected one of {list(options)}")
        reason = spec.check(b) if spec.check is not None else None
        if reason is not None:
            raise ArchValidationError(i, "dense_args", args, reason)


def _near(options: tuple[Any, ...], now: Any) -> list[Any]:
    """The values beside `now` in `options` (ordered as the config lists them): none if it is not there."""
    if now not in options:
        return []
    j = options.index(now)
    return [options[k] for k in (j - 1, j + 1) if 0 <= k < len(options)]


def _flip(arch: Arch, term: str) -> Arch:
    """`arch` with logit term `term` ("first_order" or "field_fm") switched."""
    if term == "first_order":
        return dataclasses.replace(arch, first_order=not arch.first_order)
    return dataclasses.replace(arch, field_fm=not arch.field_fm)


def get_space(spec: str | SpaceConfig | dict[str, Any] | SearchSpace) -> SearchSpace:
    """A space from a preset name ('nasrec-full', 'nasrec-small'), a SpaceConfig, or a recipe mapping.

    A mapping may name a preset in `base:` and override any SpaceConfig field.
    """
    if isinstance(spec, SearchSpace):
        return spec
    if isinstance(spec, SpaceConfig):
        return SearchSpace(spec)
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise RecipeError("space", "name", f"unknown space {spec!r} (known: {', '.join(PRESETS)})")
        return SearchSpace(PRESETS[spec])
    if isinstance(spec, dict):
        spec = dict(spec)
        base = spec.pop("base", None)
        if base is not None:
            if base not in PRESETS:
                raise RecipeError("space", "base", f"unknown space {base!r} (known: {', '.join(PRESETS)})")
            merged = dataclasses.asdict(PRESETS[base])
            if spec and "name" not in spec:
                merged["name"] = f"{base}-custom"  # a changed preset must not pass for the preset
            merged.update(spec)
            spec = merged
        return SearchSpace(from_dict(SpaceConfig, spec, source="space"))
    raise RecipeError("space", "<space>", f"expected a name, mapping or SpaceConfig, got {type(spec).__name__}")
