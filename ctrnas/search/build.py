"""The `search:` section of a recipe and the one call that turns it into a ready strategy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ctrnas.errors import RecipeError
from ctrnas.search.constraints import ConstraintConfig, Constraints
from ctrnas.search.evolution import EvolutionConfig
from ctrnas.search.multifidelity import MultiFidelityConfig, RungConfig
from ctrnas.search.predictor import Predictor, PredictorConfig
from ctrnas.search.random_search import RandomSearchConfig
from ctrnas.search.runner import Strategy
from ctrnas.search.space_protocol import SearchSpace
from ctrnas.search.strategies import get_strategy, strategy_names


@dataclass(frozen=True)
class FieldProbeConfig:
    """A search of table widths starts from the seeds with the fields that show no signal dropped
    (`ctrnas.pipeline.fitness.fields`): one seed trained for one epoch on `fraction` of the training rows,
    each field shuffled over `val_rows` validation rows; a field shows signal when its shuffle raises the log
    loss by more than `z` standard errors and by at least `min_share` of the largest field's rise (0: any
    rise; on synthetic Criteo, where every field carries signal, 0.01 dropped 18 real fields whose rise was
    significant but small, docs/embedding-search.md). When even the
    strongest field's rise is below `min_rise` the short training has not learnt the tables yet and the probe
    says so instead of dropping fields. fraction 0: off."""

    fraction: float = 0.0
    val_rows: int = 50_000
    z: float = 2.0
    min_share: float = 0.0
    min_rise: float = 1e-4

    def __post_init__(self) -> None:
        if not 0 <= self.fraction <= 1:
            raise RecipeError("search.field_probe", "fraction", f"expected 0 (off) .. 1, got {self.fraction}")
        if self.val_rows < 1:
            raise RecipeError("search.field_probe", "val_rows", f"expected >= 1, got {self.val_rows}")
        if not 0 <= self.min_share < 1:
            raise RecipeError("search.field_probe", "min_share", f"expected 0 .. <1, got {self.min_share}")


@dataclass(frozen=True)
class SearchConfig:
    """strategy (a registered name, `ctrnas.search.strategies`) picks which sub-config is used; workers > 1
    scores in spawned processes; top_k is how many of the history's best the final stage retrains from scratch
    (NASRec/SiGeo: 15). seed_population: hand-designed archs start evolution's initial population (those
    that fit the space): `seeds`, names of shipped archs (`ctrnas.space.baselines`; null: dlrm-like and
    dcnv2-like) or arch JSON files, such as an earlier run's best_arch.json (a file must fit the space)."""

    strategy: str = "evolution"
    evolution: EvolutionConfig = EvolutionConfig()
    random: RandomSearchConfig = RandomSearchConfig()
    multifidelity: MultiFidelityConfig = MultiFidelityConfig()
    constraints: ConstraintConfig = ConstraintConfig()
    # predictor-guided evolution (evolution and multifidelity): `pool` mutants per child, a random forest
    # on the arch's features and zero-cost proxies picks which are scored (ctrnas.search.predictor)
    predictor: PredictorConfig = PredictorConfig()
    workers: int = 1
    top_k: int = 15
    seed_population: bool = True
    seeds: tuple[str, ...] | None = None
    field_probe: FieldProbeConfig = FieldProbeConfig()

    def __post_init__(self) -> None:
        get_strategy(self.strategy)  # an unknown name is an error naming the known ones
        if self.workers < 1:
            raise RecipeError("search", "workers", f"expected >= 1, got {self.workers}")
        if self.top_k < 1:
            raise RecipeError("search", "top_k", f"expected >= 1, got {self.top_k}")


def make_strategy(
    config: SearchConfig,
    space: SearchSpace,
    *,
    seed: int,
    maximize: bool,
    count_params: Callable[[Any], float] | None = None,
    count_flops: Callable[[Any], float] | None = None,
    count_bytes: Callable[[Any], float] | None = None,
    initial: tuple[Any, ...] = (),
    rungs: tuple[RungConfig, ...] = (),
    rung_maximize: list[bool] | None = None,
    featurize: Callable[[Any], dict[str, Any]] | None = None,
) -> Strategy:
    """The configured strategy; `maximize` comes from the fitness (proxy: True, validation log loss: False).
    `initial`: archs evolution's initial population starts with (used when `config.seed_population`).
    A strategy that scores by rungs: `rungs` (default `config.multifidelity.rungs`) and each rung's direction.
    `featurize(arch) -> {name: value}`: the predictor's inputs (needed when `config.predictor.pool` is set);
    the predictor picks the children of an evolution (alone or under multi-fidelity). `count_bytes(arch)`:
    its embedding tables' bytes, for a memory budget and evolution's `objective: front`."""
    constraints = Constraints(config.constraints, count_params, count_flops, count_bytes)
    initial = tuple(initial) if config.seed_population else ()

    def settings(name: str) -> Any:  # the recipe's section of that name, or the strategy's defaults
        given = getattr(config, name, None)
        return given if given is not None else get_strategy(name).config()

    strategy: Strategy = get_strategy(config.strategy).build(space, settings, seed=seed, maximize=maximize,
                                                   constraints=constraints, initial=initial, rungs=rungs,
                                                   rung_maximize=rung_maximize)
    evolution = getattr(strategy, "evolution", strategy)  # multi-fidelity runs an evolution underneath
    size = getattr(getattr(evolution, "config", None), "population_size", None)
    if initial and size is not None and len(initial) > size:  # the initial population would drop the last seeds
        raise RecipeError("search", "seeds", f"{len(initial)} seed archs fit the space but "
                          f"search.evolution.population_size is {size}: raise it or list fewer seeds")
    if not config.predictor.pool:
        lines = getattr(getattr(evolution, "config", None), "lines_by_predictor", False)
        for name, on in (("predictor.relative", config.predictor.relative), ("evolution.lines_by_predictor", lines)):
            if on:
                raise RecipeError("search", name, "needs the predictor: set search.predictor.pool (>= 2)")
    if config.predictor.pool and hasattr(evolution, "predictor"):
        if featurize is None:
            raise RecipeError("search", "predictor.pool", "this caller gives the predictor no features")
        directions = getattr(strategy, "rung_maximize", None) or [maximize]
        evolution.predictor = Predictor(config.predictor, featurize, list(directions), seed)
    return strategy


def build_strategy(
    name: str,
    space: SearchSpace,
    *,
    seed: int,
    maximize: bool,
    configs: dict[str, Any] | None = None,
    constraints: Constraints | None = None,
    source: str = "search",
    initial: tuple[Any, ...] = (),
) -> Strategy:
    """The strategy called `name` with its config from `configs` (by strategy name; defaults otherwise),
    without a recipe (the vision harness comes here). `source` names where `name` came from in errors;
    `initial` seeds evolution's population. A strategy that scores by rungs needs them: `make_strategy`."""
    entry = get_strategy(name, source)
    if entry.by_rungs:
        raise RecipeError(source, "strategy", f"{name!r} scores by rungs; expected one of "
                          f"{', '.join(map(repr, strategy_names(by_rungs=False)))}")
    configs = configs or {}

    def settings(n: str) -> Any:
        return configs[n] if n in configs else get_strategy(n).config()

    built: Strategy = entry.build(space, settings, seed=seed, maximize=maximize, constraints=constraints,
                                  initial=initial, rungs=(), rung_maximize=None)
    return built


__all__ = ["SearchConfig", "MultiFidelityConfig", "make_strategy", "build_strategy", "strategy_names"]
