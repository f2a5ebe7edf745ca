"""Search spaces: a frozen `SpaceConfig`, the presets (NASRec-Full / NASRec-Small as in the paper, and
ctrnas-small / ctrnas-full which add DCN-v2's Cross), sampling and mutation. Ops come from the op table."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ctrnas.config import from_dict
from ctrnas.errors import ArchValidationError, RecipeError
from ctrnas.space.arch import Arch, BlockChoice
from ctrnas.space.ops import op_spec, ops_of_kind

# NASRec-Full's ops, listed here (not derived from the op table) so that new ops change no paper space.
NASREC_FULL_DENSE_OPS = ("fc", "sum", "gating", "dot")
NASREC_FULL_SPARSE_OPS = ("efc", "attention")
CTRNAS_DENSE_DIMS = (16, 32, 64, 128, 256, 400, 512, 768, 1024)
MACRO_FIELDS = ("dense_idx", "sparse_idx", "dense_left_idx", "dense_right_idx")
MICRO_FIELDS = ("dense_op", "sparse_op", "dense_dim", "sparse_tokens", "dense_sparse_merge", "fm")


@dataclass(frozen=True)
class SpaceConfig:
    """A NASRec-style space (docs/nasrec.md); every field can be set in a recipe's `space:` mapping."""

    name: str = "custom"
    num_blocks: int = 7
    dense_ops: tuple[str, ...] = NASREC_FULL_DENSE_OPS
    sparse_ops: tuple[str, ...] = NASREC_FULL_SPARSE_OPS
    dense_dims: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 768, 1024)
    sparse_tokens: tuple[int, ...] = (16, 32, 48, 64)
    emb_dim: int = 16
    max_inputs: int = 4  # NASRec: at most 4 dense / sparse sources per block
    merge_tokens: int = 8  # tokens added by the dense->sparse merge (NASRec: 8 x 16 = 128)
    dense_sparse_merge: tuple[bool, ...] = (False, True)
    fm: tuple[bool, ...] = (False, True)
    attention_heads: int = 8  # NASRec: 8 heads over d = 16
    # "binomial": 1 + Binomial(min(i-1, max_inputs-1), 0.5) sources (NASRec `binomial-0.5`); "single": one.
    fan_in: Literal["binomial", "single"] = "binomial"
    # NASRec `--use_layernorm`: LayerNorm after each op (FC, Sum, Gating, Dot, EFC, FM, the Attention
    # token projection). False makes those norms the identity, in the supernet and in exported models.
    # Attention's two residual LayerNorms stay either way, as in NASRec's Transformer.
    layernorm: bool = True

    def __post_init__(self):
        src = f"space {self.name!r}"

        def need(ok: bool, key: str, why: str):
            if not ok:
                raise RecipeError(src, key, why)

        need(self.num_blocks >= 1, "num_blocks", "must be >= 1")
        for key, kind in (("dense_ops", "dense"), ("sparse_ops", "sparse")):
            known = ops_of_kind(kind)
            need(len(getattr(self, key)) > 0 and set(getattr(self, key)) <= set(known), key,
                 f"must be a non-empty subset of {list(known)}")
        for key in ("dense_ops", "sparse_ops", "dense_dims", "sparse_tokens", "dense_sparse_merge", "fm"):
            v = getattr(self, key)
            need(len(v) > 0 and len(set(v)) == len(v), key, "must be a non-empty list without repeats")
        need(all(d > 0 for d in self.dense_dims), "dense_dims", "widths must be positive")
        need(all(t > 0 for t in self.sparse_tokens), "sparse_tokens", "token counts must be positive")
        need(self.emb_dim > 0, "emb_dim", "must be positive")
        need(self.max_inputs >= 1, "max_inputs", "must be >= 1")
        need(self.merge_tokens >= 1, "merge_tokens", "must be >= 1")
        need(self.attention_heads >= 1 and self.emb_dim % self.attention_heads == 0, "attention_heads",
             f"must divide emb_dim={self.emb_dim}")

    @property
    def max_dense_dim(self) -> int:
        return max(self.dense_dims)

    @property
    def max_sparse_tokens(self) -> int:
        return max(self.sparse_tokens)


PRESETS = {
    "nasrec-full": SpaceConfig(name="nasrec-full", dense_ops=("fc", "sum", "gating", "dot"),
                               sparse_ops=("efc", "attention")),
    "nasrec-small": SpaceConfig(name="nasrec-small", dense_ops=("fc", "dot"), sparse_ops=("efc",)),
    # NASRec's spaces plus DCN-v2's Cross, DLRM's interaction, `concat` and the `none` sparse op, and
    # DCN-v2's hidden width 400: the ops and width that make DLRM and DCN-v2 points of the space
    # (ctrnas/space/archs/).
    # `concat` (last block only) ends DCN-v2's parallel form.
    "ctrnas-small": SpaceConfig(name="ctrnas-small", dense_ops=("fc", "dot", "cross", "interaction", "concat"),
                                sparse_ops=("efc", "none"), dense_dims=CTRNAS_DENSE_DIMS),
    "ctrnas-full": SpaceConfig(name="ctrnas-full",
                               dense_ops=("fc", "sum", "gating", "dot", "cross", "interaction", "concat"),
                               sparse_ops=("efc", "attention", "none"), dense_dims=CTRNAS_DENSE_DIMS),
}


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

    def _sample_field(self, i: int, name: str, rng: np.random.Generator):
        if name in ("dense_idx", "sparse_idx"):
            return self._sample_sources(i, rng)
        if name in ("dense_left_idx", "dense_right_idx"):
            return int(rng.integers(i))
        options = self._options(i, name)
        return options[int(rng.integers(len(options)))]  # a Python value from the config, never a numpy scalar

    def _options(self, i: int, name: str) -> tuple:
        """The values micro field `name` may take in block i (ops meant for the last block only leave the others)."""
        c = self.config
        options = {"dense_op": c.dense_ops, "sparse_op": c.sparse_ops, "dense_dim": c.dense_dims,
                   "sparse_tokens": c.sparse_tokens, "dense_sparse_merge": c.dense_sparse_merge, "fm": c.fm}[name]
        if name in ("dense_op", "sparse_op") and i < c.num_blocks:
            options = tuple(o for o in options if not op_spec(o).last_block_only) or options
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
        """A random arch: one dense and one sparse op per block, uniform widths, binomial fan-in."""
        blocks = []
        for i in range(1, self.config.num_blocks + 1):
            for _ in range(1000):
                b = BlockChoice(**{f: self._sample_field(i, f, rng) for f in MACRO_FIELDS + MICRO_FIELDS})
                b = self._sample_args(b, rng)
                if b is not None:
                    break
            else:
                raise ArchValidationError(i, "dense_args", self.config.name, "no draw fits the ops' rules")
            blocks.append(b)
        return Arch(tuple(blocks))

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
        single option (e.g. connections of block 1) are skipped by drawing again.
        """
        self.validate(arch)
        c = self.config
        micro = self._micro_fields
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
            return Arch(tuple(blocks))
        raise ArchValidationError(None, "<space>", c.name, "no choice has more than one option; cannot mutate")

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


def get_space(spec: str | SpaceConfig | dict | SearchSpace) -> SearchSpace:
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
