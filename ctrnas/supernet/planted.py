"""Planted click models: the logit of a synthetic dataset is an arch of the search space with random weights.

`planted:SEED` / `planted-deep:SEED` (`ctrnas.data.synthetic_profiles`) draw an arch of `PLANTED_SPACE` from SEED
until it is far from every hand design (at least `MIN_EDITS` one-choice edits from each shipped arch,
`ctrnas.space.edit_distance`) and built of what no hand design has: a NASRec Dot-Product reading EFC tokens, and
in the deep class a Dot-Product of a Dot-Product's output, over at least `DEEP_PATH` blocks (the setting
`planted_width` draws every block at one width instead: a narrow plant). Its module is the
project's own export (`ctrnas.supernet.export`) with weights drawn from SEED: Xavier dense weights, N(0, 1)
embedding rows shrunk by the id's frequency rank as the other structures' parameters are (rare ids carry little
signal), and the head scaled so the logit's sd is `planted_sd` and its bias so the mean click rate is the CTR.
The module's output is the logit itself, so the truth is exactly a point of the space, and training that arch
from scratch is the oracle of the data. The generator (`ctrnas.data.synthetic`) takes `PlantedClick` as its
factory: the data layer cannot build a network itself.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.special import expit
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.errors import CtrnasError
from ctrnas.space import PRESETS, Arch, SearchSpace, edit_distance, op_spec
from ctrnas.space.baselines import SHIPPED_ARCHS, baseline_arch
from ctrnas.space.config import space_record

# ctrnas-small at the widths of recipes/synthetic.yaml (the suite's search space), so the search can find it
PLANTED_SPACE = dataclasses.replace(PRESETS["ctrnas-small"], name="planted", dense_dims=(16, 32, 64, 128, 256, 400),
                                    sparse_tokens=(16, 32), dense_sparse_merge=(False,))
DRAW_OPS = ("fc", "dot")  # dense ops a plant is drawn with: none of the hand designs' crosses or interactions
MIN_EDITS = 8  # from every shipped arch
SHALLOW_PATH, DEEP_PATH = 3, 5  # longest chain of live blocks: at most / at least
TRIES = 100_000
EMB_DIM = 16


def _inputs(arch: Arch, i: int) -> set[int]:
    """The sources live block i reads (its dense and sparse inputs; 0 is the stem)."""
    b, parts = arch.blocks[i - 1], arch.live_parts()[i]
    out: set[int] = set()
    if parts.dense:
        out.update((b.dense_left_idx, b.dense_right_idx) if op_spec(b.dense_op).arity == 2 else b.dense_idx)
        if op_spec(b.dense_op).reads_sparse:
            out.update(b.sparse_idx)
    if parts.sparse and op_spec(b.sparse_op).reads_sparse:
        out.update(b.sparse_idx)
    return out


def longest_path(arch: Arch) -> int:
    """The most live blocks on one path from the stem to the head."""
    depth = {0: 0}
    for i in arch.live_parts():
        depth[i] = 1 + max(depth.get(j, 0) for j in _inputs(arch, i))
    return depth[arch.num_blocks]


def dot_reads_efc(arch: Arch) -> bool:
    """A live Dot-Product reads the tokens of a live EFC."""
    live = arch.live_parts()
    return any(arch.blocks[i - 1].dense_op == "dot" and p.dense and any(
        j in live and live[j].sparse and arch.blocks[j - 1].sparse_op == "efc" for j in arch.blocks[i - 1].sparse_idx)
        for i, p in live.items())


def dot_chain(arch: Arch) -> bool:
    """A live Dot-Product reads another live Dot-Product's dense output."""
    live = arch.live_parts()
    return any(arch.blocks[i - 1].dense_op == "dot" and p.dense and any(
        j in live and live[j].dense and arch.blocks[j - 1].dense_op == "dot" for j in arch.blocks[i - 1].dense_idx)
        for i, p in live.items())


def fits(arch: Arch, depth: str) -> bool:
    """Whether `arch` is a plant of depth class `depth` ("shallow" / "deep"); the distance is checked apart."""
    if not dot_reads_efc(arch):
        return False
    path = longest_path(arch)
    if depth == "shallow":
        return path <= SHALLOW_PATH
    return path >= DEEP_PATH and dot_chain(arch)


def shipped_edits(arch: Arch) -> dict[str, int]:
    """Edits from each shipped arch to `arch`'s network (`edit_distance`)."""
    return {name: edit_distance(baseline_arch(name), arch) for name in SHIPPED_ARCHS}


def draw_arch(depth: str, seed: int, width: int = 0) -> Arch:
    """The plant of class `depth` for `seed`: the first draw of `PLANTED_SPACE` (dense ops `DRAW_OPS`) that fits;
    `width` > 0 draws every block at that dense width and the space's fewest tokens (a narrow plant)."""
    if depth not in ("shallow", "deep"):
        raise ValueError(f"depth must be 'shallow' or 'deep', got {depth!r}")
    if width and width not in PLANTED_SPACE.dense_dims:
        raise CtrnasError(f"planted_width {width} is not a width of the space ({list(PLANTED_SPACE.dense_dims)})")
    narrow = dict(dense_dims=(width,), sparse_tokens=(min(PLANTED_SPACE.sparse_tokens),)) if width else {}
    space = SearchSpace(dataclasses.replace(PLANTED_SPACE, dense_ops=DRAW_OPS, **narrow))
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(4,)))
    for _ in range(TRIES):
        arch = space.sample(rng)
        if fits(arch, depth) and min(shipped_edits(arch).values()) >= MIN_EDITS:
            return SearchSpace(PLANTED_SPACE).validate(arch)
    raise CtrnasError(f"no {depth} plant in {TRIES} draws of seed {seed}")


