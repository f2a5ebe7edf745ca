"""The recipe: one YAML file that fixes a whole run (FuxiCTR habit: the same recipe gives the same numbers).

    name: demo
    seed: 0                                                     # the search's draws, the supernet's init
    output: runs/demo
    data:    {synthetic: {profile: criteo, rows: 200000}}     # or {path: DIR} or {raw: {kind, inputs}}
    space:   {base: nasrec-small, num_blocks: 3}               # SpaceConfig fields, `base:` names a preset
    warmup:  {fraction: 0.01}                                   # WarmupConfig: 0 zero-shot, 1 one-shot
    train:   {batch_size: 512}                                  # TrainConfig of the supernet warm-up
    fitness: auto                                               # auto: oneshot if warmup.fraction == 1
    proxy:   {name: sigeo, options: {}, batches: 4}
    oneshot: {finetune_steps: 500, eval_rows: 1200000}
    search:  {strategy: evolution, evolution: {generations: 240}}   # SearchConfig
    final:   {top_k: 15, train: {lr: 0.1}, workers: 1}     # workers: models trained at once (processes)
    execution: {backend: ray, address: auto}                # where scoring/training jobs run (optional)

`seed` seeds the search's random choices and the supernet's weights; the warm-up's data order takes
`train.seed`, and every model trained from scratch (rungs, final stage) `final.train.seed` (train's unless given),
so two runs that differ in `seed` alone share those trainings' noise. To replicate a whole run, move all three
(`--set seed=1 --set train.seed=1 --set final.train.seed=1`; benchmarks/suite.py's `--seed-trains`).

A recipe may start with `extends: other.yaml` (a path relative to it): the other file is read first and
this one is deep-merged over it (mappings merge, anything else replaces), so the one-shot and zero-shot
variants and the test-sized demo are a few lines each. Loading is strict: an unknown key or a wrong type
raises `RecipeError` naming the file and the dotted key.

Paths, since a recipe may come from someone else: `name` is a plain name (letters, digits, `.`, `_`, `-`,
`+`; no separator, no leading dot). A recipe file run by `run`, `compare` or `study` (the one named and any it
extends) writes only under the working folder: an `output`, or a `data.path` the run prepares (with
`data.raw` or `data.synthetic`), outside it (absolute, or escaping with `..`) must be given on the command
line (`--set output=PATH`, `--set data.path=PATH`); see `check_output`. `overwrite` and `data.overwrite` come
from the command line or the recipe named on it, never from a file reached through `extends:` (a shared base
cannot grant permission to replace).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from ctrnas.config import from_dict, load_yaml, to_dict
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.readers.formats import format_names
from ctrnas.data.synthetic_profiles import get_structure, structure_names
from ctrnas.errors import CtrnasError, RecipeError
from ctrnas.execution.config import ExecutionConfig
from ctrnas.search.build import SearchConfig
from ctrnas.search.strategies import get_strategy
from ctrnas.space import PRESETS, SpaceConfig
from ctrnas.train.config import TrainConfig, WarmupConfig

@dataclass(frozen=True)
class SyntheticData:
    """A synthetic dataset with a known click model (`ctrnas.data.synthetic.generate`); `settings` are
    SyntheticSettings overrides (over those of the named `structure`), checked by the generator."""

    profile: Literal["criteo", "avazu", "kdd2012"] = "criteo"
    rows: int = 1_000_000
    seed: int = 0
    structure: str = "default"  # a name in ctrnas.data.synthetic_profiles.STRUCTURES, or planted:SEED
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.rows < 1:
            raise RecipeError("recipe", "data.synthetic.rows", f"expected >= 1, got {self.rows}")
        if get_structure(self.structure) is None:
            raise RecipeError("recipe", "data.synthetic.structure",
                              f"unknown structure {self.structure!r}; expected one of: {structure_names()}")


@dataclass(frozen=True)
class RawData:
    """Raw log files to prepare with `data.prepare` settings (`ctrnas prepare KIND`)."""

    kind: str  # a registered raw format (`ctrnas.data.readers.formats`)
    inputs: tuple[str, ...]

    def __post_init__(self):
        if self.kind not in format_names():
            raise RecipeError("recipe", "data.raw.kind",
                              f"expected one of {', '.join(map(repr, format_names()))}, got {self.kind!r}")
        if not self.inputs:
            raise RecipeError("recipe", "data.raw.inputs", "expected at least one input file")


@dataclass(frozen=True)
class DataSection:
    """Where the prepared dataset folder is. With `raw` or `synthetic`, it is made at `path` (default
    `<output>/data`) unless a complete folder from the same source is already there; with neither, `path`
    must be a prepared folder. A complete folder made from another source is an error unless `overwrite`."""

    path: str | None = None
    raw: RawData | None = None
    synthetic: SyntheticData | None = None
    prepare: PrepareConfig = PrepareConfig()
    overwrite: bool = False  # replace a prepared folder made from another source (else: an error naming it)

    def __post_init__(self):
        if self.raw is not None and self.synthetic is not None:
            raise RecipeError("recipe", "data", "give either data.raw or data.synthetic, not both")
        if self.raw is None and self.synthetic is None and self.path is None:
            raise RecipeError("recipe", "data", "give data.path (a prepared folder), data.raw or data.synthetic")


@dataclass(frozen=True)
class ProxyConfig:
    """The zero-cost proxy used as fitness: registry `name` with `options`, scored on `batches` (k) training
    batches of `batch_size` rows drawn once per search right after the warm-up rows.

    For sigeo without a `preset` option, the preset follows the warm-up (SiGeo App. E): zero_shot at
    fraction 0, warmup_recsys (loss term on) after a warm-up. A proxy with its own `k` option gets `batches`.
    init: how a candidate gets its weights for scoring; auto = "fresh" (seeded re-initialisation, true
    zero-shot) when there was no warm-up, else "inherit" (the warmed-up supernet's slices)."""

    name: str = "sigeo"
    options: dict[str, Any] = field(default_factory=dict)
    batches: int = 4
    batch_size: int | None = None  # None: train.batch_size
    init: Literal["auto", "inherit", "fresh"] = "auto"

    def __post_init__(self):
        if self.batches < 1:
            raise RecipeError("recipe", "proxy.batches", f"expected >= 1, got {self.batches}")


@dataclass(frozen=True)
class OneShotConfig:
    """Inherited-weight evaluation (NASRec `eval_subnet_from_supernet.py`): optional fine-tuning of the
    last linear layer only (Adagrad, cosine) on training rows after the warm-up rows, then the log loss on
    the first `eval_rows` validation rows. NASRec: 500 steps at lr 0.04, batch 512; ~1.23M val rows."""

    finetune_steps: int = 500
    lr: float = 0.04
    batch_size: int = 512
    eval_rows: int = 1_228_800
    eval_batch_size: int = 8192

    def __post_init__(self):
        for name in ("finetune_steps",):
            if getattr(self, name) < 0:
                raise RecipeError("recipe", f"oneshot.{name}", f"expected >= 0, got {getattr(self, name)}")
        for name in ("batch_size", "eval_rows", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise RecipeError("recipe", f"oneshot.{name}", f"expected >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class FinalConfig:
    """The final stage: the top_k of the search history (None: search.top_k) are trained from scratch with
    `train` (None: the recipe's train section; keys given here override it) on the first `train_rows`
    training rows (None: all), the best on validation is tested and exported; `baselines` are trained the
    same way for the report."""

    top_k: int | None = None
    train: TrainConfig | None = None
    train_rows: int | None = None
    val_rows: int | None = None
    test_rows: int | None = None
    baselines: tuple[str, ...] = ()
    # what the export is chosen from: "all" (the retrained top-k and the baselines: the export is never worse
    # on validation than a baseline the run trained) or "candidates" (the searched archs; a baseline only when
    # none is usable)
    choose_from: Literal["all", "candidates"] = "all"
    export: bool = True
    # "auto": each op's LayerNorm on only in models whose logit holds a product (product degree >= 2: a
    # Dot-Product or FM term), which mostly diverge without it (ctrnas.train.normalise, benchmarks/RESULTS.md);
    # false: off for all, as NASRec's stand-alone training (main_train.get_model;
    # docs/nasrec.md); null: the space's setting
    layernorm: bool | Literal["auto"] | None = "auto"
    workers: int = 1  # models trained at once in spawned processes (one torch thread each); same results
    # how the from-scratch models draw their embedding tables: "torchrec" (uniform +-sqrt(1/rows), the
    # baselines' init; 0.0007-0.0020 lower test log loss on 4 of 4 subnets tried, benchmarks/RESULTS.md)
    # or "nasrec" (Xavier-normal, as NASRec's code)
    embedding_init: Literal["torchrec", "nasrec"] = "torchrec"
    # how they draw their dense weights: "nasrec" (Xavier-uniform linears and cross kernels, zero bias, as
    # NASRec's code) or "torchrec" (PyTorch's nn.Linear default and TorchRec's crossnet init, as the baseline
    # modules draw theirs; `ctrnas.supernet.export.reinit`). torchrec trained 21 of 25 random ctrnas-small
    # subnets lower (mean -0.0025 test log loss at 1M rows) and DLRM by 0.003, DCN-v2 alike (docs/results.md),
    # so it is the default; a searched arch then starts where its baseline does
    dense_init: Literal["nasrec", "torchrec"] = "torchrec"
    # GiB the final stage may allocate; null: what the machine (or its cgroup) has available. Before it starts
    # `workers` processes it estimates one model's memory and starts fewer, or stops, when they would not fit
    memory_limit_gb: float | None = None
    # widths of space.emb_dims at which the best candidate is also retrained (the pick is by val log loss as
    # for the top-k): short trainings cannot rank the table width, since wider tables pay off only on the
    # full data (docs/multifidelity.md); each extra width is one more FTE
    emb_dims: tuple[int, ...] = ()
    # "early-stop": every training of the stage (top-k, baselines, verdict seeds) runs until val stops
    # improving (`ctrnas.train.config.early_stopping`: up to 20 epochs, keys given in `train` stand);
    # "nasrec": NASRec's fixed protocol, exactly `train.epochs` on the cosine schedule
    protocol: Literal["early-stop", "nasrec"] = "early-stop"
    # the training length, in epochs, that a rung's `fraction` and the FTE unit refer to under "early-stop"
    # (where the real length follows the data and each training reports its own)
    expected_epochs: int = 2
    # training seeds of the export and of the best other model for the verdict (1: no verdict)
    verdict_seeds: int = 2

    def __post_init__(self):
        if self.expected_epochs < 1:
            raise RecipeError("recipe", "final.expected_epochs", f"expected >= 1, got {self.expected_epochs}")
        if self.verdict_seeds < 1:
            raise RecipeError("recipe", "final.verdict_seeds", f"expected >= 1, got {self.verdict_seeds}")
        if len(set(self.emb_dims)) != len(self.emb_dims) or not all(
                isinstance(d, int) and d > 0 for d in self.emb_dims):
            raise RecipeError("recipe", "final.emb_dims",
                              f"expected distinct positive integers, got {list(self.emb_dims)}")
        if self.memory_limit_gb is not None and not self.memory_limit_gb > 0:
            raise RecipeError("recipe", "final.memory_limit_gb", f"expected > 0 or null, got {self.memory_limit_gb}")
        if self.workers < 1:
            raise RecipeError("recipe", "final.workers", f"expected >= 1, got {self.workers}")
        if self.top_k is not None and self.top_k < 1:
            raise RecipeError("recipe", "final.top_k", f"expected >= 1, got {self.top_k}")
        for name in ("train_rows", "val_rows", "test_rows"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise RecipeError("recipe", f"final.{name}", f"expected >= 1 or null, got {v}")


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*")


@dataclass(frozen=True)
class Recipe:
    """A whole run; `output` may contain `{name}`. See the module docstring for the YAML shape."""

    name: str
    data: DataSection
    seed: int = 0
    output: str = "runs/{name}"
    space: SpaceConfig = PRESETS["nasrec-small"]
    warmup: WarmupConfig = WarmupConfig()
    train: TrainConfig = TrainConfig()
    # "random": no scoring, a free uniform draw per candidate; with `search.strategy: random` the final stage
    # retrains `top_k` random archs: random search at the cost of the final stage (top_k FTE)
    fitness: Literal["auto", "proxy", "oneshot", "random"] = "auto"
    proxy: ProxyConfig = ProxyConfig()
    oneshot: OneShotConfig = OneShotConfig()
    search: SearchConfig = SearchConfig()
    final: FinalConfig = FinalConfig()
    # serial / processes / ray for the search's scoring and the final stage's and study's trainings;
    # unset, each stage follows its own `workers` (search.workers, final.workers)
    execution: ExecutionConfig = ExecutionConfig()
    # torch intra-op threads for the whole run (None: torch's default, one per core). 1 is safer on shared
    # or busy machines, where OpenMP threads spin-wait on each other for a large share of the CPU time.
    threads: int | None = None
    # write into an output folder holding files ctrnas did not write (they are left in place; see
    # ctrnas.pipeline.run_folder); a re-run of the same recipe needs no such permission
    overwrite: bool = False
    source: str = ""  # the file it came from (set by load_recipe; informational)
    # the keys its final.train section gave (set when read): written back even where they equal train's, so an
    # override of train.X leaves a final stage's own X alone
    final_train_keys: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not _PLAIN_NAME.fullmatch(self.name):
            raise RecipeError(self.source or "recipe", "name", f"expected a plain name (letters, digits, '.', '_', "
                              f"'-', '+'; no path separator, no leading dot), got {self.name!r}")
        if self.threads is not None and self.threads < 1:
            raise RecipeError("recipe", "threads", f"expected >= 1 or null, got {self.threads}")
        self._check_emb_dims()
        self._check_seeds()
        self._check_baselines()
        common = max((self.train.embedding_dim, *self.space.emb_dims))
        if self.space.table_dims and max(self.space.table_dims) > common:
            raise RecipeError(self.source or "recipe", "space.table_dims",
                              f"{list(self.space.table_dims)} holds widths above train.embedding_dim "
                              f"{self.train.embedding_dim} and space.emb_dims {list(self.space.emb_dims)}, the common "
                              "widths narrower tables are zero-padded to")
        widths = {self.train.embedding_dim, *self.space.emb_dims}
        if self.space.table_dims:  # the best arch retrained with every table that wide (`at_table_width`)
            widths |= {w for w in self.space.table_dims if 0 < w <= self.train.embedding_dim}
        if not set(self.final.emb_dims) <= widths:
            raise RecipeError(self.source or "recipe", "final.emb_dims",
                              f"{list(self.final.emb_dims)} holds widths the space does not: it has "
                              f"{sorted(widths)} (space.emb_dims, space.table_dims and train.embedding_dim)")

    def _check_seeds(self) -> None:
        from ctrnas.space.baselines import SHIPPED_ARCHS, load_arch

        for i, name in enumerate(self.search.seeds or ()):
            if name in SHIPPED_ARCHS:
                continue
            if not Path(name).is_file():
                raise RecipeError(self.source or "recipe", f"search.seeds[{i}]",
                                  f"{name!r} is neither a shipped arch ({', '.join(SHIPPED_ARCHS)}) nor an arch "
                                  f"JSON file")
            try:
                load_arch(name)
            except CtrnasError as e:
                raise RecipeError(self.source or "recipe", f"search.seeds[{i}]", str(e)) from None

    def _check_baselines(self) -> None:
        """Each of `final.baselines` names a baseline, optionally at a multiple of the run's learning rate
        ("lr*8"), once: a typo stops the run here, not after the search."""
        from ctrnas.train.baseline_names import BASELINE_NAMES, baseline_key, split_lr_scale

        seen = set()
        for i, spec in enumerate(self.final.baselines):
            try:
                name, scale = split_lr_scale(spec)
            except RecipeError as e:
                raise RecipeError(self.source or "recipe", f"final.baselines[{i}]", e.reason) from None
            key = baseline_key(name)
            if key is None:
                raise RecipeError(self.source or "recipe", f"final.baselines[{i}]",
                                  f"unknown baseline {name!r} (known: {', '.join(BASELINE_NAMES)}; NAME*S trains it "
                                  f"at S times the learning rate)")
            if (key, scale) in seen:
                raise RecipeError(self.source or "recipe", f"final.baselines[{i}]", f"{spec!r} is listed twice")
            seen.add((key, scale))

    def _check_emb_dims(self) -> None:
        """Archs of several widths (`space.emb_dims`) can only be scored by training them: the supernet's
        proxy and one-shot scores read its shared tables, of one width, and would score another model."""
        if not self.space.emb_dims or self.fitness_kind == "random":
            return
        why = (f"space.emb_dims {list(self.space.emb_dims)} needs from-scratch scoring (short rungs): proxy "
               f"and one-shot scores read the supernet's tables, all {self.train.embedding_dim} wide")
        if not get_strategy(self.search.strategy).by_rungs:
            raise RecipeError(self.source or "recipe", "search.strategy",
                              f"{why}; the {self.fitness_kind} fitness of strategy {self.search.strategy!r} "
                              "is one of those (use multifidelity, or drop space.emb_dims)")
        rungs = self.search.multifidelity.rungs
        if not rungs:
            raise RecipeError(self.source or "recipe", "search.multifidelity.rungs",
                              f"{why}; the default rungs start with proxy and oneshot (list short rungs)")
        for i, r in enumerate(rungs):
            if r.fitness in ("proxy", "oneshot"):
                raise RecipeError(self.source or "recipe", f"search.multifidelity.rungs[{i}].fitness",
                                  f"{why}; got {r.fitness!r}")

    def search_space(self, schema):
        """The recipe's space for data of `schema` (`SearchSpace.for_fields`: the sparse fields whose table
        widths are searched and the common width, `train.embedding_dim`)."""
        from ctrnas.space import get_space

        return get_space(self.space).for_fields(schema.sparse_names, self.train.embedding_dim)

    @property
    def output_dir(self) -> Path:
        return Path(self.output.format(name=self.name))

    @property
    def data_dir(self) -> Path:
        return Path(self.data.path) if self.data.path else self.output_dir / "data"

    @property
    def fitness_kind(self) -> str:
        """"proxy" or "oneshot": auto follows NASRec (one-shot scores inherited weights after a full warm-up)."""
        if self.fitness != "auto":
            return self.fitness
        return "oneshot" if self.warmup.fraction >= 1.0 else "proxy"

    @property
    def final_train(self) -> TrainConfig:
        """The final stage's training: `final.train` (else `train`), under `final.protocol`."""
        from ctrnas.train.config import early_stopping

        cfg = self.final.train if self.final.train is not None else self.train
        if self.final.protocol == "early-stop":
            return early_stopping(cfg, frozenset(self.final_train_keys))
        return cfg

    @property
    def reference_epochs(self) -> int:
        """Epochs of the training that rung fractions and the FTE unit refer to: the fixed protocol's length,
        or `final.expected_epochs` when the length follows the data."""
        return self.final_train.epochs if self.final.protocol == "nasrec" else self.final.expected_epochs

    @property
    def seed_names(self) -> tuple[str, ...]:
        """The archs that start evolution's population (`search.seeds`: shipped names or arch files, by default
        dlrm-like and dcnv2-like); shipped ones that do not fit the space are left out."""
        from ctrnas.space.baselines import BASELINE_ARCHS

        return self.search.seeds if self.search.seeds is not None else BASELINE_ARCHS

    @property
    def top_k(self) -> int:
        return self.final.top_k if self.final.top_k is not None else self.search.top_k


# ------------------------------------------------------------------------------------------------------
# Loading, merging, overrides
# ------------------------------------------------------------------------------------------------------


def deep_merge(base: dict, over: dict) -> dict:
    """`over` on top of `base`: mappings merge key by key, any other value replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _read_with_extends(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    path = Path(path)
    if path.resolve() in seen:
        chain = " -> ".join(str(p) for p in (*seen, path.resolve()))
        raise RecipeError(str(path), "extends", f"circular extends: {chain}")
    data = load_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise RecipeError(str(path), "extends", f"expected a file name, got {type(parent).__name__} {parent!r}")
    parent_path = (path.parent / parent) if not Path(parent).is_absolute() else Path(parent)
    if not parent_path.exists():
        raise RecipeError(str(path), "extends", f"no such recipe {str(parent_path)!r}")
    base = _read_with_extends(parent_path, (*seen, path.resolve()))
    for key, value in (("overwrite", base.get("overwrite")),
                       ("data.overwrite", (base.get("data") or {}).get("overwrite")
                        if isinstance(base.get("data"), dict) else None)):
        if value:
            raise RecipeError(str(parent_path), key, "a recipe reached through `extends:` cannot grant permission "
                              "to overwrite; set it in the recipe you run, or on the command line "
                              f"(--set {key}=true)")
    return deep_merge(base, data)


def check_output(recipe: "Recipe", source: str, overrides=()) -> None:
    """A recipe file run by a command that writes to its output (`run`, `compare`, `study`) writes only under
    the working folder: its `output`, and its `data.path` when the run prepares the data there (`data.raw`,
    `data.synthetic`); elsewhere needs `--set output=...` / `--set data.path=...` (a recipe only read for
    settings is not checked, nor a `data.path` that is only read)."""
    given = {str(o).split("=", 1)[0].strip() for o in overrides}
    writes = [("output", recipe.output, recipe.output_dir)]
    if recipe.data.path and (recipe.data.raw is not None or recipe.data.synthetic is not None):
        writes.append(("data.path", recipe.data.path, Path(recipe.data.path)))
    for key, value, path in writes:
        if key in given or key.split(".")[0] in given:
            continue
        if not Path(os.path.abspath(path)).is_relative_to(os.getcwd()):
            raise RecipeError(source, key, f"{value!r} is outside the working folder ({os.getcwd()}); a recipe file "
                              f"writes only under it: give such a path on the command line (--set {key}=PATH)")


def _resolve_space(data: dict, source: str) -> dict:
    """Expand `space: NAME` or `space: {base: NAME, ...}` into full SpaceConfig fields."""
    space = data.get("space")
    if space is None:
        return data
    if isinstance(space, str):
        space = {"base": space}
    if not isinstance(space, dict):
        raise RecipeError(source, "space", f"expected a preset name or a mapping, got {type(space).__name__}")
    space = dict(space)
    base = space.pop("base", None)
    if base is not None:
        if base not in PRESETS:
            raise RecipeError(source, "space.base", f"unknown space {base!r} (known: {', '.join(PRESETS)})")
        merged = to_dict(PRESETS[base])
        if space and "name" not in space:
            merged["name"] = f"{base}-custom"  # a changed preset must not pass for the preset
        merged.update(space)
        space = merged
    return {**data, "space": space}


def parse_override(text: str) -> tuple[list[str], Any]:
    """'a.b.c=value' -> (['a','b','c'], value parsed as YAML, so 0.01 is a float and [1,2] a list)."""
    if "=" not in text:
        raise RecipeError("override", text, "expected KEY=VALUE (e.g. warmup.fraction=0.1)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise RecipeError("override", text, "expected a dotted key before '=' (e.g. search.workers=2)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict, overrides: tuple[str, ...] | list[str]) -> dict:
    """Set each 'a.b=c' in the raw mapping (missing intermediate mappings are created)."""
    data = copy.deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise RecipeError("override", text, f"'{'.'.join(path[:i + 1])}' is not a mapping")
            node = child
        node[path[-1]] = value
    return data


def recipe_from_dict(data: dict, source: str = "<dict>", overrides: tuple[str, ...] | list[str] = ()) -> Recipe:
    """A Recipe from a plain mapping (plus overrides), with the same strict checks as a file."""
    data = dict(data)
    if isinstance(data.get("space"), str):
        data["space"] = {"base": data["space"]}  # so 'space.num_blocks=3' can override a preset by name
    data = _resolve_space(apply_overrides(data, overrides), source)
    final = data.get("final")
    if isinstance(final, dict) and isinstance(final.get("train"), dict) and isinstance(data.get("train"), dict):
        # final.train lists what differs from the train section (epochs, lr...); the rest is inherited
        data["final"] = {**final, "train": deep_merge(data["train"], final["train"])}
        data["final_train_keys"] = sorted(final["train"])
    data.setdefault("source", source)
    try:
        return _fitness_direction(from_dict(Recipe, data, source=source), data.get("search"), source)
    except RecipeError as e:
        for text in overrides:  # name the override that put the bad value there
            key = text.split("=", 1)[0].strip()
            if e.key == key or e.key.startswith(key + ".") or key.startswith(e.key + "."):
                raise RecipeError(f"{source}, override '{text}'", e.key, e.reason) from None
        raise


# the search sections with a direction (`maximize`), which the fitness sets
_DIRECTED = tuple(f.name for f in dataclasses.fields(SearchConfig)
                  if dataclasses.is_dataclass(f.default) and "maximize" in {g.name for g in dataclasses.fields(f.default)})


def _fitness_direction(recipe: Recipe, search: Any, source: str) -> Recipe:
    """The search strategies' `maximize` set from the fitness (a proxy score is maximized, the one-shot
    validation log loss minimized): a recipe value that disagrees is an error, not silently replaced."""
    maximize = recipe.fitness_kind in ("proxy", "random")
    for name in _DIRECTED:
        given = search.get(name, {}) if isinstance(search, dict) else {}
        if isinstance(given, dict) and given.get("maximize", maximize) != maximize:
            raise RecipeError(source, f"search.{name}.maximize",
                              f"the {recipe.fitness_kind} fitness is {'maximized' if maximize else 'minimized'}; "
                              f"expected {str(maximize).lower()} or no key, got {given['maximize']!r}")
    s = recipe.search
    return dataclasses.replace(recipe, search=dataclasses.replace(
        s, **{name: dataclasses.replace(getattr(s, name), maximize=maximize) for name in _DIRECTED}))


def load_recipe(path: str | Path, overrides: tuple[str, ...] | list[str] = ()) -> Recipe:
    """Read a recipe file (following `extends:`), apply 'key=value' overrides, check every key and type."""
    data = _read_with_extends(Path(path))
    return recipe_from_dict(data, source=str(path), overrides=overrides)


def override(recipe: Recipe, *overrides: str) -> Recipe:
    """A copy of `recipe` with 'a.b=c' overrides applied and checked as strictly as a file."""
    return recipe_from_dict(recipe_to_dict(recipe), source=recipe.source or "<recipe>", overrides=overrides)


def recipe_to_dict(recipe: Recipe) -> dict:
    """The resolved recipe as plain data (what a results folder records), without the search direction: the
    fitness sets it, so an override of the warm-up or fitness changes it too. `final.train` keeps only what
    differs from `train` or was given there, as a recipe file writes it, so `--set train.lr=...` on a run's
    recipe.yaml reaches the final stage too (unless the final stage has its own value)."""
    given = set(recipe.final_train_keys)
    data = recipe_settings(recipe)
    final = data.get("final")
    if isinstance(final, dict) and isinstance(final.get("train"), dict) and isinstance(data.get("train"), dict):
        own = _differs(data["train"], final["train"])
        final["train"] = {k: v for k, v in final["train"].items() if k in given or k in own}
    return data


def recipe_settings(recipe: Recipe) -> dict:
    """The resolved recipe as plain data to compare two recipes by: every setting in full (`final.train`
    too), without the search direction and the record of which final.train keys the file gave."""
    data = to_dict(recipe)
    data.pop("final_train_keys", None)
    for name in _DIRECTED:
        data["search"][name].pop("maximize", None)
    return data


def _differs(base: dict, full: dict) -> dict:
    """The part of `full` that `deep_merge(base, ...)` needs to give `full` back."""
    out = {}
    for k, v in full.items():
        if k in base and base[k] == v:
            continue
        out[k] = _differs(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def dump_recipe(recipe: Recipe) -> str:
    """The resolved recipe as YAML; loading it gives back an equal Recipe."""
    return yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False)