def kjt_of(ids: np.ndarray, names: list[str]) -> KeyedJaggedTensor:
    """[B, F] ids (one per row and field) as the trainer's KJT (`ctrnas.train.batches.make_batch`)."""
    t = torch.as_tensor(ids, dtype=torch.int64)
    b, f = t.shape
    return KeyedJaggedTensor.from_lengths_sync(keys=list(names), values=t.t().reshape(-1).contiguous(),
                                               lengths=torch.ones(b * f, dtype=torch.int32))


def build_model(schema: DatasetSchema, arch: Arch, seed: int):
    """The exported module of `arch` on `schema` with dense weights drawn from `seed` (before the tables and head
    are set): the same module `ctrnas train --arch` trains, LayerNorms on as its final stage has them."""
    from ctrnas.supernet.export import export
    from ctrnas.supernet.fresh import build_supernet

    supernet = build_supernet(schema, SearchSpace(PLANTED_SPACE), seed, emb_dim=EMB_DIM)
    model = export(supernet, arch, init="fresh", seed=seed, copy_stem=False, embedding_init="nasrec",
                   dense_init="nasrec")
    return model.eval()


@torch.no_grad()
def logits(model, ids: np.ndarray, dense: np.ndarray, names: list[str], batch: int = 65_536) -> np.ndarray:
    """The module's logits of rows (ids [N, F], counts [N, D]) as float64."""
    out = [model(torch.as_tensor(dense[s:s + batch], dtype=torch.float32), kjt_of(ids[s:s + batch], names))
           for s in range(0, len(ids), batch)]
    return torch.cat(out).double().numpy() if out else np.zeros(0)


class PlantedClick:
    """The planted click model of a synthetic profile (the generator's `planted` factory; module docstring)."""

    names = ("planted",)

    def __init__(self, features, settings, calib_ids: np.ndarray, calib_dense: np.ndarray):
        self.settings, self.depth, self.seed = settings, settings.planted, settings.planted_seed
        prof = features.profile
        self.schema = DatasetSchema("label", tuple(d.name for d in prof.dense),
                                    tuple(SparseFeature(s.name, c) for s, c in zip(prof.sparse, features.cards)))
        self.field_names = list(self.schema.sparse_names)
        self.arch = draw_arch(self.depth, self.seed, settings.planted_width)
        self.model = build_model(self.schema, self.arch, self.seed)
        self._set_tables(features)
        self._calibrate(calib_ids, calib_dense, settings.ctr if settings.ctr is not None else prof.ctr)

    @torch.no_grad()
    def _set_tables(self, features) -> None:
        """Rows N(0, 1) shrunk by frequency rank as (1 + rank / tail_head) ** -tail_decay; the missing id 0 full."""
        s = self.settings
        g = torch.Generator().manual_seed(self.seed)
        for f, w in enumerate(self.model.stem.embedding_parameters()):
            shrink = torch.ones(w.shape[0], dtype=torch.float64)
            ranks = torch.arange(w.shape[0] - 1, dtype=torch.float64)
            shrink[torch.as_tensor(features.rank_to_id[f])] = (1 + ranks / s.tail_head) ** -s.tail_decay
            w.copy_(torch.randn(w.shape, generator=g, dtype=torch.float64).mul_(shrink[:, None]).float())

    @torch.no_grad()
    def _calibrate(self, ids: np.ndarray, dense: np.ndarray, ctr: float) -> None:
        """Head scaled so the logit's sd on the calibration rows is `planted_sd`, its bias solved for the CTR."""
        head = self.model.net.head
        head.bias.zero_()
        raw = logits(self.model, ids, dense, self.field_names)
        sd = float(raw.std())
        if not sd > 1e-12:
            raise CtrnasError(f"the plant of seed {self.seed} gives one logit for every row; draw another seed")
        self.scale = self.settings.planted_sd / sd
        head.weight.mul_(self.scale)
        z = logits(self.model, ids, dense, self.field_names)
        self.bias = float(brentq(lambda b: expit(z + b).mean() - ctr, -30.0, 30.0, xtol=1e-12))
        head.bias.fill_(self.bias)

    def logit(self, ids: np.ndarray, dense: np.ndarray) -> np.ndarray:
        """The planted logit of rows: the module's output."""
        return logits(self.model, ids, dense, self.field_names)

    def components(self, ids: np.ndarray, dense: np.ndarray) -> dict[str, np.ndarray]:
        return {"planted": self.logit(ids, dense) - self.bias}

    def record(self, field_names: list[str], variance: dict[str, float], total: float) -> dict:
        params = sum(p.numel() for n, p in self.model.named_parameters() if "embedding_bags" not in n)
        return {"bias": self.bias, "logit_variance": total, "component_variance": variance,
                "variance_share": {k: (v / total if total > 0 else 0.0) for k, v in variance.items()},
                "planted": {"depth": self.depth, "seed": self.seed, "width": self.settings.planted_width,
                            "arch": self.arch.to_json(),
                            "arch_key": self.arch.key(), "space": space_record(PLANTED_SPACE),
                            "edits_from_shipped": shipped_edits(self.arch), "longest_path": longest_path(self.arch),
                            "head_scale": self.scale, "dense_parameters": int(params),
                            "weights": "ctrnas.supernet.planted.build_model(schema, arch, seed), tables N(0, 1) "
                                       "shrunk by frequency rank, head scaled to planted_sd"},
                "signal_fields": list(field_names), "noise_fields": []}
